// Package metrics is the data plane's Prometheus metrics: verified copies
// per mirror and topic (kmirror_mirrored_*), the destination losses found,
// checkpoint saves, and the fetch and produce requests timed through kgo's
// hooks. The engine (workers/partition) makes one Metrics per instance and
// drops a deleted mirror's series; a mirroring session
// (workers/partition/worker) counts into its topic's series.
//
// Imports: prometheus and franz-go only; no other kmirror package.
package metrics
