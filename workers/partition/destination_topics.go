package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/workers/partition/worker"
)

// What the workers do to destination topics through the engine's admin
// client and producer (worker.Destination): read a partition's offsets and
// records, create a topic that is missing (once for the partitions that ask
// together), recreate one, and add or lift its read-only ACL. The errors
// say what failed; the worker fails its partition with them, retryably.

// destinations is the destination cluster as the workers use it
// (worker.Destination), through the engine's admin client, made as the
// engine starts. A topic it creates anew waits out a recent loss of the
// same name, and has the producer's copies to the old one written off,
// through the destination watch.
type destinations struct {
	admin *kadm.Client
	// adminClient is admin's own kgo client (see ensure).
	adminClient *kgo.Client
	conn        kafkaconn.Config
	shared      *sharedReads
	reads       *recordReads
	authorizer  *authorizerProbe
	watch       *destinationWatch
	log         *slog.Logger
}

// Offsets returns a destination partition's offsets from a listing of its
// whole topic shared with its other partitions.
func (d *destinations) Offsets(ctx context.Context, topic string, partition int32) (kafkaconn.PartitionOffsets, error) {
	return d.shared.partitionOffsets(ctx, d.admin, topic, partition, false)
}

// Records reads up to n records of a destination partition in [from, end),
// with the other partitions' reads of the moment (record_reads.go).
func (d *destinations) Records(ctx context.Context, topic string, partition int32, from, end int64, n int) ([]*kgo.Record, error) {
	return d.reads.read(ctx, "dst", d.conn, false, nil, topic, partition, from, end, n)
}

// EnsureTopic creates destination topic dstTopic as spec says when it is
// missing; the topic's partitions that ask while it runs share the outcome,
// each then knowing whether the topic is new. They are joined by the
// destination name, which one mirror topic writes.
func (d *destinations) EnsureTopic(ctx context.Context, dstTopic string, replicationFactor int16,
	spec func(context.Context) (worker.TopicSpec, error)) (worker.DestinationTopic, error) {
	return d.shared.dstTopics.join(ctx, dstTopic, func(ctx context.Context) (worker.DestinationTopic, error) {
		return d.ensure(ctx, dstTopic, replicationFactor, spec)
	})
}

// ensure is EnsureTopic's work, made once.
func (d *destinations) ensure(ctx context.Context, dstTopic string, replicationFactor int16,
	spec func(context.Context) (worker.TopicSpec, error)) (worker.DestinationTopic, error) {
	dst, err := d.admin.ListTopics(ctx, dstTopic)
	if err != nil {
		return worker.DestinationTopic{}, fmt.Errorf("describe destination topic: %v", err)
	}
	if d, ok := dst[dstTopic]; ok && d.Err == nil {
		return worker.DestinationTopic{Partitions: len(d.Partitions)}, nil
	}
	sp, err := spec(ctx)
	if err != nil {
		return worker.DestinationTopic{}, err
	}
	if err := d.watch.awaitTopicLossGrace(ctx, dstTopic); err != nil {
		return worker.DestinationTopic{}, fmt.Errorf("wait before creating lost destination topic %s again: %v", dstTopic, err)
	}
	resp, err := d.admin.CreateTopic(ctx, int32(sp.Partitions), replicationFactor, sp.Configs, dstTopic)
	if err == nil {
		err = resp.Err
	}
	// The admin client may hold metadata, younger than its 10 ms minimum
	// age, that says the topic is missing: an offsets read of a partition
	// that finds the topic created would then fail and wait.
	d.adminClient.PurgeTopicsFromClient(dstTopic)
	if errors.Is(err, kerr.TopicAlreadyExists) {
		// Someone was first: another instance, or this engine if our look
		// was answered from metadata older than its create. Whoever it was
		// purged the producer's view of the topic then; purging again could
		// fail records that workers have started to copy.
		return worker.DestinationTopic{Partitions: -1}, nil
	}
	if err != nil {
		return worker.DestinationTopic{}, fmt.Errorf("create destination topic %s: %v", dstTopic, err)
	}
	// A topic created anew (it may have been deleted under us) has a new id:
	// the producer must not keep the old one.
	d.watch.WriteOff(dstTopic, "the destination topic was created anew")
	d.log.Info("destination topic created", "destination_topic", dstTopic,
		"partitions", sp.Partitions, "replication_factor", replicationFactor)
	return worker.DestinationTopic{Created: true, Partitions: sp.Partitions}, nil
}

// RecreateTopic drops destination topic topic and creates it again with
// partitions and replicationFactor: a restart that asked for recreate,
// served by the worker of partition 0.
func (d *destinations) RecreateTopic(ctx context.Context, topic string, partitions int32, replicationFactor int16) error {
	// A topic that is already gone (deleted by hand, a destination rebuilt
	// empty, or never created) counts as deleted. kadm returns the topic's
	// own error as err too.
	if _, err := d.admin.DeleteTopic(ctx, topic); err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("delete destination topic %s: %v", topic, err)
	}
	// Deletion completes asynchronously on a real cluster.
	for {
		resp, err := d.admin.CreateTopic(ctx, partitions, replicationFactor, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("recreate destination topic %s: %v", topic, err)
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	// The producer must forget the old topic's id and sequence numbers.
	d.watch.WriteOff(topic, "the destination topic was recreated")
	return nil
}

// readOnlyACL is the DENY WRITE for User:* that keeps a mirrored topic
// read-only on the destination; kmirror's own principal must be a super user.
func readOnlyACL(topic string) *kadm.ACLBuilder {
	return kadm.NewACLs().Topics(topic).ResourcePatternType(kadm.ACLPatternLiteral).
		Deny("User:*").DenyHosts("*").Operations(kadm.OpWrite)
}

// ReadOnlyACL adds (on) or deletes destination topic topic's read-only ACL.
func (d *destinations) ReadOnlyACL(ctx context.Context, topic string, on bool) error {
	if on {
		return d.addReadOnlyACL(ctx, topic)
	}
	res, err := d.admin.DeleteACLs(ctx, readOnlyACL(topic))
	for _, r := range res {
		err = errors.Join(err, r.Err)
	}
	return err
}

// EnforcesACLs says whether the destination has an authorizer that would
// enforce the read-only ACL.
func (d *destinations) EnforcesACLs(ctx context.Context) bool { return d.authorizer.enforces(ctx) }

// addReadOnlyACL creates destination topic dstTopic's read-only ACL (an
// existing one is left as it is), and the one that keeps kmirror's own
// topics to kmirror (kafkaconn.InternalTopicsACL): both need kmirror's
// principal to be a super user, so one is made only where the other is.
func (d *destinations) addReadOnlyACL(ctx context.Context, dstTopic string) error {
	_, err := d.shared.readOnly.do(ctx, dstTopic, func(ctx context.Context) (struct{}, error) {
		var err error
		for _, acl := range []*kadm.ACLBuilder{readOnlyACL(dstTopic), kafkaconn.InternalTopicsACL()} {
			res, cerr := d.admin.CreateACLs(ctx, acl)
			err = errors.Join(err, cerr)
			for _, r := range res {
				err = errors.Join(err, r.Err)
			}
		}
		return struct{}{}, err
	})
	return err
}
