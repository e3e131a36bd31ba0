// Package heartbeat keeps the clock that carries an instance's leases
// through a database outage, on the destination cluster (lease.Trust says
// how the two clocks combine): every instance writes a heartbeat (its session
// epoch and a growing beat number, signed with a key only the database
// holds: keys.go) to the compacted topic __mirror_heartbeats, and reads
// everyone's.
//
// The lease manager uses both sides to ride through a PostgreSQL outage.
// An instance that cannot renew its session in the database goes on
// trusting its leases for as long as its heartbeats are
// acknowledged (within a grace after its last renewal), and copying goes
// on. An instance that can renew does not take the leases of a session
// whose heartbeats it saw within a TTL, nor of any session that expired
// less than the grace ago while it cannot read the heartbeats. Both sides
// measure only durations on their own clocks (no clocks are compared), and
// a heartbeat is seen by others no earlier than it was sent, so a taker
// always comes after the owner stopped trusting (docs/architecture.md,
// "Riding through a database outage").
//
// Imports: repo (Spared) and internal infrastructure; no other worker
// package. The lease manager reaches it through lease.Heartbeater.
package heartbeat
