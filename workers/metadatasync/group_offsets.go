package metadatasync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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
// topics (after a failover the destination's consumers own them). Each
// group's result is reported.
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
		dstOffsets = s.dstAdmin.FetchManyOffsets(ctx, names...)
		return ctx.Err()
	})
	if err != nil {
		return fmt.Errorf("destination cluster: %w", err)
	}
	for _, g := range names {
		gs, err := p.syncGroup(g, relevant[g], dstListed, dstOffsets[g])
		if err != nil {
			return err
		}
		o.Groups = append(o.Groups, gs)
	}
	slices.SortFunc(o.Groups, func(a, b service.GroupSync) int { return cmp.Compare(a.Group, b.Group) })
	return nil
}

// syncGroup translates and commits one group's offsets. The returned error
// is only the lease's: the group's own failures are in its result.
func (p *syncPass) syncGroup(g string, offsets []kadm.OffsetResponse, dstListed kadm.ListedGroups,
	dstFetched kadm.FetchOffsetsResponse) (service.GroupSync, error) {
	gs := service.GroupSync{Group: g}
	if lg, ok := dstListed[g]; ok && !slices.Contains(idleGroupStates, lg.State) {
		gs.SkippedReason = fmt.Sprintf("active on the destination (state %s): its members commit their own offsets", lg.State)
		return gs, nil
	}
	if dstFetched.Err != nil && !errors.Is(dstFetched.Err, kerr.GroupIDNotFound) {
		gs.Error = fmt.Sprintf("fetch destination offsets: %v", dstFetched.Err)
		return gs, nil
	}
	slices.SortFunc(offsets, func(a, b kadm.OffsetResponse) int {
		if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
	commit := kadm.Offsets{}
	skip := func(off kadm.OffsetResponse, reason string) {
		gs.Skipped = append(gs.Skipped, service.SkippedPartition{Topic: off.Topic, Partition: off.Partition, Reason: reason})
	}
	for _, off := range offsets {
		t := p.topics[off.Topic]
		part, known := p.parts[topicPartition{off.Topic, off.Partition}]
		switch {
		case t.DesiredState == service.DesiredStopped || part.State == service.StateStopped ||
			part.State == service.StateStopping:
			skip(off, "topic is STOPPED: consumers on the destination own its offsets")
			continue
		case !known:
			skip(off, "partition is not mirrored yet")
			continue
		case part.DstNext == nil:
			skip(off, "nothing of the partition has been mirrored yet")
			continue
		}
		tr, ok, err := p.svc().TranslateGroupOffset(p.ctx, p.mirror.Name, off.Topic, off.Partition, off.At, *part.DstNext)
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
		if cur, ok := dstFetched.Fetched.Lookup(off.Topic, off.Partition); ok && cur.Err == nil && cur.At == tr.DestinationOffset {
			gs.SyncedPartitions++
			continue
		}
		commit.Add(kadm.Offset{Topic: off.Topic, Partition: off.Partition, At: tr.DestinationOffset,
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
		resp, err = p.r.s.dstAdmin.CommitOffsets(ctx, g, commit)
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
		if r.Err != nil {
			skip(r, fmt.Sprintf("commit failed: %v", r.Err))
			gs.Error = "some commits failed"
			return
		}
		gs.SyncedPartitions++
		gs.Committed++
	})
	slices.SortFunc(gs.Skipped, func(a, b service.SkippedPartition) int {
		if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
	return gs, nil
}
