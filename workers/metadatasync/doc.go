// Package metadatasync keeps each leased mirror's metadata in step with its
// source (docs/design.md, "Metadata sync"): a Syncer runs a pass when a mirror's
// metadata lease is taken, every mirror.metadata.refresh.interval.ms and on
// "sync now". Each kind of metadata has its own file and one row in the
// kinds table (kinds.go); one failing kind does not stop the others.
//
// Imports: lease (Lease; the Syncer is a lease.MirrorRunner), service, repo,
// internal infrastructure. It reaches the partition engine's producer only
// through PartitionAwaiter, declared here.
package metadatasync
