package metadatasync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"kmirror/service"
)

// Destination group states in which the sync may commit a group's offsets:
// nobody consumes with the group there.
var idleGroupStates = []string{"Empty", "Dead"}

// syncGroupOffsets commits, on the destination, the translated offsets of
// the source groups matching groups.include and not groups.exclude on the
// mirrored topics. A group active on the destination is skipped whole (its
// members commit their own offsets), and so are the partitions of stopped
// topics (after a failover the destination's consumers own them). A
// translated offset outside the destination partition's log is clamped to
// it. Each group's result is reported. The filters and the reports name
// the source's groups and topics; on the destination a group is named with
// group.name.prefix as it is now (a changed prefix moves the sync to the
// new names and leaves the old groups alone) and a topic by its row's
// destination name, so mirrors from several sources into one destination
// commit on their own topics, and with prefixes in their own groups.
func (p *syncPass) syncGroupOffsets(loadErr error) service.GroupOffsetsOutcome {
	var o service.GroupOffsetsOutcome
	err := loadErr
	if err == nil {
		err = p.groupOffsets(&o)
	}
	failed := 0
	for _, g := range o.Groups {
		if g.Error != "" {
			failed++
		}
	}
	switch {
	case err != nil:
		o.Error = err.Error()
	case failed > 0:
		o.Error = fmt.Sprintf("%d of %d group(s) failed", failed, len(o.Groups))
	}
	o.OK = o.Error == ""
	return o
}

func (p *syncPass) groupOffsets(o *service.GroupOffsetsOutcome) error {
	if p.srcErr != nil {
		return p.srcErr
	}
	if p.dstErr != nil {
		return p.dstErr
	}
	if p.cfg.GroupsInclude == nil || len(p.topics) == 0 {
		return nil
	}
	s := p.r.s
	var listed kadm.ListedGroups
	err := p.within("source list groups", func(ctx context.Context) (err error) {
		listed, err = p.src.admin.ListGroups(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("source cluster at %s: %w", p.mirror.BootstrapServers, err)
	}
	var groups []string
	for _, g := range listed.Groups() {
		if service.Matches(p.cfg.GroupsInclude, g) && !service.Matches(p.cfg.GroupsExclude, g) {
			groups = append(groups, g)
		}
	}
	if len(groups) == 0 {
		return nil
	}
	var srcOffsets kadm.FetchOffsetsResponses
	err = p.within("source fetch group offsets", func(ctx context.Context) error {
		srcOffsets = p.src.admin.FetchManyOffsets(ctx, groups...)
		return ctx.Err()
	})
	if err != nil {
		return fmt.Errorf("source cluster at %s: %w", p.mirror.BootstrapServers, err)
	}
	// Only groups with offsets on mirrored topics matter from here on.
	relevant := map[string][]kadm.OffsetResponse{}
	for _, g := range groups {
		r := srcOffsets[g]
		if r.Err != nil {
			o.Groups = append(o.Groups, service.GroupSync{Group: g, Error: fmt.Sprintf("fetch source offsets: %v", r.Err)})
			continue
		}
		r.Fetched.Each(func(off kadm.OffsetResponse) {
			if _, ok := p.topics[off.Topic]; ok && off.Err == nil && off.At >= 0 {
				relevant[g] = append(relevant[g], off)
			}
		})
	}
	if len(relevant) == 0 {
		return nil
	}
	names := sortedNames(relevant)
	dstNames := make([]string, len(names))
	for i, g := range names {
		dstNames[i] = p.destGroup(g)
	}
	var dstListed kadm.ListedGroups
	err = p.within("destination list groups", func(ctx context.Context) (err error) {
		dstListed, err = s.dstAdmin.ListGroups(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("destination cluster: %w", err)
	}
	var dstOffsets kadm.FetchOffsetsResponses
	err = p.within("destination fetch group offsets", func(ctx context.Context) error {
		dstOffsets = s.dstAdmin.FetchManyOffsets(ctx, dstNames...)
		return ctx.Err()
	})
	if err != nil {
		return fmt.Errorf("destination cluster: %w", err)
	}
	bounds, err := p.destinationBounds(names, relevant, dstListed)
	if err != nil {
		return fmt.Errorf("destination cluster: %w", err)
	}
	for _, g := range names {
		gs, err := p.syncGroup(g, relevant[g], dstListed, dstOffsets[p.destGroup(g)], bounds)
		if err != nil {
			return err
		}
		o.Groups = append(o.Groups, gs)
	}
	slices.SortFunc(o.Groups, func(a, b service.GroupSync) int { return cmp.Compare(a.Group, b.Group) })
	return nil
}

// logBounds are the destination's log start and end offsets of the
// topics whose group offsets a pass translates, by destination name.
type logBounds struct{ starts, ends kadm.ListedOffsets }

// of returns a partition's log start and end offsets on the destination;
// topic is the destination's name.
func (b logBounds) of(topic string, partition int32) (start, end int64, err error) {
	s, okS := b.starts.Lookup(topic, partition)
	e, okE := b.ends.Lookup(topic, partition)
	switch {
	case !okS || !okE:
		return 0, 0, fmt.Errorf("the destination did not list partition %d of topic %s", partition, topic)
	case s.Err != nil:
		return 0, 0, s.Err
	case e.Err != nil:
		return 0, 0, e.Err
	}
	return s.Offset, e.Offset, nil
}

// destinationBounds lists the destination's log start and end offsets of
// the topics with group offsets to translate: one request of each for the
// whole pass, whatever the number of groups.
func (p *syncPass) destinationBounds(names []string, relevant map[string][]kadm.OffsetResponse,
	dstListed kadm.ListedGroups) (logBounds, error) {
	need := map[string]bool{}
	for _, g := range names {
		if _, active := activeOnDestination(dstListed, p.destGroup(g)); active {
			continue
		}
		for _, off := range relevant[g] {
			if p.partitionSkipped(off.Topic, off.Partition) == "" {
				need[p.dest(off.Topic)] = true
			}
		}
	}
	var b logBounds
	if len(need) == 0 {
		return b, nil
	}
	topics := slices.Sorted(maps.Keys(need))
	dst := p.r.s.dstAdmin
	err := p.within("destination list start offsets", func(ctx context.Context) (err error) {
		b.starts, err = dst.ListStartOffsets(ctx, topics...)
		return err
	})
	if err != nil {
		return b, err
	}
	err = p.within("destination list end offsets", func(ctx context.Context) (err error) {
		b.ends, err = dst.ListEndOffsets(ctx, topics...)
		return err
	})
	return b, err
}

// activeOnDestination returns the group's state on the destination and
// whether it is one in which its members commit their own offsets.
func activeOnDestination(dstListed kadm.ListedGroups, g string) (string, bool) {
	lg, ok := dstListed[g]
	return lg.State, ok && !slices.Contains(idleGroupStates, lg.State)
}

// partitionSkipped says why no group offset is synced on a partition, or
// "" when its offsets are translated.
func (p *syncPass) partitionSkipped(topic string, partition int32) string {
	t := p.topics[topic]
	part, known := p.parts[topicPartition{topic, partition}]
	switch {
	case t.DesiredState == service.DesiredStopped || part.State == service.StateStopped ||
		part.State == service.StateStopping:
		return "topic is STOPPED: consumers on the destination own its offsets"
	case !known:
		return "partition is not mirrored yet"
	case part.DstNext == nil:
		return "nothing of the partition has been mirrored yet"
	}
	return ""
}

// clampOffset moves a translated offset into the destination partition's
// log, [start, end], and says why when it did. A committed offset below the
// log start makes a consumer fall back to its auto.offset.reset, which may
// skip to the latest record: the log start gives it every record the
// destination still has. One past the end points at records the
// destination does not hold.
func clampOffset(translated, start, end int64) (int64, string) {
	switch {
	case translated < start:
		return start, fmt.Sprintf("below the destination's log start %d (retention or a deletion removed the records before it): committed %d",
			start, start)
	case translated > end:
		return end, fmt.Sprintf("above the destination's end offset %d (the destination lost records that were mirrored): committed %d",
			end, end)
	}
	return translated, ""
}

// comparePartitions orders a group's partition lists by topic, then
// partition.
func comparePartitions(at string, ap int32, bt string, bp int32) int {
	if c := cmp.Compare(at, bt); c != 0 {
		return c
	}
	return cmp.Compare(ap, bp)
}

// syncGroup translates and commits one source group's offsets (offsets,
// on source topics) into its destination group, whose offsets dstFetched
// are. The returned error is only the lease's: the group's own failures
// are in its result.
func (p *syncPass) syncGroup(g string, offsets []kadm.OffsetResponse, dstListed kadm.ListedGroups,
	dstFetched kadm.FetchOffsetsResponse, bounds logBounds) (service.GroupSync, error) {
	gs := service.GroupSync{Group: g}
	dg := p.destGroup(g)
	if dg != g {
		gs.DestinationGroup = dg
	}
	if state, active := activeOnDestination(dstListed, dg); active {
		gs.SkippedReason = fmt.Sprintf("active on the destination (state %s): its members commit their own offsets", state)
		return gs, nil
	}
	if dstFetched.Err != nil && !errors.Is(dstFetched.Err, kerr.GroupIDNotFound) {
		gs.Error = fmt.Sprintf("fetch destination offsets: %v", dstFetched.Err)
		return gs, nil
	}
	defer func() {
		slices.SortFunc(gs.Skipped, func(a, b service.SkippedPartition) int {
			return comparePartitions(a.Topic, a.Partition, b.Topic, b.Partition)
		})
		slices.SortFunc(gs.Clamped, func(a, b service.ClampedPartition) int {
			return comparePartitions(a.Topic, a.Partition, b.Topic, b.Partition)
		})
	}()
	// commit is on destination topics; source maps them back for the
	// report.
	commit := kadm.Offsets{}
	source := map[string]string{}
	// clamps are the clamped partitions of commit: reported once committed.
	clamps := map[topicPartition]service.ClampedPartition{}
	skip := func(off kadm.OffsetResponse, reason string) {
		gs.Skipped = append(gs.Skipped, service.SkippedPartition{Topic: off.Topic, DestinationTopic: p.renamed(off.Topic),
			Partition: off.Partition, Reason: reason})
	}
	for _, off := range offsets {
		if reason := p.partitionSkipped(off.Topic, off.Partition); reason != "" {
			skip(off, reason)
			continue
		}
		part := p.parts[topicPartition{off.Topic, off.Partition}]
		tr, ok, err := p.svc().TranslateGroupOffset(p.ctx, part, off.At)
		if err != nil {
			if p.ctx.Err() != nil {
				return gs, errSyncLeaseLost
			}
			skip(off, fmt.Sprintf("translation failed: %v", err))
			gs.Error = "translation failed"
			continue
		}
		if !ok {
			skip(off, "nothing of the partition has been mirrored yet")
			continue
		}
		dest := p.dest(off.Topic)
		start, end, err := bounds.of(dest, off.Partition)
		if err != nil {
			skip(off, fmt.Sprintf("destination log start and end unknown: %v", err))
			gs.Error = "destination log start and end unknown"
			continue
		}
		at, reason := clampOffset(tr.DestinationOffset, start, end)
		clamp := service.ClampedPartition{Topic: off.Topic, DestinationTopic: p.renamed(off.Topic), Partition: off.Partition,
			TranslatedOffset: tr.DestinationOffset, CommittedOffset: at, Reason: reason}
		if cur, ok := dstFetched.Fetched.Lookup(dest, off.Partition); ok && cur.Err == nil && cur.At == at {
			gs.SyncedPartitions++
			if reason != "" {
				gs.Clamped = append(gs.Clamped, clamp)
			}
			continue
		}
		if reason != "" {
			clamps[topicPartition{off.Topic, off.Partition}] = clamp
		}
		source[dest] = off.Topic
		commit.Add(kadm.Offset{Topic: dest, Partition: off.Partition, At: at,
			LeaderEpoch: -1, Metadata: off.Metadata})
	}
	if len(commit) == 0 {
		return gs, nil
	}
	if err := p.guard(); err != nil {
		return gs, err
	}
	var resp kadm.OffsetResponses
	err := p.within("destination commit offsets", func(ctx context.Context) (err error) {
		resp, err = p.r.s.dstAdmin.CommitOffsets(ctx, dg, commit)
		return err
	})
	if err != nil {
		if errors.Is(err, errSyncLeaseLost) {
			return gs, err
		}
		gs.Error = fmt.Sprintf("commit on the destination: %v", err)
		return gs, nil
	}
	resp.Each(func(r kadm.OffsetResponse) {
		r.Topic = cmp.Or(source[r.Topic], r.Topic)
		if r.Err != nil {
			skip(r, fmt.Sprintf("commit failed: %v", r.Err))
			gs.Error = "some commits failed"
			return
		}
		gs.SyncedPartitions++
		gs.Committed++
		if c, ok := clamps[topicPartition{r.Topic, r.Partition}]; ok {
			gs.Clamped = append(gs.Clamped, c)
		}
	})
	return gs, nil
}
