package lease

import (
	"errors"
	"fmt"
	"time"

	"kmirror/repo"
)

// Trust holds the durations that keep two owners of a lease apart, and is
// the one place that says, from them, until when an owner may act on its
// leases (its side) and which expired sessions a taker must leave alone
// (the taker's side, through repo.Spared).
//
// Each side measures only durations on its own clock; no two clocks are
// compared. The clocks are the database's (a session's expiry, now() + TTL
// at each renewal) and each instance's monotonic one.
//
// The owner's side. A renewal attempted at s (owner's clock) trusts the
// session's leases until s + TTL − Margin. While the database cannot be
// reached, each heartbeat sent at b and acknowledged by the destination
// moves that to b + TTL − Margin, but never past the last renewal r plus
// TTL + OutageGrace − Margin, and never brings back a lease whose deadline
// has passed.
//
// The taker's side. A taker takes a lease only once its session has
// expired in the database, and, for OutageGrace after that expiry, only if
// it has read the heartbeats to their end within the last Margin and saw
// none of that session within the last TTL (heartbeat.Heartbeats.Spared).
//
// Why two never overlap. A copy handed to the producer while the owner
// trusts its lease lands or fails within the delivery timeout D
// (DeliveryTimeout), so it must be settled before a taker may take; and
// the owner's clock and the others' (the database's, a taker's) run at
// rates at most ClockDrift apart, so a duration of x on one is at least
// x·(1 − ClockDrift) on another. Each bound below leaves Margin between the
// owner's last trusted moment and the earliest take, measured across at
// most TTL + OutageGrace; so Trust holds when
//
//	DeliveryTimeout + ClockDrift·(TTL + OutageGrace) < Margin
//
// (and Margin < TTL, RenewInterval < TTL − Margin so that renewals keep
// leases alive). NewTrust refuses durations that break any of them.
//
//   - Renewals: the expiry the database sets is at least s + TTL, and the
//     owner stops at s + TTL − Margin: Margin apart.
//   - Heartbeats: let b be the owner's last acknowledged beat. Had the
//     taker read it, it would wait until at least b + TTL: Margin past the
//     owner's deadline. Had it not, the beat was appended after the
//     taker's last listing of the topic, so acknowledged at most Margin
//     before the take; the lease it extended was valid then, so an earlier
//     beat or renewal had trusted it past take − Margin, which by the same
//     argument the taker must have read or the database must still count:
//     either forbids the take. The chain ends at a renewal.
//   - The grace: the database spares no session longer than OutageGrace
//     past its expiry (≥ r + TTL), and the owner stops by r + TTL +
//     OutageGrace − Margin.
//
// TestTrustNeverTwoOwners drives random clocks, delays, outages and
// delivery timeouts against both sides; TestTrustDeliveryPastTheMargin
// shows a delivery timeout the inequality refuses letting a copy land
// after a take.
type Trust struct {
	TTL, Margin, RenewInterval, OutageGrace time.Duration
	// DeliveryTimeout is the longest a copy handed to the destination's
	// producer may take to land or fail (the engine's); 0 for an instance
	// that copies nothing.
	DeliveryTimeout time.Duration
}

// ClockDrift bounds how far apart the rates of two clocks that Trust
// relies on may be (an instance's monotonic clock, the database's): one
// part in a thousand, far above what a crystal oscillator drifts.
const ClockDrift = 0.001

// NewTrust returns the Trust of these durations, or an error naming the
// inequality they break.
func NewTrust(ttl, margin, renew, grace, delivery time.Duration) (Trust, error) {
	drift := time.Duration(ClockDrift * float64(ttl+grace))
	switch {
	case ttl <= 0 || renew <= 0 || margin <= 0:
		return Trust{}, errors.New("lease manager: TTL, RenewInterval and Margin must be positive")
	case grace < 0 || delivery < 0:
		return Trust{}, errors.New("lease manager: OutageGrace and DeliveryTimeout must not be negative")
	case margin >= ttl:
		return Trust{}, fmt.Errorf("lease manager: Margin %s must be shorter than TTL %s", margin, ttl)
	case renew >= ttl-margin:
		return Trust{}, fmt.Errorf("lease manager: RenewInterval %s must be shorter than TTL − Margin (%s), or leases lapse between renewals",
			renew, ttl-margin)
	case delivery+drift >= margin:
		return Trust{}, fmt.Errorf("lease manager: DeliveryTimeout %s + ClockDrift·(TTL + OutageGrace) (%s) must be shorter than Margin %s, "+
			"or a copy sent under the lease could land after another instance took it", delivery, drift, margin)
	}
	return Trust{TTL: ttl, Margin: margin, RenewInterval: renew, OutageGrace: grace, DeliveryTimeout: delivery}, nil
}

// AfterRenewal is until when a renewal attempted at start trusts the
// session's leases.
func (t Trust) AfterRenewal(start time.Time) time.Time {
	return start.Add(t.TTL - t.Margin)
}

// AfterHeartbeat is until when an acknowledged heartbeat sent at sent
// trusts the leases of a session last renewed at renewed.
func (t Trust) AfterHeartbeat(sent, renewed time.Time) time.Time {
	deadline := sent.Add(t.TTL - t.Margin)
	if limit := renewed.Add(t.TTL + t.OutageGrace - t.Margin); limit.Before(deadline) {
		return limit
	}
	return deadline
}

// Spared is the taker's side: the expired sessions whose leases must not
// be taken yet, by what h has read of the heartbeats.
func (t Trust) Spared(h Heartbeater) repo.Spared {
	return h.Spared(t.OutageGrace, t.TTL, t.Margin)
}
