package service

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"kmirror/repo"
)

// VerifyReport is what kmirror restore --verify found: one line per kind,
// and every difference. A good restore has no difference.
type VerifyReport struct {
	Lines       []string
	Differences []string
}

// maxListed bounds how many differences of one kind the report names.
const maxListed = 20

// VerifyRestore compares the database with __mirror_state as a restore
// left it: the count of each kind; each topic's destination name; each
// partition's state and checkpoint (after the same fitting to its offset
// map that restore does); no checkpoint ahead of the destination's end
// offset (destEnds, by destination topic and partition); and every offset map contiguous (runs in source order that
// neither overlap nor leave a gap on the destination, ending at or before
// the checkpoint) and equal to the published one. Run it right after restore: a server that has run
// since moves checkpoints past what the topic says.
func (s *Control) VerifyRestore(ctx context.Context, snap StateSnapshot, destEnds map[string]map[int32]int64) (VerifyReport, error) {
	var rep VerifyReport
	mirrors, err := repo.MirrorsList(ctx, s.pool)
	if err != nil {
		return rep, err
	}
	var topics int
	var acls int
	dests := map[[2]string]string{} // (mirror, topic) → destination name, as the database has it
	for _, m := range mirrors {
		ts, err := repo.TopicsList(ctx, s.pool, m.Name)
		if err != nil {
			return rep, err
		}
		topics += len(ts)
		for _, t := range ts {
			dests[[2]string{t.Mirror, t.Topic}] = t.DestTopic
		}
		as, err := repo.SyncedACLsList(ctx, s.pool, m.Name)
		if err != nil {
			return rep, err
		}
		acls += len(as)
	}
	parts, err := repo.PartitionsList(ctx, s.pool, repo.PartitionsListParams{})
	if err != nil {
		return rep, err
	}
	runs, err := repo.OffsetRunsListAll(ctx, s.pool)
	if err != nil {
		return rep, err
	}

	// What the topic says, fitted as restore fits it.
	known := map[string]bool{}
	for _, m := range snap.Mirrors {
		known[m.Name] = true
	}
	wantTopics, wantACLs, wantRuns, gotRuns := 0, 0, 0, 0
	for _, t := range snap.Topics {
		if known[t.Mirror] {
			wantTopics++
		}
	}
	for _, a := range snap.SyncedACLs {
		if known[a.Mirror] {
			wantACLs += len(a.ACLs)
		}
	}
	want := map[repo.PartitionID]PartitionRecord{}
	wantMaps := map[repo.PartitionID][]repo.OffsetRun{}
	for _, p := range snap.Partitions {
		if !known[p.Mirror] {
			continue
		}
		id := repo.PartitionID{Mirror: p.Mirror, Topic: p.Topic, Partition: p.Partition}
		fit, _ := fitOffsetMap(snap.OffsetMaps[id], &p)
		wantRuns += len(fit)
		want[id], wantMaps[id] = p, fit
	}
	for _, rs := range runs {
		gotRuns += len(rs)
	}
	count := func(kind string, inTopic, inDB int) {
		verdict := "ok"
		if inTopic != inDB {
			verdict = "DIFFERENT"
			rep.Differences = append(rep.Differences, fmt.Sprintf("%s: %d in %s, %d in the database", kind, inTopic, StateTopic, inDB))
		}
		rep.Lines = append(rep.Lines, fmt.Sprintf("%-16s %6d in %s %6d in the database  %s", kind, inTopic, StateTopic, inDB, verdict))
	}
	count("mirrors", len(snap.Mirrors), len(mirrors))
	count("topics", wantTopics, topics)
	count("partitions", len(want), len(parts))
	count("offset-map runs", wantRuns, gotRuns)
	count("synced ACLs", wantACLs, acls)

	wantDests := snap.DestinationTopics()
	var renamed []string
	for _, k := range sortedTopicKeys(dests) {
		if w, ok := wantDests[k]; ok && w != dests[k] {
			renamed = append(renamed, fmt.Sprintf("%s/%s: destination topic %s in %s, %s in the database",
				k[0], k[1], w, StateTopic, dests[k]))
		}
	}
	verdict := "ok"
	if len(renamed) > 0 {
		verdict = fmt.Sprintf("%d differ from %s", len(renamed), StateTopic)
	}
	rep.Lines = append(rep.Lines, fmt.Sprintf("%-16s %6d checked  %s", "topic names", len(dests), verdict))
	rep.Differences = append(rep.Differences, listed("topic names", renamed)...)

	var differ, ahead, broken []string
	for _, p := range parts {
		id := repo.PartitionID{Mirror: p.Mirror, Topic: p.Topic, Partition: p.Partition}
		name := fmt.Sprintf("%s/%s/%d", p.Mirror, p.Topic, p.Partition)
		w, ok := want[id]
		switch {
		case !ok:
			differ = append(differ, name+": not in "+StateTopic)
		case w.State != p.State || !sameOffset(w.SrcNext, p.SrcNext) || !sameOffset(w.DstNext, p.DstNext):
			differ = append(differ, fmt.Sprintf("%s: %s src_next %s dst_next %s in %s, %s src_next %s dst_next %s in the database", name,
				w.State, offsetText(w.SrcNext), offsetText(w.DstNext), StateTopic,
				p.State, offsetText(p.SrcNext), offsetText(p.DstNext)))
		}
		if p.DstNext != nil {
			if end, ok := destEnds[dests[[2]string{p.Mirror, p.Topic}]][p.Partition]; !ok {
				ahead = append(ahead, name+": the destination has no such partition")
			} else if *p.DstNext > end {
				ahead = append(ahead, fmt.Sprintf("%s: dst_next %d is past the destination's end offset %d", name, *p.DstNext, end))
			}
		}
		if why := offsetMapProblem(runs[id], p.DstNext); why != "" {
			broken = append(broken, name+": "+why)
		} else if ok && !slices.Equal(runs[id], wantMaps[id]) {
			broken = append(broken, fmt.Sprintf("%s: %d run(s) in the database differ from the %d in %s",
				name, len(runs[id]), len(wantMaps[id]), StateTopic))
		}
	}
	check := func(kind string, bad []string, what string) {
		verdict := "ok"
		if len(bad) > 0 {
			verdict = fmt.Sprintf("%d %s", len(bad), what)
		}
		rep.Lines = append(rep.Lines, fmt.Sprintf("%-16s %6d checked  %s", kind, len(parts), verdict))
		rep.Differences = append(rep.Differences, listed(kind, bad)...)
	}
	check("checkpoints", differ, "differ from "+StateTopic)
	check("destination", ahead, "ahead of the destination")
	check("offset maps", broken, "not contiguous, past the checkpoint or not as published")
	return rep, nil
}

// listed is the differences of one kind as the report names them: at most
// maxListed, then how many more.
func listed(kind string, bad []string) []string {
	var out []string
	for i, b := range bad {
		if i == maxListed {
			return append(out, fmt.Sprintf("%s: and %d more", kind, len(bad)-i))
		}
		out = append(out, kind+": "+b)
	}
	return out
}

// sortedTopicKeys returns the (mirror, topic) keys of m, sorted.
func sortedTopicKeys[V any](m map[[2]string]V) [][2]string {
	keys := make([][2]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1])) })
	return keys
}

// offsetMapProblem says what is wrong with a partition's runs (in source
// order), or "".
func offsetMapProblem(runs []repo.OffsetRun, dstNext *int64) string {
	for i := 1; i < len(runs); i++ {
		prev, r := runs[i-1], runs[i]
		if r.SrcStart < prev.SrcStart+prev.Count {
			return fmt.Sprintf("run at source offset %d overlaps the one at %d", r.SrcStart, prev.SrcStart)
		}
		if r.DstStart != prev.DstStart+prev.Count {
			return fmt.Sprintf("run at source offset %d starts at destination offset %d, not %d", r.SrcStart, r.DstStart, prev.DstStart+prev.Count)
		}
	}
	if n := len(runs); n > 0 {
		last := runs[n-1]
		if dstNext == nil || last.DstStart+last.Count > *dstNext {
			return fmt.Sprintf("the map reaches destination offset %d, past the checkpoint's %s", last.DstStart+last.Count, offsetText(dstNext))
		}
	}
	return ""
}

func sameOffset(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func offsetText(o *int64) string {
	if o == nil {
		return "none"
	}
	return fmt.Sprint(*o)
}
