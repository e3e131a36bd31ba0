package worker

import (
	"context"
	"errors"

	"kmirror/repo"

	"github.com/twmb/franz-go/pkg/kerr"
)

// enforceReadOnly adds (on) or lifts (off) the destination topic's
// read-only ACL (a DENY WRITE for User:*; kmirror's own principal must be a
// super user) and records whether the destination enforces it
// (Engine.EnforcesACLs). A destination without an authorizer cannot
// enforce it; foreign writes are then still caught by the produce offset
// check.
func (w *Worker) enforceReadOnly(ctx context.Context, on bool) error {
	var err error
	if on {
		err = w.p.Destination.ReadOnlyACL(ctx, w.dest, true)
	} else {
		// Only the last partition to stop lifts it: the others are still
		// being mirrored.
		busy, cerr := w.p.Topics.CountStillMirrored(ctx, w.fence())
		if cerr != nil {
			return retryable("count mirrored partitions: %v", cerr)
		}
		if busy > 0 {
			return nil
		}
		// A deletion that fails is retried: STOPPED promises a writable
		// destination topic.
		err = w.p.Destination.ReadOnlyACL(ctx, w.dest, false)
	}
	enforced := true
	switch {
	case errors.Is(err, kerr.SecurityDisabled):
		enforced = false
	case err != nil:
		return retryable("read-only ACL on destination topic %s: %v", w.dest, err)
	case on:
		enforced = w.p.Destination.EnforcesACLs(ctx)
	}
	// The topic's partitions share the read of what is recorded; only a
	// change is written (fenced), once for those that find it missing
	// together.
	value := enforced && on
	state, err := w.p.Topics.TopicState(ctx, w.key.Mirror, w.key.Topic)
	if err == nil && state.ReadOnlyEnforced != nil && *state.ReadOnlyEnforced == value {
		return nil
	}
	err = w.p.Topics.RecordReadOnlyEnforced(ctx, w.fence(), value)
	if errors.Is(err, repo.ErrNotFound) {
		return errStop // the lease moved on
	}
	if err != nil {
		return retryable("record read-only state: %v", err)
	}
	return nil
}
