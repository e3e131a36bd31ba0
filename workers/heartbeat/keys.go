package heartbeat

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"time"

	"kmirror/repo"
)

// Heartbeat keys (repo.HeartbeatKeysList) are read from the database every
// Config.KeysReload (keysReload). A rotation's key signs a minute after it
// was written, by the database's clock (service.HeartbeatKeyDelay): by then
// every instance that reached the database has read it, as the minute is
// longer than staleReloads reloads. A reader whose keys are older than that
// may not know the key a heartbeat was signed with, so it cannot tell who
// is alive (Spared spares every session).
const (
	keysReload   = 5 * time.Second
	staleReloads = 4
)

// keyring is what a Heartbeats knows of the deployment's keys.
type keyring struct {
	keys   map[int64][]byte
	signer int64 // the newest key that signs; 0: none yet
	loaded time.Time
}

func newKeyring(rows []repo.HeartbeatKeyRow, loaded time.Time) keyring {
	k := keyring{keys: make(map[int64][]byte, len(rows)), loaded: loaded}
	for _, r := range rows {
		k.keys[r.ID] = r.Key
		if r.Signs && r.ID > k.signer {
			k.signer = r.ID
		}
	}
	return k
}

// mac signs what a heartbeat says: whose it is (the record's key), its
// session and its beat. A client that can write the topic but does not
// hold the key can neither forge one nor move a real one to another
// instance or session.
func mac(key []byte, recordKey string, session, beat int64) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("kmirror heartbeat v1\x00"))
	m.Write([]byte(recordKey))
	var n [17]byte
	binary.BigEndian.PutUint64(n[1:9], uint64(session))
	binary.BigEndian.PutUint64(n[9:], uint64(beat))
	m.Write(n[:])
	return m.Sum(nil)
}

// loadKeys reads the keys from the database, when Config.Keys is set.
func (h *Heartbeats) loadKeys(ctx context.Context) error {
	lctx, cancel := context.WithTimeout(ctx, h.cfg.KeysReload)
	defer cancel()
	rows, err := h.cfg.Keys(lctx)
	if err != nil {
		return err
	}
	ring := newKeyring(rows, h.cfg.Now())
	h.mu.Lock()
	h.keys = ring
	h.recheck()
	h.mu.Unlock()
	return nil
}

// reloadKeys reads the keys every keysReload until ctx ends.
func (h *Heartbeats) reloadKeys(ctx context.Context) {
	failing := false
	for {
		err := h.loadKeys(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil && !failing {
			h.log.Warn("heartbeats: cannot read the heartbeat keys; signing with the last read", "err", err)
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			return
		case <-time.After(h.cfg.KeysReload):
		}
	}
}
