package service

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"kmirror/repo"
)

// A heartbeat key (migration 000026) signs HeartbeatKeyDelay after the
// rotation that made it: longer than an instance's keys may be old before
// it spares every session (workers/heartbeat, 4 reloads of 5 s), so every
// instance that takes leases knows a key before any heartbeat is signed
// with it. The key it follows goes HeartbeatKeyRetire after that, with the
// next rotation.
const (
	HeartbeatKeyDelay  = time.Minute
	HeartbeatKeyRetire = 10 * time.Minute
)

// HeartbeatKeyRotation is what RotateHeartbeatKey did.
type HeartbeatKeyRotation struct {
	ID int64
	// SignsIn is how long until the new key signs.
	SignsIn time.Duration
}

// RotateHeartbeatKey adds a fresh heartbeat key, which instances sign with
// from HeartbeatKeyDelay on, and deletes keys no instance has signed with
// for HeartbeatKeyRetire. A heartbeat signed with a key the database no
// longer holds is ignored by every instance.
func (s *Control) RotateHeartbeatKey(ctx context.Context) (HeartbeatKeyRotation, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return HeartbeatKeyRotation{}, fmt.Errorf("heartbeat key: %w", err)
	}
	id, err := repo.HeartbeatKeysRotate(ctx, s.pool, key, HeartbeatKeyDelay, HeartbeatKeyRetire)
	if err != nil {
		return HeartbeatKeyRotation{}, err
	}
	return HeartbeatKeyRotation{ID: id, SignsIn: HeartbeatKeyDelay}, nil
}
