package lease

import (
	"context"
	"time"

	"kmirror/repo"
)

// Riding through a database outage (ManagerConfig.Heartbeat): the
// heartbeat loop runs beside the lease loop, which a database that hangs
// can hold for several statement timeouts, and extends the partition
// leases' trust on each acknowledged heartbeat.

// ridesThrough says whether leases may outlive the session's renewals.
func (m *Manager) ridesThrough() bool {
	return m.cfg.Heartbeat != nil && m.cfg.OutageGrace > 0
}

// spared is what an acquisition must leave to sessions that may be riding
// through an outage.
func (m *Manager) spared() repo.Spared {
	if !m.ridesThrough() {
		return repo.Spared{}
	}
	return m.trust.Spared(m.cfg.Heartbeat)
}

// beatLoop writes a heartbeat every RenewInterval, and right after each
// renewal of the session.
func (m *Manager) beatLoop(ctx context.Context) {
	tick := time.NewTicker(m.cfg.RenewInterval)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-m.beatNow:
		}
		err := m.beatOnce(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			m.log.Warn("heartbeat not acknowledged; leases are trusted on the database's renewals only", "err", err)
		case err == nil && failing:
			m.log.Info("heartbeats acknowledged again")
		}
		failing = err != nil
	}
}

// beatOnce writes one heartbeat of the session and, once it is
// acknowledged, moves the leases' trust deadline to TTL − Margin
// after the heartbeat was sent, but never past OutageGrace after the
// session's last renewal: the same bound a taker's database applies
// (repo.Spared).
func (m *Manager) beatOnce(ctx context.Context) error {
	m.beat.mu.Lock()
	session, renewedAt := m.beat.session, m.beat.renewedAt
	m.beat.mu.Unlock()
	if session == 0 {
		return nil
	}
	start := time.Now()
	bctx, cancel := context.WithTimeout(ctx, m.cfg.RenewInterval)
	err := m.cfg.Heartbeat.Beat(bctx, session)
	cancel()
	if err != nil {
		return err
	}
	deadline := m.trust.AfterHeartbeat(start, renewedAt)
	m.beat.mu.Lock()
	defer m.beat.mu.Unlock()
	for l := range m.beat.leases {
		if !l.extend(deadline) {
			delete(m.beat.leases, l) // ended: lost, expired or handed back
		}
	}
	return nil
}
