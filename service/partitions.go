package service

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"kmirror/repo"
)

// PartitionRow is one describe row (docs/design.md, "Interfaces").
type PartitionRow struct {
	Mirror string
	// Topic is the source topic; DestinationTopic the topic it is written
	// to on the destination (topic.name.prefix and Topic).
	Topic             string
	DestinationTopic  string
	Partition         int32
	SourceOffset      *int64
	DestinationOffset *int64
	Lag               *int64
	State             PartitionState
	Error             string
	RetryAttempt      int
	LostRecords       int64
	Owner             string
	// ReadOnlyEnforced: nil unknown, else whether a DENY WRITE ACL keeps the
	// destination topic read-only.
	ReadOnlyEnforced *bool
	// LeaseLive: an instance's live session holds the partition's lease.
	// False for a partition nobody owns or whose owner stopped renewing:
	// its state is then what the last owner left, not what is happening.
	LeaseLive bool
	// OwnerRenewedAt is when the owner last renewed its session.
	OwnerRenewedAt *time.Time
	// ProgressedAt is when the checkpoint last moved forward.
	ProgressedAt *time.Time
	// LastMirrored is the last record copied, as of the last state change
	// or checkpoint save; nil before any.
	LastMirrored *LastMirrored
	// DivergentTail is the tail a failback with keep_divergent continued
	// after, nil when none was kept.
	DivergentTail *DivergentTail
	// ThrottledMs is how long the partition's copies have waited for the
	// mirror's replication throttle in all, since it was added.
	ThrottledMs int64
	// Realigning: the partition's new owner is re-aligning it after taking
	// it over; it keeps the state it was left in until alignment has found
	// where to resume.
	Realigning bool
	// LagMs is the lag in time: the age of the oldest source record not yet
	// on the destination, by the database's clock when read; 0 when caught
	// up, nil when unknown (repo.LagMsSQL).
	LagMs *int64
}

// PartitionFilter selects describe rows; empty fields match all.
type PartitionFilter struct {
	Mirror string
	// Topic is an RE2 pattern matched against whole topic names.
	Topic string
	// State is a state name, UNKNOWN included.
	State string
	// Erroring keeps only partitions with an error: FAILED, or retrying
	// in their state (MirrorStatus.Erroring counts them).
	Erroring bool
	// DivergentTail keeps only partitions that kept a divergent tail.
	DivergentTail bool
}

// Describe pages: GET /v1/partitions returns at most a page of rows at a
// time, and a cursor to the next.
const (
	// DefaultPartitionPageLimit is a page's size when none is asked for.
	DefaultPartitionPageLimit = 1000
	// MaxPartitionPageLimit bounds a page: 5,000 rows are about 1.6 MB of
	// JSON.
	MaxPartitionPageLimit = 5000
)

// PartitionPageParams select one page of describe rows.
type PartitionPageParams struct {
	// Limit is the most rows the page holds, 1 to MaxPartitionPageLimit.
	Limit int
	// Cursor is the NextCursor of the previous page; "" starts at the
	// first row.
	Cursor string
}

// PartitionPage is one page of describe rows.
type PartitionPage struct {
	Rows []PartitionRow
	// NextCursor reads the rows after this page; "" on the last page.
	NextCursor string
}

// ListPartitionsPage returns one page of the describe rows that match f,
// in (mirror, topic, partition) order. The cursor is the last row's key
// (keyset pagination): a page costs the same wherever it starts, and rows
// added or removed between two calls shift nothing, so a walk over every
// page returns each row that existed throughout exactly once.
func (s *Control) ListPartitionsPage(ctx context.Context, f PartitionFilter, p PartitionPageParams) (PartitionPage, error) {
	var v validation
	if p.Limit < 1 || p.Limit > MaxPartitionPageLimit {
		v.addf("limit", "must be an integer from 1 to %d", MaxPartitionPageLimit)
	}
	var after *repo.PartitionKey
	if p.Cursor != "" {
		if k, err := decodePartitionCursor(p.Cursor); err != nil {
			v.addf("cursor", "%s", err)
		} else {
			after = &k
		}
	}
	params, facts, err := s.partitionsQuery(ctx, f, &v)
	if err != nil {
		return PartitionPage{}, err
	}
	// One row more than the page says whether another page follows, so
	// the last page never ends with a cursor to an empty one.
	params.After, params.Limit = after, p.Limit+1
	parts, err := repo.PartitionsList(ctx, s.pool, params)
	if err != nil {
		return PartitionPage{}, err
	}
	var page PartitionPage
	if len(parts) > p.Limit {
		parts = parts[:p.Limit]
		last := parts[len(parts)-1]
		page.NextCursor = encodePartitionCursor(repo.PartitionKey{Mirror: last.Mirror, Topic: last.Topic, Partition: last.Partition})
	}
	page.Rows, err = s.describeRows(ctx, f.Mirror, parts, facts)
	return page, err
}

// ListPartitions returns every describe row that matches f, in (mirror,
// topic, partition) order, in one piece; GET /v1/partitions pages with
// ListPartitionsPage.
func (s *Control) ListPartitions(ctx context.Context, f PartitionFilter) ([]PartitionRow, error) {
	var v validation
	params, facts, err := s.partitionsQuery(ctx, f, &v)
	if err != nil {
		return nil, err
	}
	parts, err := repo.PartitionsList(ctx, s.pool, params)
	if err != nil {
		return nil, err
	}
	return s.describeRows(ctx, f.Mirror, parts, facts)
}

// partitionsQuery validates f, adding to v what is wrong with it, and
// turns it into the repo's filter; it also returns, for each topic of the
// mirror (of every mirror when f names none), its destination name and
// whether it is read-only.
func (s *Control) partitionsQuery(ctx context.Context, f PartitionFilter, v *validation) (repo.PartitionsListParams, map[[2]string]repo.TopicFacts, error) {
	if f.Mirror != "" && !validName(f.Mirror) {
		validateMirrorName(v, f.Mirror)
	}
	state := strings.ToUpper(f.State)
	if state != "" && state != "UNKNOWN" && !PartitionState(state).Valid() {
		v.addf("state", "%q is not a partition state (UNKNOWN, %s)", f.State, joinStates())
	}
	var re *regexp.Regexp
	if f.Topic != "" {
		var err error
		if re, err = CompilePattern(f.Topic); err != nil {
			v.addf("topic", "%s", err)
		}
	}
	if err := v.err(); err != nil {
		return repo.PartitionsListParams{}, nil, err
	}
	if f.Mirror != "" {
		if _, err := s.mirror(ctx, f.Mirror); err != nil {
			return repo.PartitionsListParams{}, nil, err
		}
	}
	facts, err := repo.TopicsDescribeFacts(ctx, s.pool, f.Mirror)
	if err != nil {
		return repo.PartitionsListParams{}, nil, err
	}
	params := repo.PartitionsListParams{Mirror: f.Mirror, State: state, Erroring: f.Erroring, DivergentTail: f.DivergentTail}
	if re != nil {
		// The pattern (RE2) is matched against the topic names here, and
		// only the matching topics' rows are read: at thousands of
		// partitions, loading every row to drop most of them would be slow.
		params.Topics = []string{}
		seen := map[string]bool{}
		for k := range facts {
			if t := k[1]; !seen[t] && re.MatchString(t) {
				seen[t] = true
				params.Topics = append(params.Topics, t)
			}
		}
	}
	return params, facts, nil
}

// describeRows turns partitions into describe rows with their topics'
// facts. A topic added after the facts were read (they are read first, to
// resolve the topic pattern) has them read again, once.
func (s *Control) describeRows(ctx context.Context, mirror string, parts []repo.Partition, facts map[[2]string]repo.TopicFacts) ([]PartitionRow, error) {
	out := make([]PartitionRow, 0, len(parts))
	reread := false
	for _, p := range parts {
		k := [2]string{p.Mirror, p.Topic}
		f, ok := facts[k]
		if !ok && !reread {
			reread = true
			var err error
			if facts, err = repo.TopicsDescribeFacts(ctx, s.pool, mirror); err != nil {
				return nil, err
			}
			f = facts[k]
		}
		row := describeRow(p)
		// A topic whose row went since (its mirror was deleted) keeps
		// its source name.
		row.DestinationTopic, row.ReadOnlyEnforced = cmp.Or(f.DestTopic, p.Topic), f.ReadOnlyEnforced
		out = append(out, row)
	}
	return out, nil
}

// partitionCursor is a page cursor's content: the key of the last row
// returned. Clients get it base64url-encoded and treat it as opaque.
type partitionCursor struct {
	Mirror    string `json:"m"`
	Topic     string `json:"t"`
	Partition int32  `json:"p"`
}

func encodePartitionCursor(k repo.PartitionKey) string {
	raw, _ := json.Marshal(partitionCursor{Mirror: k.Mirror, Topic: k.Topic, Partition: k.Partition})
	return base64.RawURLEncoding.EncodeToString(raw)
}

var errMalformedCursor = errors.New("malformed: pass the next_cursor of a previous page unchanged")

func decodePartitionCursor(s string) (repo.PartitionKey, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return repo.PartitionKey{}, errMalformedCursor
	}
	var c partitionCursor
	if err := json.Unmarshal(raw, &c); err != nil || c.Mirror == "" || c.Topic == "" || c.Partition < 0 {
		return repo.PartitionKey{}, errMalformedCursor
	}
	return repo.PartitionKey{Mirror: c.Mirror, Topic: c.Topic, Partition: c.Partition}, nil
}

func joinStates() string {
	names := make([]string, len(AllStates))
	for i, s := range AllStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// describeRow derives lag: source end offset − src_next, in source offsets.
func describeRow(p repo.Partition) PartitionRow {
	r := PartitionRow{
		Mirror: p.Mirror, Topic: p.Topic, Partition: p.Partition,
		SourceOffset: p.SourceEndOffset, DestinationOffset: p.DestinationEndOffset,
		State: p.State, Error: p.Error, RetryAttempt: p.RetryAttempt,
		LostRecords: p.LostRecords, Owner: p.LeaseOwner,
		LeaseLive: p.LeaseLive, OwnerRenewedAt: p.OwnerRenewedAt, ProgressedAt: p.ProgressedAt,
		LastMirrored: LastMirroredOf(p), DivergentTail: p.DivergentTail, ThrottledMs: p.ThrottledMs,
		Realigning: p.Realigning(), LagMs: p.LagMs,
	}
	if p.SourceEndOffset != nil {
		next := int64(0)
		if p.SrcNext != nil {
			next = *p.SrcNext
		}
		lag := max(*p.SourceEndOffset-next, 0)
		r.Lag = &lag
	}
	return r
}

// TopicPartitions returns the describe rows of one mirror topic.
func (s *Control) TopicPartitions(ctx context.Context, mirror, topic string) ([]PartitionRow, error) {
	if _, err := s.GetTopic(ctx, mirror, topic); err != nil {
		return nil, err
	}
	parts, err := repo.PartitionsList(ctx, s.pool, repo.PartitionsListParams{Mirror: mirror, Topics: []string{topic}})
	if err != nil {
		return nil, err
	}
	t, err := repo.TopicsGet(ctx, s.pool, mirror, topic)
	if err != nil {
		return nil, err
	}
	out := make([]PartitionRow, len(parts))
	for i, p := range parts {
		out[i] = describeRow(p)
		out[i].DestinationTopic, out[i].ReadOnlyEnforced = t.DestTopic, t.ReadOnlyEnforced
	}
	return out, nil
}

// Translate maps a source offset of a mirror partition to the destination.
func (s *Control) Translate(ctx context.Context, mirror, topic string, partition int32, sourceOffset int64) (Translation, error) {
	t, err := s.TranslateToTopic(ctx, mirror, topic, partition, sourceOffset)
	return t.Translation, err
}

// TranslateToTopic is Translate with the destination topic the offset is
// in: the mirror topic's destination name.
func (s *Control) TranslateToTopic(ctx context.Context, mirror, topic string, partition int32, sourceOffset int64) (TopicTranslation, error) {
	if sourceOffset < 0 {
		return TopicTranslation{}, &ValidationError{Fields: []FieldError{{Field: "source_offset", Message: "must be >= 0"}}}
	}
	mt, err := s.GetTopic(ctx, mirror, topic)
	if err != nil {
		return TopicTranslation{}, err
	}
	row, err := repo.PartitionsGet(ctx, s.pool, mirror, topic, partition)
	if errors.Is(err, repo.ErrNotFound) {
		return TopicTranslation{}, &NotFoundError{Kind: "partition", Detail: fmt.Sprintf(
			"topic %s of mirror %s has no partition %d", topic, mirror, partition)}
	} else if err != nil {
		return TopicTranslation{}, err
	}
	before, after, err := repo.OffsetRunsAround(ctx, s.pool, mirror, topic, partition, sourceOffset)
	if err != nil {
		return TopicTranslation{}, err
	}
	t, ok := translateOffset(sourceOffset, before, after)
	if !ok {
		return TopicTranslation{}, &NotFoundError{Kind: "offset", Detail: fmt.Sprintf(
			"nothing of %s/%d has been mirrored yet, so no offset can be translated", topic, partition)}
	}
	t, err = roundDownAcrossTail(ctx, s.pool, repo.PartitionID{Mirror: mirror, Topic: topic, Partition: partition},
		sourceOffset, t, row.DivergentTail)
	return TopicTranslation{Translation: t, DestinationTopic: mt.DestinationTopic}, err
}
