package service

import (
	"context"
	"fmt"
	"time"

	"kmirror/repo"
)

// MirrorStatus summarizes a mirror's topics and partitions.
type MirrorStatus struct {
	Topics     int
	Partitions int
	// States counts partitions by actual state, UNKNOWN included; states
	// no partition is in are left out.
	States map[string]int
	// Lag sums the known per-partition lag.
	Lag int64
	// Erroring counts partitions with an error (FAILED, or retrying in
	// their state).
	Erroring int
	// RecordsPerSec is the latest rate the History sampled; 0 until known.
	RecordsPerSec float64
	// ThrottledMs sums how long the partitions' copies have waited for the
	// mirror's replication throttle, each since it was added.
	ThrottledMs int64
	// Realigning counts the partitions their new owner is re-aligning
	// after taking them over.
	Realigning int
	// MaxLagMs is the largest lag in time of the mirror's partitions (the
	// age of the oldest source record not yet on the destination, 0 when
	// caught up) among those whose lag in time is known; nil when none is.
	MaxLagMs *int64
	// Source and Destination say whether kmirror reaches each cluster.
	Source, Destination ClusterReachability
}

// ClusterReachability is whether kmirror reaches a Kafka cluster, as its
// probes last found (workers/metadatasync: the holder of a mirror's
// metadata lease probes its source, every instance the destination).
type ClusterReachability struct {
	// Known is false while no live prober has an answer: the mirror's
	// metadata lease is free, or its holder stopped renewing it.
	Known     bool
	Reachable bool
	// Since is when the answer last changed.
	Since time.Time
	// Error is why the last probe failed, while unreachable.
	Error string
}

// clusterReachability splits the known answers into each mirror's source
// and one answer for the destination: unreachable when any live instance
// fails to reach it (the one failing longest, named in the error), else
// reachable since the last instance began to reach it.
func clusterReachability(rows []repo.ClusterReachabilityRow) (sources map[string]ClusterReachability, dst ClusterReachability) {
	sources = map[string]ClusterReachability{}
	for _, r := range rows {
		c := ClusterReachability{Known: true, Reachable: r.Reachable, Since: r.Since, Error: r.Error}
		if r.Instance == "" {
			sources[r.Mirror] = c
			continue
		}
		if !c.Reachable {
			c.Error = fmt.Sprintf("instance %s: %s", r.Instance, c.Error)
		}
		switch {
		case !dst.Known:
			dst = c
		case dst.Reachable && !c.Reachable:
			dst = c
		case dst.Reachable == c.Reachable && dst.Reachable && c.Since.After(dst.Since):
			dst = c
		case dst.Reachable == c.Reachable && !dst.Reachable && c.Since.Before(dst.Since):
			dst = c
		}
	}
	return sources, dst
}

func emptyStatus() MirrorStatus { return MirrorStatus{States: map[string]int{}} }

// mirrorStatuses returns the status of every mirror, or of the one named,
// from one grouped query.
func (s *Control) mirrorStatuses(ctx context.Context, q repo.DBTX, mirror string) (map[string]MirrorStatus, error) {
	rows, err := repo.MirrorsStatus(ctx, q, mirror)
	if err != nil {
		return nil, err
	}
	reach, err := repo.ClusterReachabilityList(ctx, q, mirror)
	if err != nil {
		return nil, err
	}
	sources, dst := clusterReachability(reach)
	out := map[string]MirrorStatus{}
	for _, r := range rows {
		st, seen := out[r.Mirror]
		if !seen {
			st = emptyStatus()
			st.Topics = r.Topics
			st.RecordsPerSec = s.history.Rate(r.Mirror, "")
			st.Source, st.Destination = sources[r.Mirror], dst
		}
		if r.State != "" {
			st.States[r.State] += r.Partitions
			st.Partitions += r.Partitions
			st.Lag += r.Lag
			st.Erroring += r.Erroring
			st.ThrottledMs += r.ThrottledMs
			st.Realigning += r.Realigning
			if r.MaxLagMs != nil && (st.MaxLagMs == nil || *r.MaxLagMs > *st.MaxLagMs) {
				v := *r.MaxLagMs
				st.MaxLagMs = &v
			}
		}
		out[r.Mirror] = st
	}
	return out, nil
}

// mirrorStatus returns one mirror's status; an empty one when the mirror
// is gone.
func (s *Control) mirrorStatus(ctx context.Context, q repo.DBTX, mirror string) (MirrorStatus, error) {
	all, err := s.mirrorStatuses(ctx, q, mirror)
	if err != nil {
		return MirrorStatus{}, err
	}
	if st, ok := all[mirror]; ok {
		return st, nil
	}
	return emptyStatus(), nil
}
