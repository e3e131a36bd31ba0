package lease

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// TestNewTrustRefusesBrokenSettings: the inequalities Trust rests on are
// checked when it is made.
func TestNewTrustRefusesBrokenSettings(t *testing.T) {
	const s = time.Second
	for _, c := range []struct {
		name                                string
		ttl, margin, renew, grace, delivery time.Duration
		ok                                  bool
	}{
		// The server's defaults: delivery min(4 s, TTL/4).
		{"defaults", 15 * s, 5 * s, 5 * s, time.Minute, 3750 * time.Millisecond, true},
		{"KMIRROR_DELIVERY_TIMEOUT=4s", 15 * s, 5 * s, 5 * s, time.Minute, 4 * s, true},
		// The e2e servers' timings: TTL 3.5 s, margin TTL/3, delivery 1 s.
		{"e2e timings", 3500 * time.Millisecond, 3500 * time.Millisecond / 3, 500 * time.Millisecond, time.Minute, s, true},
		{"an instance that copies nothing", 15 * s, 5 * s, 5 * s, 0, 0, true},
		{"margin as long as the TTL", 15 * s, 15 * s, s, 0, 0, false},
		{"renewals slower than the trust", 15 * s, 5 * s, 10 * s, 0, 0, false},
		{"negative grace", 15 * s, 5 * s, 5 * s, -s, 0, false},
		{"negative delivery", 15 * s, 5 * s, 5 * s, 0, -s, false},
		{"no margin", 15 * s, 0, 5 * s, 0, 0, false},
		{"delivery as long as the margin", 15 * s, 5 * s, 5 * s, 0, 5 * s, false},
		// 4.95 s + 0.1% of 15 s = 4.965 s fits; with an hour's grace the
		// clocks may drift 3.6 s more over the ride-through.
		{"delivery within the drift", 15 * s, 5 * s, 5 * s, 0, 4950 * time.Millisecond, true},
		{"delivery that the drift over the grace eats", 15 * s, 5 * s, 5 * s, time.Hour, 4 * s, false},
	} {
		if _, err := NewTrust(c.ttl, c.margin, c.renew, c.grace, c.delivery); (err == nil) != c.ok {
			t.Errorf("%s: NewTrust error %v, want ok %v", c.name, err, c.ok)
		}
	}
}

var debugTrust = os.Getenv("KMIRROR_DEBUG_TRUST") != ""

// TestTrustNeverTwoOwners drives an owner and a taker through random
// clocks (their rates within ClockDrift of each other), database outages,
// destination outages, heartbeats delayed by up to a few seconds and
// delivery timeouts up to what NewTrust accepts, with the owner's side
// computed by Trust and the taker's by the rules repo.Spared and
// heartbeat.Spared apply. Whenever the taker takes the owner's lease, the
// owner must have stopped trusting it at least the delivery timeout before
// (its last copies landed or failed), in every run.
func TestTrustNeverTwoOwners(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	takes := 0
	for run := 0; run < 400; run++ {
		took, bad := simulateTakeover(rng, false)
		if bad != "" {
			t.Fatalf("run %d (seed %d): %s", run, seed, bad)
		}
		if took {
			takes++
		}
	}
	if takes < 100 {
		t.Fatalf("only %d of 400 runs ended in a takeover: the simulation does not test the rule", takes)
	}
}

// TestTrustDeliveryPastTheMargin: the same simulation with a delivery
// timeout that NewTrust refuses (longer than the margin) lets a copy sent
// under the lease land after the taker took it, so the inequality is what
// keeps the two apart.
func TestTrustDeliveryPastTheMargin(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	overlaps := 0
	for range 100 {
		if _, bad := simulateTakeover(rng, true); bad != "" {
			overlaps++
		}
	}
	if overlaps == 0 {
		t.Fatalf("seed %d: no run of 100 with a delivery timeout past the margin let a copy land after a take", seed)
	}
}

// simulateTakeover runs one owner and one taker for up to three minutes
// of real time in 5 ms steps; took says whether the taker took the lease,
// bad what went wrong. Its delivery timeout is one NewTrust accepts, or
// with pastMargin one it refuses: half a margin past it.
func simulateTakeover(rng *rand.Rand, pastMargin bool) (took bool, bad string) {
	ttl := []time.Duration{3500 * time.Millisecond, 15 * time.Second}[rng.IntN(2)]
	margin := ttl / 3
	renew := time.Duration(float64(ttl-margin) * (0.3 + 0.6*rng.Float64()))
	grace := time.Duration(rng.Int64N(int64(40 * time.Second)))
	// Up to the longest NewTrust accepts, most often near it.
	most := margin - time.Duration(ClockDrift*float64(ttl+grace)) - time.Millisecond
	delivery := most - time.Duration(rng.Int64N(int64(most/4)))
	if rng.IntN(4) == 0 {
		delivery = time.Duration(rng.Int64N(int64(most)))
	}
	tr, err := NewTrust(ttl, margin, renew, grace, delivery)
	if err != nil {
		return false, err.Error()
	}
	if pastMargin {
		tr.DeliveryTimeout = margin * 3 / 2
	}
	delivery = tr.DeliveryTimeout
	// The database's clock is real time; each instance's runs within half
	// ClockDrift of it, so any two are within ClockDrift of each other.
	ownerRate := 1 + ClockDrift/2*(2*rng.Float64()-1)
	takerRate := 1 + ClockDrift/2*(2*rng.Float64()-1)
	const step = 5 * time.Millisecond
	const readInterval = 250 * time.Millisecond

	// Real time is a Duration from the start; each side's clock is real
	// time times its rate, as a time.Time on a common epoch.
	epoch := time.Unix(1_000_000, 0)
	ownerNow := func(real time.Duration) time.Time { return epoch.Add(time.Duration(float64(real) * ownerRate)) }
	takerNow := func(real time.Duration) time.Time { return epoch.Add(time.Duration(float64(real) * takerRate)) }

	// The owner loses the database at dbDown, for dbFor; the destination
	// (its heartbeats) may go too.
	dbDown := time.Duration(rng.Int64N(int64(30 * time.Second)))
	dbFor := time.Duration(rng.Int64N(int64(120 * time.Second)))
	destDown := time.Duration(rng.Int64N(int64(120 * time.Second)))
	destFor := time.Duration(rng.Int64N(int64(60 * time.Second)))
	if rng.IntN(3) == 0 {
		destFor = 0 // the destination stays up, most often the case
	}
	dbUp := func(real time.Duration) bool { return real < dbDown || real >= dbDown+dbFor }
	destUp := func(real time.Duration) bool { return real < destDown || real >= destDown+destFor }

	// The owner.
	var (
		deadline    time.Time     // the owner's trust, on its clock
		renewedAt   time.Time     // its last renewal's attempt, on its clock
		expiry      time.Duration // the session's expiry, on the database's (real) clock
		nextRenew   time.Duration
		nextBeat    time.Duration = time.Duration(rng.Int64N(int64(renew)))
		lastTrusted time.Duration = -1 // the last real moment the owner trusted its lease
	)
	trusts := func(real time.Duration) bool { return ownerNow(real).Before(deadline) }
	extend := func(real time.Duration, to time.Time) {
		if trusts(real) && to.After(deadline) { // a lapsed lease never comes back
			deadline = to
		}
	}
	type beat struct {
		sent            time.Time     // owner's clock
		appended, acked time.Duration // real
	}
	var inFlight, acking []beat
	var lastAppended time.Duration
	var log []time.Duration // append times of the heartbeats on the topic
	var events []string

	// The taker.
	var (
		caughtUp  time.Time // taker's clock
		lastSeen  time.Time // when it first read the owner's newest beat; zero: never
		read      int       // heartbeats read
		nextList  time.Duration
		listing   = -1 * time.Second // the pending listing's real time
		listedEnd int
	)

	for real := time.Duration(0); real < 3*time.Minute; real += step {
		// Owner: renew, beat, take acknowledgements.
		if real >= nextRenew {
			nextRenew = real + time.Duration(float64(renew)/ownerRate)
			if dbUp(real) {
				rtt := time.Duration(rng.Int64N(int64(20 * time.Millisecond)))
				start := ownerNow(real)
				if deadline.IsZero() || trusts(real) {
					expiry = real + rtt/2 + ttl
					events = append(events, fmt.Sprintf("renewed at %v -> expiry %v", real, expiry))
					renewedAt = start
					if deadline.IsZero() {
						deadline = tr.AfterRenewal(start)
					} else {
						extend(real+rtt, tr.AfterRenewal(start))
					}
				}
			}
		}
		if real >= nextBeat && trusts(real) {
			nextBeat = real + time.Duration(float64(renew)/ownerRate)
			if destUp(real) {
				delay := time.Duration(rng.Int64N(int64(50 * time.Millisecond)))
				if rng.IntN(10) == 0 {
					delay = time.Duration(rng.Int64N(int64(8 * time.Second))) // a slow destination
				}
				// One partition: a beat is appended after the one before.
				appended := max(real+delay, lastAppended)
				lastAppended = appended
				inFlight = append(inFlight, beat{sent: ownerNow(real), appended: appended,
					acked: appended + time.Duration(rng.Int64N(int64(20*time.Millisecond)))})
			}
		}
		for len(inFlight) > 0 && inFlight[0].appended <= real {
			log = append(log, real)
			acking = append(acking, inFlight[0])
			inFlight = inFlight[1:]
		}
		for len(acking) > 0 && acking[0].acked <= real {
			b := acking[0]
			acking = acking[1:]
			if ownerNow(real).Sub(b.sent) <= renew { // Beat's context: RenewInterval
				extend(real, tr.AfterHeartbeat(b.sent, renewedAt))
				events = append(events, fmt.Sprintf("beat sent %v appended %v acked %v -> deadline %v", b.sent.Sub(epoch), b.appended, real, deadline.Sub(epoch)))
			}
		}
		if trusts(real) {
			lastTrusted = real
		}

		// Taker: list the topic's end every read interval, read up to it
		// a little later, and try to take every step.
		if real >= nextList && listing < 0 {
			listing, listedEnd = real, len(log)
			nextList = real + time.Duration(float64(readInterval)/takerRate)
		}
		if listing >= 0 && real >= listing+time.Duration(rng.Int64N(int64(100*time.Millisecond))) {
			if read < listedEnd {
				events = append(events, fmt.Sprintf("taker at %v read up to %d (listed at %v)", real, listedEnd, listing))
			}
			for ; read < listedEnd; read++ {
				lastSeen = takerNow(real) // a heartbeat is seen when it is read
			}
			caughtUp, listing = takerNow(real), -1
		}
		if real > expiry && !deadline.IsZero() {
			now := takerNow(real)
			all := caughtUp.IsZero() || now.Sub(caughtUp) > margin
			seen := !lastSeen.IsZero() && now.Sub(lastSeen) < ttl
			spared := real-expiry < grace && (all || seen) // repo.Spared with heartbeat.Spared's answer
			if !spared {
				if lastTrusted >= 0 && lastTrusted+delivery > real {
					if debugTrust {
						fmt.Printf("take at %v: expiry %v, dbDown %v for %v, destDown %v for %v; taker now %v lastSeen %v caughtUp %v; owner deadline %v renewedAt %v (epoch-relative, owner clock)\n",
							real, expiry, dbDown, dbFor, destDown, destFor, now.Sub(epoch), lastSeen.Sub(epoch), caughtUp.Sub(epoch), deadline.Sub(epoch), renewedAt.Sub(epoch))
						for _, e := range events {
							fmt.Println("  ", e)
						}
					}
					return true, "the taker took the lease " + (real - lastTrusted).String() +
						" after the owner last trusted it, within the delivery timeout " + delivery.String() +
						" (ttl " + ttl.String() + ", renew " + renew.String() + ", grace " + grace.String() + ")"
				}
				return true, ""
			}
		}
	}
	return false, ""
}
