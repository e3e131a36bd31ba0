package partition

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/repo"
	"kmirror/workers/partition/worker"
)

// sharedReads are the reads every partition makes as it prepares that
// depend only on its mirror or topic: the mirror's row, the topic's
// offsets on either cluster (listed for the whole topic anyway), its
// metadata, what the workers recorded on its row, and its read-only ACL.
// What is asked of a cluster is keyed by the topic's name there: the
// destination topic (dstTopics, readOnly, the destination's offsets) by
// its destination name, which one mirror topic writes; two mirrors'
// topics of one source name are two destination topics.
// Partitions that ask at the same time share one (coalescer): when a
// mirror of 10,000 partitions is added, the sixteen partitions preparing
// at once are mostly of one topic, and each read made once per partition
// would cost the data pool, kmirror and the brokers sixteen times over.
type sharedReads struct {
	mirrors     *coalescer[string, repo.Mirror]
	offsets     *coalescer[offsetsKey, kafkaconn.TopicOffsets]
	srcTopicIDs *coalescer[clientTopic, worker.SourceTopic]
	dstTopics   *coalescer[string, worker.DestinationTopic]
	topicStates *coalescer[[2]string, repo.TopicWorkerState]
	readOnly    *coalescer[string, struct{}]
	// topicWrites are the workers' writes of a topic's row (writeTopicRow):
	// actions, shared with join.
	topicWrites *coalescer[topicWriteKey, topicWritten]
}

// Each shared read has its own deadline, since it runs apart from the
// callers it serves (who still wait only as long as their own contexts).
const (
	sharedDBTimeout    = 5 * time.Second
	sharedKafkaTimeout = 15 * time.Second
)

func newSharedReads() sharedReads {
	return sharedReads{
		mirrors:     newCoalescer[string, repo.Mirror](sharedDBTimeout),
		offsets:     newCoalescer[offsetsKey, kafkaconn.TopicOffsets](sharedKafkaTimeout),
		srcTopicIDs: newCoalescer[clientTopic, worker.SourceTopic](sharedKafkaTimeout),
		dstTopics:   newCoalescer[string, worker.DestinationTopic](sharedKafkaTimeout),
		topicStates: newCoalescer[[2]string, repo.TopicWorkerState](sharedDBTimeout),
		readOnly:    newCoalescer[string, struct{}](sharedKafkaTimeout),
		topicWrites: newCoalescer[topicWriteKey, topicWritten](sharedDBTimeout),
	}
}

// offsetsKey names one listing: the admin client (the destination's, or a
// mirror's source connection, which changes with the mirror), the topic,
// and whether ends are committed (read_committed) ones.
type offsetsKey struct {
	admin     *kadm.Client
	topic     string
	committed bool
}

type clientTopic struct {
	client *kgo.Client
	topic  string
}

// partitionOffsets returns a partition's start and end offsets, from a
// listing of its whole topic shared with the topic's other partitions.
func (s *sharedReads) partitionOffsets(ctx context.Context, adm *kadm.Client, topic string, partition int32, committed bool) (kafkaconn.PartitionOffsets, error) {
	offs, err := s.offsets.do(ctx, offsetsKey{adm, topic, committed}, func(ctx context.Context) (kafkaconn.TopicOffsets, error) {
		return kafkaconn.ReadTopicOffsets(ctx, adm, topic, committed)
	})
	if err != nil {
		return kafkaconn.PartitionOffsets{}, err
	}
	return offs.Partition(partition)
}

// sourceTopicID asks the source for a topic's id with a raw metadata
// request: kadm's ListTopics may answer from kgo's metadata cache, which
// keeps a recreated topic's old id for a while.
func (s *sharedReads) sourceTopicID(ctx context.Context, cl *kgo.Client, topic string) (worker.SourceTopic, error) {
	return s.srcTopicIDs.do(ctx, clientTopic{cl, topic}, func(ctx context.Context) (worker.SourceTopic, error) {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return worker.SourceTopic{}, err
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			return worker.SourceTopic{}, nil
		}
		return worker.SourceTopic{Exists: true, ID: resp.Topics[0].TopicID, Partitions: len(resp.Topics[0].Partitions)}, nil
	})
}
