package service

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/vocabulary/states"
	"kmirror/repo"
)

// DesiredState is what an operator asked of a mirror topic.
type DesiredState = states.Desired

// Desired states of a mirror topic.
const (
	DesiredMirroring = states.DesiredMirroring
	DesiredPaused    = states.DesiredPaused
	DesiredStopped   = states.DesiredStopped
)

// DefaultReplicationFactor is the replication factor that leaves it to the
// destination cluster (its default.replication.factor), as in Kafka's
// CreateTopics.
const DefaultReplicationFactor = -1

// InternalTopic says whether a topic is one a cluster keeps for itself:
// Kafka's (__consumer_offsets, __transaction_state, __cluster_metadata,
// __share_group_state), kmirror's (__mirror_state, __mirror_heartbeats),
// and any other whose name starts with __ or _confluent (Confluent's
// command, metrics and license topics). None is ever mirrored, whatever
// the pattern: written to another cluster, it would overwrite what that
// cluster or kmirror keeps there.
func InternalTopic(name string) bool {
	return strings.HasPrefix(name, "__") || strings.HasPrefix(name, "_confluent")
}

// internalTopicRule is what a refusal says of InternalTopic.
const internalTopicRule = "topics whose names start with __ or _confluent are Kafka's, Confluent's or kmirror's own " +
	"(__consumer_offsets, __transaction_state, __cluster_metadata, __mirror_state, __mirror_heartbeats, ...) and are never mirrored"

// Topic is a mirror topic with its partition count.
type Topic struct {
	Mirror string
	// Topic is the source topic's name: the topic's identity.
	Topic string
	// DestinationTopic is the topic it is written to on the destination:
	// the mirror's topic.name.prefix, as it was when the topic was first
	// added, and Topic.
	DestinationTopic string
	// DesiredState is DesiredMirroring, DesiredPaused or DesiredStopped.
	DesiredState      DesiredState
	ReplicationFactor int
	Recreate          bool
	// ReadOnlyEnforced: nil unknown, else whether the destination enforces
	// read-only with an ACL while the topic is mirrored.
	ReadOnlyEnforced *bool
	Partitions       int
	// RecordsPerSec is the latest rate the History sampled; 0 until known.
	RecordsPerSec float64
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

func topicOf(t repo.Topic) Topic {
	return Topic{Mirror: t.Mirror, Topic: t.Topic, DestinationTopic: t.DestTopic, DesiredState: t.DesiredState,
		ReplicationFactor: t.ReplicationFactor, Recreate: t.Recreate, ReadOnlyEnforced: t.ReadOnlyEnforced,
		Partitions: t.Partitions, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
}

// matchSourceTopics returns the source topics pattern matches (never an
// internal one: InternalTopic), with their partition counts. A pattern
// that matches only internal topics is a *ValidationError naming the
// rule; one that matches nothing is a *NotFoundError.
func (s *Control) matchSourceTopics(ctx context.Context, conn kafkaconn.Config, mirror, pattern string) (map[string]int32, error) {
	re, err := compileTopicPattern(pattern)
	if err != nil {
		return nil, err
	}
	source, err := s.sourceTopics(ctx, conn)
	if err != nil {
		return nil, err
	}
	matched := map[string]int32{}
	var internal []string
	matcher := newPatternMatcher(re, pattern)
	for name, parts := range source {
		ok, err := matcher.match(name)
		switch {
		case err != nil:
			return nil, err
		case ok && InternalTopic(name):
			internal = append(internal, name)
		case ok:
			matched[name] = parts
		}
	}
	switch {
	case len(matched) == 0 && len(internal) > 0:
		slices.Sort(internal)
		return nil, &ValidationError{Fields: []FieldError{{Field: "topic", Message: fmt.Sprintf(
			"%q matches only internal topics (%s): %s", pattern, strings.Join(internal, ", "), internalTopicRule)}}}
	case len(matched) == 0:
		return nil, &NotFoundError{Kind: "match", Detail: fmt.Sprintf(
			"no topic on the source cluster of mirror %s matches %q", mirror, pattern)}
	}
	return matched, nil
}

// AddTopicsInput is a request to start (or restart) mirroring topics.
type AddTopicsInput struct {
	// Topic is an RE2 pattern matched against whole source topic names.
	Topic string
	// ReplicationFactor for the destination topics; nil or
	// DefaultReplicationFactor is the destination's default.
	ReplicationFactor *int
	// Recreate, on a restart, drops and recreates the destination topic
	// instead of failing on divergence.
	Recreate bool
	// Continue accepts a destination topic that already holds the source's
	// history (a failback: the source was mirrored from this destination),
	// proven from the offset map in the source's own __mirror_state, and
	// mirrors only what follows it.
	Continue bool
	// KeepDivergent, with Continue, keeps a divergent tail (records the
	// destination holds past the overlap that the source never had) and
	// mirrors after it, instead of failing the partition.
	KeepDivergent bool
	// SkipChecks adds without the preflight checks (CheckMirror) that an
	// add otherwise runs for its topics, refusing on a failed one.
	SkipChecks bool
	// DryRun resolves the pattern and runs every check of a real add, then
	// writes nothing. With Continue it also works out, per partition, what
	// continuing would do (Continuation).
	DryRun bool
}

// TopicsResult lists the topics an action applied to, sorted.
type TopicsResult struct {
	Mirror string   `json:"mirror"`
	Action string   `json:"action"`
	Topics []string `json:"topics"`
	// Matches are the source topics an add resolved, with their partition
	// counts, sorted by topic.
	Matches []TopicMatch `json:"matches,omitempty"`
	// Failover, for a remove's dry run, is what each matched topic's
	// destination does not have yet, sorted by topic.
	Failover []TopicFailoverPreview `json:"failover,omitempty"`
	// Continuation, for an add's dry run with continue, is per matched
	// topic what continuing its destination would do, sorted by topic.
	Continuation []TopicContinuation `json:"continuation,omitempty"`
}

// TopicMatch is a source topic that an add's pattern matched.
type TopicMatch struct {
	Topic string `json:"topic"`
	// DestinationTopic is the topic it is (or would be) written to on the
	// destination: the mirror's topic.name.prefix and Topic.
	DestinationTopic string `json:"destination_topic"`
	Partitions       int    `json:"partitions"`
	// ForeignRecords, for a dry run with recreate, is how many records the
	// destination topic holds that this mirror did not write: recreating
	// it deletes them.
	ForeignRecords *int64 `json:"foreign_records,omitempty"`
}

func compileTopicPattern(pattern string) (*regexp.Regexp, error) {
	re, err := CompilePattern(pattern)
	if err != nil {
		return nil, &ValidationError{Fields: []FieldError{{Field: "topic", Message: err.Error()}}}
	}
	return re, nil
}

// AddTopics resolves the pattern against the source cluster's topics and
// starts mirroring each match. A stopped topic is restarted. All or nothing:
// a match already mirroring or paused is a conflict and nothing changes.
// With in.DryRun every check runs, under the same lock, and nothing is
// written.
func (s *Control) AddTopics(ctx context.Context, mirror string, in AddTopicsInput) (TopicsResult, error) {
	if _, err := compileTopicPattern(in.Topic); err != nil {
		return TopicsResult{}, err
	}
	if in.Recreate && in.Continue {
		return TopicsResult{}, &ValidationError{Fields: []FieldError{{Field: "continue",
			Message: "recreate drops the destination topic and continue keeps what it holds: give one of them"}}}
	}
	if in.KeepDivergent && !in.Continue {
		return TopicsResult{}, &ValidationError{Fields: []FieldError{{Field: "keep_divergent",
			Message: "keep_divergent says what continue does with a divergent tail: give it with continue"}}}
	}
	rf, err := replicationFactorOf(in.ReplicationFactor)
	if err != nil {
		return TopicsResult{}, err
	}
	m, err := s.mirror(ctx, mirror)
	if err != nil {
		return TopicsResult{}, err
	}
	// The source is asked before any write, so a failure changes nothing.
	conn, err := s.sourceConn(m)
	if err != nil {
		return TopicsResult{}, err
	}
	matched, err := s.matchSourceTopics(ctx, conn, mirror, in.Topic)
	if err != nil {
		return TopicsResult{}, err
	}
	names := sortedKeys(matched)
	if !in.SkipChecks && s.preflight != nil {
		// The database's refusals come first, and say more (which mirror
		// writes a destination topic) than a check of the clusters
		// would. Read without the lock: no transaction waits on the
		// clusters, and the add checks again under it.
		existing, err := topicsByName(ctx, s.pool, mirror)
		if err != nil {
			return TopicsResult{}, err
		}
		if _, err := checkAddable(ctx, s.pool, m.Config, mirror, names, existing); err != nil {
			return TopicsResult{}, err
		}
		if err := s.preflightAdd(ctx, conn, m, names, existing, rf, in.Continue || in.Recreate); err != nil {
			return TopicsResult{}, err
		}
	}
	var dests map[string]string // source name → destination name
	err = repo.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		locked, existing, err := lockedMirrorTopics(ctx, tx, mirror)
		if err != nil {
			return err
		}
		if dests, err = checkAddable(ctx, tx, locked.Config, mirror, names, existing); err != nil {
			return err
		}
		if in.DryRun {
			return nil // committing a transaction that wrote nothing
		}
		for _, name := range names {
			p := repo.TopicsUpsertParams{Mirror: mirror, Topic: name, DestTopic: dests[name], DesiredState: DesiredMirroring,
				ReplicationFactor: rf, Recreate: in.Recreate, ContinueHistory: in.Continue, KeepDivergent: in.KeepDivergent, Partitions: matched[name]}
			if t, ok := existing[name]; ok && in.ReplicationFactor == nil {
				p.ReplicationFactor = t.ReplicationFactor // a restart keeps its factor
			}
			if err := repo.TopicsUpsert(ctx, tx, p); errors.Is(err, repo.ErrConflict) {
				return &ConflictError{Detail: fmt.Sprintf("cannot add: destination topic %s was just added to another mirror", dests[name])}
			} else if err != nil {
				return err
			}
		}
		// The message names each topic's destination where the prefix
		// makes it differ: "[orders → east.orders]".
		named := make([]string, len(names))
		for i, name := range names {
			if named[i] = name; dests[name] != name {
				named[i] = name + " → " + dests[name]
			}
		}
		return recordTopics(ctx, tx, repo.Event{Kind: EventTopicsAdded, Mirror: mirror,
			Message: fmt.Sprintf("added %d topic(s) to mirror %s: [%s]", len(names), mirror, topicList(named))}, names)
	})
	if err != nil {
		return TopicsResult{}, err
	}
	matches := make([]TopicMatch, len(names))
	for i, name := range names {
		matches[i] = TopicMatch{Topic: name, DestinationTopic: dests[name], Partitions: int(matched[name])}
	}
	res := TopicsResult{Mirror: mirror, Action: "add", Topics: names, Matches: matches}
	if in.DryRun && in.Continue {
		if res.Continuation, err = s.previewContinuation(ctx, mirror, conn, names, in.KeepDivergent); err != nil {
			return TopicsResult{}, err
		}
	}
	if in.DryRun && in.Recreate {
		foreign, err := s.foreignRecords(ctx, mirror, names, dests)
		if err != nil {
			return TopicsResult{}, err
		}
		for i := range res.Matches {
			if n, ok := foreign[res.Matches[i].Topic]; ok {
				res.Matches[i].ForeignRecords = &n
			}
		}
	}
	return res, nil
}

// topicTransition is one desired-state action on existing mirror topics.
type topicTransition struct {
	action string
	from   []DesiredState
	to     DesiredState
	event  string
	verb   string
}

var (
	pauseTransition  = topicTransition{"pause", []DesiredState{DesiredMirroring}, DesiredPaused, EventTopicsPaused, "paused mirroring for"}
	resumeTransition = topicTransition{"resume", []DesiredState{DesiredPaused}, DesiredMirroring, EventTopicsResumed, "resumed mirroring for"}
	removeTransition = topicTransition{"remove", []DesiredState{DesiredMirroring, DesiredPaused}, DesiredStopped, EventTopicsRemoved, "removed from mirror"}
)

// PauseTopics stops fetching for mirroring topics; they stay read-only.
func (s *Control) PauseTopics(ctx context.Context, mirror, pattern string) (TopicsResult, error) {
	return s.transitionTopics(ctx, mirror, pattern, pauseTransition)
}

// ResumeTopics resumes paused topics from their checkpoints.
func (s *Control) ResumeTopics(ctx context.Context, mirror, pattern string) (TopicsResult, error) {
	return s.transitionTopics(ctx, mirror, pattern, resumeTransition)
}

// RemoveTopics stops mirroring (failover): the topics become writable once
// their partitions reach STOPPED.
func (s *Control) RemoveTopics(ctx context.Context, mirror, pattern string) (TopicsResult, error) {
	return s.transitionTopics(ctx, mirror, pattern, removeTransition)
}

// transitionTopics resolves the pattern against the mirror's own topics and
// moves all of them, or none, to the target desired state.
func (s *Control) transitionTopics(ctx context.Context, mirror, pattern string, tr topicTransition) (TopicsResult, error) {
	re, err := compileTopicPattern(pattern)
	if err != nil {
		return TopicsResult{}, err
	}
	var names []string
	err = repo.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		existing, err := lockedTopics(ctx, tx, mirror)
		if err != nil {
			return err
		}
		if names, err = resolveTransition(existing, re, mirror, pattern, tr); err != nil {
			return err
		}
		// A failover's record says what it cost, in the terms of a
		// recovery point objective: read before the partitions stop.
		rpo := ""
		if tr.to == DesiredStopped {
			lag, err := repo.PartitionsMaxLagMs(ctx, tx, mirror, names)
			if err != nil {
				return err
			}
			rpo = "; " + failoverLag(lag)
		}
		if err := repo.TopicsSetDesiredState(ctx, tx, mirror, names, tr.to); err != nil {
			return err
		}
		return recordTopics(ctx, tx, repo.Event{Kind: tr.event, Mirror: mirror,
			Message: fmt.Sprintf("%s %d topic(s) of mirror %s: [%s]%s", tr.verb, len(names), mirror, topicList(names), rpo)}, names)
	})
	if err != nil {
		return TopicsResult{}, err
	}
	return TopicsResult{Mirror: mirror, Action: tr.action, Topics: names}, nil
}

// failoverLag says how far behind a failover's partitions were, as the
// age of the oldest record not copied (describe's lag_ms).
func failoverLag(ms *int64) string {
	switch {
	case ms == nil:
		return "lag in time unknown (no partition had its oldest record not copied read)"
	case *ms == 0:
		return "no record was behind (lag in time 0)"
	}
	return fmt.Sprintf("the oldest record not copied was %s old (lag in time): records after it stay on the source",
		(time.Duration(*ms) * time.Millisecond).Round(time.Millisecond))
}

// resolveTransition matches the pattern against the mirror's topics and
// returns the matches, sorted; all or nothing, a match that tr cannot move
// is a conflict.
func resolveTransition(existing map[string]repo.Topic, re *regexp.Regexp, mirror, pattern string, tr topicTransition) ([]string, error) {
	var names []string
	var conflicts []TopicState
	matcher := newPatternMatcher(re, pattern)
	for name, t := range existing {
		if ok, err := matcher.match(name); err != nil {
			return nil, err
		} else if !ok {
			continue
		}
		names = append(names, name)
		if !slices.Contains(tr.from, t.DesiredState) {
			conflicts = append(conflicts, TopicState{Topic: name, DesiredState: t.DesiredState})
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, &NotFoundError{Kind: "match", Detail: fmt.Sprintf(
			"no topic of mirror %s matches %q", mirror, pattern)}
	}
	if len(conflicts) > 0 {
		return nil, topicConflict(tr.action, conflicts)
	}
	return names, nil
}

// lockedTopics locks the mirror's row for the transaction, which serializes
// actions on one mirror, and returns its topics by name.
func lockedTopics(ctx context.Context, tx pgx.Tx, mirror string) (map[string]repo.Topic, error) {
	_, topics, err := lockedMirrorTopics(ctx, tx, mirror)
	return topics, err
}

// lockedMirrorTopics is lockedTopics with the mirror's row.
func lockedMirrorTopics(ctx context.Context, tx pgx.Tx, mirror string) (repo.Mirror, map[string]repo.Topic, error) {
	m, err := repo.MirrorsGetForUpdate(ctx, tx, mirror)
	if errors.Is(err, repo.ErrNotFound) {
		return repo.Mirror{}, nil, mirrorNotFound(mirror)
	} else if err != nil {
		return repo.Mirror{}, nil, err
	}
	topics, err := topicsByName(ctx, tx, mirror)
	return m, topics, err
}

// checkAddable refuses an add of names to a mirror with config cfg and
// topics existing, all or nothing: a match already mirroring or paused, a
// destination name Kafka would not take, or one another mirror writes. It
// returns the destination names.
func checkAddable(ctx context.Context, q repo.DBTX, cfg map[string]string, mirror string, names []string, existing map[string]repo.Topic) (map[string]string, error) {
	var conflicts []TopicState
	for _, name := range names {
		if t, ok := existing[name]; ok && t.DesiredState != DesiredStopped {
			conflicts = append(conflicts, TopicState{Topic: name, DesiredState: t.DesiredState})
		}
	}
	if len(conflicts) > 0 {
		return nil, topicConflict("add", conflicts)
	}
	dests := destinationNames(cfg, names, existing)
	if err := checkDestinationNames(names, dests); err != nil {
		return nil, err
	}
	return dests, checkNotWrittenElsewhere(ctx, q, mirror, dests)
}

// destinationNames maps source topics to their destination names: the
// name an existing row was created with, else the mirror's prefix and the
// source name.
func destinationNames(cfg map[string]string, names []string, existing map[string]repo.Topic) map[string]string {
	out := make(map[string]string, len(names))
	for _, name := range names {
		if t, ok := existing[name]; ok {
			out[name] = t.DestTopic
		} else {
			out[name] = DestinationTopic(cfg, name)
		}
	}
	return out
}

// checkDestinationNames refuses destination names Kafka would not take
// (too long with the prefix) or that name an internal topic.
func checkDestinationNames(names []string, dests map[string]string) error {
	var fields []FieldError
	for _, name := range names {
		d := dests[name]
		switch {
		case !validName(d):
			fields = append(fields, FieldError{Field: "topic", Message: fmt.Sprintf(
				"source topic %s would be written to %s, which is longer than Kafka's 249 characters", name, d)})
		case d != name && InternalTopic(d):
			fields = append(fields, FieldError{Field: "topic", Message: fmt.Sprintf(
				"source topic %s would be written to %s: %s", name, d, internalTopicRule)})
		}
	}
	if len(fields) > 0 {
		return &ValidationError{Fields: fields}
	}
	return nil
}

func topicsByName(ctx context.Context, q repo.DBTX, mirror string) (map[string]repo.Topic, error) {
	list, err := repo.TopicsList(ctx, q, mirror)
	if err != nil {
		return nil, err
	}
	out := make(map[string]repo.Topic, len(list))
	for _, t := range list {
		out[t.Topic] = t
	}
	return out, nil
}

// checkNotWrittenElsewhere refuses destination topics another mirror
// writes: one destination topic has one writer. The database enforces it
// too (mirror_topics_one_writer) for concurrent adds.
func checkNotWrittenElsewhere(ctx context.Context, q repo.DBTX, mirror string, dests map[string]string) error {
	byDest := make(map[string]string, len(dests))
	for src, d := range dests {
		byDest[d] = src
	}
	others, err := repo.TopicsWrittenElsewhere(ctx, q, mirror, sortedKeys(byDest))
	if err != nil {
		return err
	}
	if len(others) == 0 {
		return nil
	}
	var conflicts []TopicState
	var parts []string
	for _, d := range sortedKeys(others) {
		w, src := others[d], byDest[d]
		conflicts = append(conflicts, TopicState{Topic: src, MirroredBy: w.Mirror, DestinationTopic: d})
		if d == src && w.Topic == src {
			parts = append(parts, fmt.Sprintf("%s is mirrored by mirror %s", src, w.Mirror))
		} else {
			parts = append(parts, fmt.Sprintf("destination topic %s (for %s) is written by mirror %s from its topic %s",
				d, src, w.Mirror, w.Topic))
		}
	}
	return &ConflictError{Detail: "cannot add: " + strings.Join(parts, ", ") +
		" (a destination topic is written by one mirror; give the mirrors different topic.name.prefix values to mirror the same names side by side)",
		Topics: conflicts}
}

func topicConflict(action string, conflicts []TopicState) error {
	sort.Slice(conflicts, func(i, j int) bool { return conflicts[i].Topic < conflicts[j].Topic })
	parts := make([]string, len(conflicts))
	for i, c := range conflicts {
		parts[i] = c.String()
	}
	return &ConflictError{
		Detail: fmt.Sprintf("cannot %s: %s", action, strings.Join(parts, ", ")),
		Topics: conflicts,
	}
}

// ListTopics returns a mirror's topics.
func (s *Control) ListTopics(ctx context.Context, mirror string) ([]Topic, error) {
	if _, err := s.mirror(ctx, mirror); err != nil {
		return nil, err
	}
	list, err := repo.TopicsList(ctx, s.pool, mirror)
	if err != nil {
		return nil, err
	}
	out := make([]Topic, len(list))
	for i, t := range list {
		out[i] = topicOf(t)
		out[i].RecordsPerSec = s.history.Rate(mirror, t.Topic)
	}
	return out, nil
}

// PartitionSummary counts a topic's partitions by actual state and sums
// their known lag.
type PartitionSummary struct {
	States map[PartitionState]int
	Lag    int64
}

// SummarizePartitions summarizes describe rows.
func SummarizePartitions(rows []PartitionRow) PartitionSummary {
	sum := PartitionSummary{States: map[PartitionState]int{}}
	for _, r := range rows {
		sum.States[r.State]++
		if r.Lag != nil {
			sum.Lag += *r.Lag
		}
	}
	return sum
}

// TopicSummaries summarizes the partitions of each of a mirror's topics
// from one grouped read: at thousands of partitions, building every
// describe row to count them would be most of a topic list's cost.
func (s *Control) TopicSummaries(ctx context.Context, mirror string) (map[string]PartitionSummary, error) {
	counts, err := repo.TopicsStateCounts(ctx, s.pool, mirror)
	if err != nil {
		return nil, err
	}
	out := map[string]PartitionSummary{}
	for _, c := range counts {
		sum, ok := out[c.Topic]
		if !ok {
			sum = PartitionSummary{States: map[PartitionState]int{}}
		}
		sum.States[c.State] += c.Partitions
		sum.Lag += c.Lag
		out[c.Topic] = sum
	}
	return out, nil
}

// GetTopic returns one mirror topic.
func (s *Control) GetTopic(ctx context.Context, mirror, topic string) (Topic, error) {
	if _, err := s.mirror(ctx, mirror); err != nil {
		return Topic{}, err
	}
	t, err := repo.TopicsGet(ctx, s.pool, mirror, topic)
	if errors.Is(err, repo.ErrNotFound) {
		return Topic{}, &NotFoundError{Kind: "topic", Detail: fmt.Sprintf("mirror %s has no topic %s", mirror, topic)}
	} else if err != nil {
		return Topic{}, err
	}
	out := topicOf(t)
	out.RecordsPerSec = s.history.Rate(mirror, topic)
	return out, nil
}
