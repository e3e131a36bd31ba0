package service

import (
	"context"

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
}

func emptyStatus() MirrorStatus { return MirrorStatus{States: map[string]int{}} }

// mirrorStatuses returns the status of every mirror, or of the one named,
// from one grouped query.
func (s *Service) mirrorStatuses(ctx context.Context, q repo.DBTX, mirror string) (map[string]MirrorStatus, error) {
	rows, err := repo.MirrorsStatus(ctx, q, mirror)
	if err != nil {
		return nil, err
	}
	out := map[string]MirrorStatus{}
	for _, r := range rows {
		st, seen := out[r.Mirror]
		if !seen {
			st = emptyStatus()
			st.Topics = r.Topics
			st.RecordsPerSec = s.history.Rate(r.Mirror, "")
		}
		if r.State != "" {
			st.States[r.State] += r.Partitions
			st.Partitions += r.Partitions
			st.Lag += r.Lag
			st.Erroring += r.Erroring
		}
		out[r.Mirror] = st
	}
	return out, nil
}

// mirrorStatus returns one mirror's status; an empty one when the mirror
// is gone.
func (s *Service) mirrorStatus(ctx context.Context, q repo.DBTX, mirror string) (MirrorStatus, error) {
	all, err := s.mirrorStatuses(ctx, q, mirror)
	if err != nil {
		return MirrorStatus{}, err
	}
	if st, ok := all[mirror]; ok {
		return st, nil
	}
	return emptyStatus(), nil
}
