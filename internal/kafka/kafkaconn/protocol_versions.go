package kafkaconn

import (
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// ProtocolVersions caps the version of every request kmirror sends at
// Apache Kafka 4.4's; kgo sends each at the lower of this and what the
// broker offers. Without the cap the wire follows kmsg, and an upgrade of
// franz-go would change request versions untested: raising it is a
// change of its own, with docs/conformance.md's table (which
// TestRequestVersions checks against brokers of each version) and the
// broker-version matrix run again.
func ProtocolVersions() *kversion.Versions { return kversion.V4_4_0() }

// Request is one kind of request kmirror sends, and what for.
type Request struct {
	Key kmsg.Key
	For string
}

// Requests are the kinds of request kmirror's clients send, for the
// version table in docs/conformance.md.
var Requests = []Request{
	{kmsg.ApiVersions, "every connection: the versions the broker takes"},
	{kmsg.SASLHandshake, "SASL connections: the mechanism"},
	{kmsg.SASLAuthenticate, "SASL connections: the exchange, and its renewal (KIP-368)"},
	{kmsg.Metadata, "leaders, topic ids, partition counts, the topic list"},
	{kmsg.Fetch, "the copy (read_committed, sessions, leader epochs), alignment's walks, __mirror_state and heartbeat reads"},
	{kmsg.ListOffsets, "start, end and last stable offsets; offsets by time"},
	{kmsg.OffsetForLeaderEpoch, "kgo's consumers, after a leader change (alignment, restore)"},
	{kmsg.Produce, "the copy (whole batches), __mirror_state, heartbeats"},
	{kmsg.InitProducerID, "the idempotent producers' ids and epochs"},
	{kmsg.CreateTopics, "destination topics, __mirror_state, __mirror_heartbeats"},
	{kmsg.DeleteTopics, "restart with recreate"},
	{kmsg.CreatePartitions, "partition growth"},
	{kmsg.DescribeConfigs, "topic config sync, preflight"},
	{kmsg.IncrementalAlterConfigs, "topic config sync"},
	{kmsg.ListGroups, "consumer group offset sync"},
	{kmsg.DescribeGroups, "consumer group offset sync: groups active on the destination are skipped"},
	{kmsg.FindCoordinator, "consumer group offset sync"},
	{kmsg.OffsetFetch, "consumer group offset sync"},
	{kmsg.OffsetCommit, "consumer group offset sync"},
	{kmsg.DescribeACLs, "ACL sync, read-only enforcement"},
	{kmsg.CreateACLs, "ACL sync, read-only enforcement"},
	{kmsg.DeleteACLs, "ACL sync, failover (read-only lifted)"},
	{kmsg.DescribeCluster, "preflight: the cluster and its authorizer"},
}
