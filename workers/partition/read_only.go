package partition

import (
	"context"
	"errors"
	"fmt"

	"kmirror/repo"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// readOnlyACL is the DENY WRITE for User:* that keeps a mirrored topic
// read-only on the destination; kmirror's own principal must be a super user.
func readOnlyACL(topic string) *kadm.ACLBuilder {
	return kadm.NewACLs().Topics(topic).ResourcePatternType(kadm.ACLPatternLiteral).
		Deny("User:*").DenyHosts("*").Operations(kadm.OpWrite)
}

// enforceReadOnly adds (on) or lifts (off) the topic's read-only ACL and
// records whether the destination enforces it (see authorizerProbe). A
// destination without an authorizer cannot enforce it; foreign writes are
// then still caught by the produce offset check.
func (w *partitionWorker) enforceReadOnly(ctx context.Context, on bool) error {
	var err error
	if on {
		err = w.e.addReadOnlyACL(ctx, w.key.Topic)
	} else {
		// Only the last partition to stop lifts it: the others are still
		// being mirrored.
		busy, err := repo.PartitionsCountStillMirrored(ctx, w.e.cfg.Pool, w.fence())
		if err != nil {
			return retryable("count mirrored partitions: %v", err)
		}
		if busy > 0 {
			return nil
		}
		var res kadm.DeleteACLsResults
		res, err = w.e.dstAdmin.DeleteACLs(ctx, readOnlyACL(w.key.Topic))
		for _, r := range res {
			err = errors.Join(err, r.Err)
		}
	}
	enforced := true
	switch {
	case errors.Is(err, kerr.SecurityDisabled):
		enforced = false
	case err != nil:
		return retryable("read-only ACL on destination topic %s: %v", w.key.Topic, err)
	case on:
		enforced = w.e.authorizer.enforces(ctx)
	}
	// The topic's partitions share the read of what is recorded; only a
	// change is written (fenced), once for those that find it missing
	// together.
	value := enforced && on
	state, err := w.e.topicState(ctx, w.key.Mirror, w.key.Topic)
	if err == nil && state.ReadOnlyEnforced != nil && *state.ReadOnlyEnforced == value {
		return nil
	}
	_, err = w.e.writeTopicRow(ctx, w.fence(), fmt.Sprint("read_only_enforced=", value), func(ctx context.Context, f repo.LeaseFence) ([]byte, error) {
		return nil, repo.TopicsSetReadOnlyEnforced(ctx, w.e.cfg.Pool, f, value)
	})
	if errors.Is(err, repo.ErrNotFound) {
		return errStop // the lease moved on
	}
	if err != nil {
		return retryable("record read-only state: %v", err)
	}
	return nil
}
