// Package lease owns an instance's liveness and its leases: the heartbeat
// row in instances, and the Manager that renews, acquires and hands back
// partition leases and mirror metadata leases in Postgres, keeping a fair
// share per live instance. A Lease is trusted by the local monotonic clock
// only (attempt start + TTL − margin), so its holder always stops before
// another instance can take it.
//
// The Manager runs the workers of its leases through the PartitionRunner and
// MirrorRunner interfaces declared here; it knows nothing of what they do.
//
// Imports: repo, and internal infrastructure. No other workers package.
package lease
