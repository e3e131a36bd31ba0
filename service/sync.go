package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"kmirror/repo"
)

// Event kinds written by the metadata sync.
const (
	EventSyncRequested        = "mirror.sync_requested"
	EventTopicsAutoAdded      = "topics.auto_added"
	EventTopicPartitionsAdded = "topic.partitions_added"
	EventTopicsSourceDeleted  = "topics.source_deleted"
)

const (
	// SyncWaitTimeout is how long SyncMirror waits for the pass it requested.
	SyncWaitTimeout = 30 * time.Second
	// SourceMissingPassesToStop is how many sync passes in a row must find a
	// mirrored topic missing on the source before the sync stops it.
	SourceMissingPassesToStop = 2

	// syncOwnerGrace is how long SyncMirror waits for some instance to hold
	// the mirror's metadata-sync lease (a new mirror's is taken within a
	// lease-manager pass).
	syncOwnerGrace = 3 * time.Second
	// syncPollInterval is how often a waiting request looks for its
	// result: one indexed read of one row, for the few seconds a pass
	// takes, so it can be short.
	syncPollInterval = 10 * time.Millisecond
)

// Triggers of a sync pass, as recorded in its result.
const (
	SyncTriggerStart    = "start"    // the mirror's metadata lease was just taken
	SyncTriggerInterval = "interval" // mirror.metadata.refresh.interval.ms passed
	SyncTriggerRequest  = "request"  // POST /v1/mirrors/{m}:sync
)

// SyncResult is one metadata sync pass (docs/design.md, "Metadata sync"): when it ran,
// and the outcome of each kind of metadata it keeps in step.
type SyncResult struct {
	Mirror   string `json:"mirror" example:"m1"`
	Instance string `json:"instance"`
	// Epoch is the metadata-sync lease epoch the pass ran under.
	Epoch int64 `json:"epoch"`
	// Trigger is start (the lease was just taken), interval or request.
	Trigger    string    `json:"trigger" enums:"start,interval,request" example:"interval"`
	StartedAt  time.Time `json:"started_at" format:"date-time"`
	FinishedAt time.Time `json:"finished_at" format:"date-time"`
	DurationMs int64     `json:"duration_ms"`
	// OK is true when every kind is OK.
	OK            bool                `json:"ok"`
	TopicConfigs  SyncOutcome         `json:"topic_configs"`
	Partitions    SyncOutcome         `json:"partitions"`
	NewTopics     SyncOutcome         `json:"new_topics"`
	DeletedTopics SyncOutcome         `json:"deleted_topics"`
	GroupOffsets  GroupOffsetsOutcome `json:"group_offsets"`
	ACLs          SyncOutcome         `json:"acls"`
	PausedTopics  SyncOutcome         `json:"paused_topics"`
} // @name SyncResult

// SyncOutcome is one kind's result in a pass: OK, or the error, and what it
// did item by item.
type SyncOutcome struct {
	OK    bool       `json:"ok"`
	Error string     `json:"error,omitempty"`
	Items []SyncItem `json:"items,omitempty"`
} // @name SyncOutcome

// SyncItem is one thing a pass did or skipped.
type SyncItem struct {
	// Name is a mirror topic (its source name), or an ACL on the
	// destination as TYPE:name:PATTERN:principal:host:OPERATION:PERMISSION.
	Name string `json:"name" example:"orders"`
	// DestinationTopic is the topic's name on the destination when the
	// mirror's topic.name.prefix makes it differ from Name; absent when
	// they are the same.
	DestinationTopic string `json:"destination_topic,omitempty" example:"east.orders"`
	// Action is what happened: updated, grown, added, missing, stopped,
	// created, deleted, refreshed, skipped or failed.
	Action string `json:"action" enums:"updated,grown,added,missing,stopped,created,deleted,refreshed,skipped,failed" example:"updated"`
	Detail string `json:"detail,omitempty" example:"retention.ms=3600000"`
} // @name SyncItem

// GroupOffsetsOutcome is the consumer group offset sync's result, per group.
type GroupOffsetsOutcome struct {
	OK     bool        `json:"ok"`
	Error  string      `json:"error,omitempty"`
	Groups []GroupSync `json:"groups,omitempty"`
} // @name GroupOffsetsOutcome

// GroupSync is one source group's offset sync.
type GroupSync struct {
	// Group is the source group's name.
	Group string `json:"group" example:"orders-app"`
	// DestinationGroup is the group whose offsets are committed on the
	// destination when the mirror's group.name.prefix makes it differ from
	// Group; absent when they are the same.
	DestinationGroup string `json:"destination_group,omitempty" example:"east.orders-app"`
	// SyncedPartitions counts the partitions whose translated offset is
	// committed on the destination after the pass.
	SyncedPartitions int `json:"synced_partitions"`
	// Committed counts the partitions this pass committed (the others were
	// already in step).
	Committed int `json:"committed"`
	// SkippedReason is set when the whole group was skipped, for example
	// because it is active on the destination.
	SkippedReason string `json:"skipped_reason,omitempty"`
	// Skipped lists partitions that were not synced, with the reason.
	Skipped []SkippedPartition `json:"skipped,omitempty"`
	// Clamped lists synced partitions whose translated offset lay outside
	// the destination partition's log, from its log start to its end
	// offset: the nearer bound was committed instead.
	Clamped []ClampedPartition `json:"clamped,omitempty"`
	Error   string             `json:"error,omitempty"`
} // @name GroupSync

// SkippedPartition is a group's partition the offset sync left alone.
type SkippedPartition struct {
	// Topic is the source topic.
	Topic string `json:"topic"`
	// DestinationTopic is its name on the destination when it differs
	// from Topic (topic.name.prefix); absent when they are the same.
	DestinationTopic string `json:"destination_topic,omitempty" example:"east.orders"`
	Partition        int32  `json:"partition"`
	Reason           string `json:"reason" example:"topic is STOPPED"`
} // @name SkippedPartition

// ClampedPartition is a group's partition whose translated offset the
// offset sync moved into the destination partition's log. Below the log
// start the records are gone (retention or a deletion), and a consumer
// given that offset would fall back to its auto.offset.reset, perhaps to
// the latest; above the end it would point past what the destination
// holds.
type ClampedPartition struct {
	// Topic is the source topic.
	Topic string `json:"topic" example:"orders"`
	// DestinationTopic is its name on the destination when it differs
	// from Topic (topic.name.prefix); absent when they are the same.
	DestinationTopic string `json:"destination_topic,omitempty" example:"east.orders"`
	Partition        int32  `json:"partition"`
	// TranslatedOffset is the group's source offset mapped to the
	// destination.
	TranslatedOffset int64 `json:"translated_offset" example:"80"`
	// CommittedOffset is the offset committed on the destination: its log
	// start or its end.
	CommittedOffset int64  `json:"committed_offset" example:"120"`
	Reason          string `json:"reason" example:"below the destination's log start 120 (retention or a deletion removed the records before it): committed 120"`
} // @name ClampedPartition

// SyncUnavailableError is a "sync now" that cannot be served: no instance
// runs the mirror's sync, or the pass did not finish in time.
type SyncUnavailableError struct {
	// Timeout is true when an instance holds the lease but its pass did not
	// finish within the wait.
	Timeout bool
	Detail  string
}

func (e *SyncUnavailableError) Error() string { return e.Detail }

// SyncMirror asks the instance holding the mirror's metadata-sync lease to
// run a pass now, waits for it (at most SyncWaitTimeout, or ctx's deadline)
// and returns its result. The service never talks to workers: the request is
// a timestamp in Postgres, which the sync polls for.
func (s *Control) SyncMirror(ctx context.Context, name string) (SyncResult, error) {
	var requested time.Time
	err := repo.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if requested, err = repo.MirrorsRequestSync(ctx, tx, name); errors.Is(err, repo.ErrNotFound) {
			return mirrorNotFound(name)
		} else if err != nil {
			return err
		}
		return repo.EventsInsert(ctx, tx, stampActor(ctx, repo.Event{Kind: EventSyncRequested, Mirror: name,
			Message: fmt.Sprintf("metadata sync of mirror %s requested", name)}))
	})
	if err != nil {
		return SyncResult{}, err
	}
	start := time.Now()
	deadline := start.Add(SyncWaitTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d.Add(-syncPollInterval) // leave time to answer
	}
	lastHeld := start
	t := time.NewTicker(syncPollInterval)
	defer t.Stop()
	for {
		st, err := repo.MirrorsSyncStatus(ctx, s.pool, name, requested)
		if errors.Is(err, repo.ErrNotFound) {
			return SyncResult{}, mirrorNotFound(name)
		} else if err != nil {
			return SyncResult{}, err
		}
		now := time.Now()
		switch {
		case st.Served:
			var res SyncResult
			if err := json.Unmarshal(st.LastSync, &res); err != nil {
				return SyncResult{}, fmt.Errorf("decode sync result of mirror %s: %w", name, err)
			}
			return res, nil
		case st.LeaseHeld:
			lastHeld = now
		case now.Sub(lastHeld) >= syncOwnerGrace:
			return SyncResult{}, &SyncUnavailableError{Detail: fmt.Sprintf(
				"no kmirror instance runs the metadata sync of mirror %s (none has held its lease for %s): "+
					"the sync runs in servers started with a destination cluster (--destination-bootstrap)", name, syncOwnerGrace)}
		}
		if now.After(deadline) {
			return SyncResult{}, &SyncUnavailableError{Timeout: true, Detail: fmt.Sprintf(
				"metadata sync of mirror %s timed out after %s: the pass did not finish; it may still, see GET /v1/mirrors/%s last_sync",
				name, deadline.Sub(start).Round(time.Millisecond), name)}
		}
		select {
		case <-ctx.Done():
			return SyncResult{}, ctx.Err()
		case <-t.C:
		}
	}
}

// AddSourceTopics starts mirroring source topics the sync found matching
// topics.include, with their known partition counts. Topics the mirror
// already has, in any state, are left alone: a removed topic stays removed,
// and so is one whose destination topic another mirror writes. Each is
// written to its destination name (topic.name.prefix). It returns the
// topics it added, sorted, with their destination names.
func (s *Workers) AddSourceTopics(ctx context.Context, mirror string, topics map[string]int32) ([]TopicMatch, error) {
	var added []TopicMatch
	err := repo.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		m, existing, err := lockedMirrorTopics(ctx, tx, mirror)
		if err != nil {
			return err
		}
		dests := destinationNames(m.Config, sortedKeys(topics), existing)
		elsewhere, err := repo.TopicsWrittenElsewhere(ctx, tx, mirror, slices.Sorted(maps.Values(dests)))
		if err != nil {
			return err
		}
		for _, name := range sortedKeys(topics) {
			d := dests[name]
			_, other := elsewhere[d] // another mirror writes that destination topic
			if _, ok := existing[name]; ok || other || InternalTopic(name) || !validName(name) ||
				checkDestinationNames([]string{name}, dests) != nil {
				continue
			}
			if err := repo.TopicsUpsert(ctx, tx, repo.TopicsUpsertParams{Mirror: mirror, Topic: name, DestTopic: d,
				DesiredState: DesiredMirroring, ReplicationFactor: -1, Partitions: topics[name]}); err != nil {
				return err
			}
			added = append(added, TopicMatch{Topic: name, DestinationTopic: d, Partitions: int(topics[name])})
		}
		if len(added) == 0 {
			return nil
		}
		names := make([]string, len(added))
		for i, a := range added {
			names[i] = a.Topic
		}
		return recordTopics(ctx, tx, repo.Event{Kind: EventTopicsAutoAdded, Mirror: mirror,
			Message: fmt.Sprintf("added %d new source topic(s) matching topics.include to mirror %s: [%s]",
				len(added), mirror, strings.Join(names, ", "))}, names)
	})
	if err != nil {
		return nil, err
	}
	return added, nil
}

// GrowTopicPartitions adds the mirror partitions a topic gained on the
// source, up to partitions in all; the lease manager then leases them and
// they are mirrored from the start of the new source partitions. It returns
// the partitions it added.
func (s *Workers) GrowTopicPartitions(ctx context.Context, mirror, topic string, partitions int32) ([]int32, error) {
	var added []int32
	err := repo.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := repo.MirrorsGetForUpdate(ctx, tx, mirror); errors.Is(err, repo.ErrNotFound) {
			return mirrorNotFound(mirror)
		} else if err != nil {
			return err
		}
		t, err := repo.TopicsGet(ctx, tx, mirror, topic)
		if errors.Is(err, repo.ErrNotFound) {
			return &NotFoundError{Kind: "topic", Detail: fmt.Sprintf("mirror %s has no topic %s", mirror, topic)}
		} else if err != nil {
			return err
		}
		if added, err = repo.PartitionsInsertMissing(ctx, tx, mirror, topic, partitions); err != nil || len(added) == 0 {
			return err
		}
		return recordTopics(ctx, tx, repo.Event{Kind: EventTopicPartitionsAdded, Mirror: mirror, Topic: topic,
			Message: fmt.Sprintf("topic %s of mirror %s grew on the source from %d to %d partitions; mirroring the new ones from their start",
				topic, mirror, t.Partitions, t.Partitions+len(added))}, []string{topic})
	})
	if err != nil {
		return nil, err
	}
	return added, nil
}

// CountSourceMissing records which mirrored topics a sync pass found missing
// on the source; the count of every other topic starts again from 0. It
// returns the missing topics with their count of consecutive passes.
func (s *Workers) CountSourceMissing(ctx context.Context, mirror string, missing []string) (map[string]int, error) {
	return repo.TopicsCountSourceMissing(ctx, s.pool, mirror, missing)
}

// StopSourceDeletedTopics stops mirroring topics deleted on the source: their
// desired state becomes stopped (STOPPING → STOPPED), with one event per
// topic saying why. Topics no longer mirroring or paused are left alone. It
// returns the topics it stopped.
func (s *Workers) StopSourceDeletedTopics(ctx context.Context, mirror string, topics []string) ([]string, error) {
	var stopped []string
	err := repo.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		existing, err := lockedTopics(ctx, tx, mirror)
		if err != nil {
			return err
		}
		for _, name := range topics {
			if t, ok := existing[name]; ok && (t.DesiredState == DesiredMirroring || t.DesiredState == DesiredPaused) {
				stopped = append(stopped, name)
			}
		}
		slices.Sort(stopped)
		if len(stopped) == 0 {
			return nil
		}
		if err := repo.TopicsSetDesiredState(ctx, tx, mirror, stopped, DesiredStopped); err != nil {
			return err
		}
		for _, name := range stopped {
			if err := recordTopics(ctx, tx, repo.Event{Kind: EventTopicsSourceDeleted, Mirror: mirror, Topic: name,
				Message: fmt.Sprintf("topic %s was deleted on the source cluster of mirror %s (missing on %d sync passes in a row): "+
					"mirroring stops, and the destination topic becomes writable once its partitions are STOPPED",
					name, mirror, SourceMissingPassesToStop)}, []string{name}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return stopped, nil
}

// TranslateGroupOffset maps a consumer group's committed source offset on
// the partition of row to the destination for the offset sync. It follows
// Translate's rule (round toward earlier offsets: a duplicate is
// acceptable, a skipped record is not, and so across a kept divergent tail)
// and never goes past the row's checkpoint (dst_next). ok is false when
// nothing of the partition has been mirrored.
func (s *Workers) TranslateGroupOffset(ctx context.Context, row repo.Partition, srcOffset int64) (Translation, bool, error) {
	if row.DstNext == nil {
		return Translation{}, false, nil
	}
	before, after, err := repo.OffsetRunsAround(ctx, s.pool, row.Mirror, row.Topic, row.Partition, srcOffset)
	if err != nil {
		return Translation{}, false, err
	}
	t, ok := translateOffset(srcOffset, before, after)
	if !ok {
		return Translation{}, false, nil
	}
	t, err = roundDownAcrossTail(ctx, s.pool, repo.PartitionID{Mirror: row.Mirror, Topic: row.Topic, Partition: row.Partition},
		srcOffset, t, row.DivergentTail)
	if err != nil {
		return Translation{}, false, err
	}
	if t.DestinationOffset > *row.DstNext {
		t.DestinationOffset, t.Exact = *row.DstNext, false
	}
	return t, true, nil
}

// SyncConfig is a mirror's metadata sync configuration, parsed.
type SyncConfig struct {
	// Interval is mirror.metadata.refresh.interval.ms when the mirror sets
	// it, else zero (the server's default applies).
	Interval time.Duration
	// The patterns match whole names; a nil one (an empty value, as
	// topics.include's default) matches nothing.
	TopicsInclude, TopicsExclude *regexp.Regexp
	GroupsInclude, GroupsExclude *regexp.Regexp
	ACLsInclude                  *regexp.Regexp
	// PropertiesExclude holds topic.properties.exclude's entries; one ending
	// in * is a prefix.
	PropertiesExclude []string
}

// Matches reports whether name matches re, a pattern of SyncConfig; nil
// matches nothing.
func Matches(re *regexp.Regexp, name string) bool { return re != nil && re.MatchString(name) }

// ParseSyncConfig reads a mirror's sync configuration, with defaults for
// unset keys. Values were validated when set.
func ParseSyncConfig(set map[string]string) (SyncConfig, error) {
	eff := EffectiveConfig(set)
	var c SyncConfig
	if v, ok := set[CfgMetadataRefreshIntervalMs]; ok {
		ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || ms <= 0 {
			return c, fmt.Errorf("%s: %q is not a positive integer", CfgMetadataRefreshIntervalMs, v)
		}
		c.Interval = time.Duration(ms) * time.Millisecond
	}
	for key, dst := range map[string]**regexp.Regexp{
		CfgTopicsInclude: &c.TopicsInclude, CfgTopicsExclude: &c.TopicsExclude,
		CfgGroupsInclude: &c.GroupsInclude, CfgGroupsExclude: &c.GroupsExclude,
		CfgACLsInclude: &c.ACLsInclude,
	} {
		if eff[key] == "" {
			continue
		}
		re, err := CompilePattern(eff[key])
		if err != nil {
			return c, fmt.Errorf("%s: %w", key, err)
		}
		*dst = re
	}
	for _, e := range strings.Split(eff[CfgTopicPropertiesExclude], ",") {
		if e = strings.TrimSpace(e); e != "" {
			c.PropertiesExclude = append(c.PropertiesExclude, e)
		}
	}
	return c, nil
}

// PropertyExcluded reports whether topic.properties.exclude names the config.
func (c SyncConfig) PropertyExcluded(name string) bool {
	for _, e := range c.PropertiesExclude {
		if prefix, ok := strings.CutSuffix(e, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if name == e {
			return true
		}
	}
	return false
}
