package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/repo"
)

// TopicContinuation is what an add with continue would do with one topic's
// destination, per partition.
type TopicContinuation struct {
	Topic string `json:"topic"`
	// DestinationTopic is the topic it is written to on the destination,
	// whose history is continued.
	DestinationTopic string `json:"destination_topic"`
	// DestinationMissing: the destination has no such topic; it would be
	// created and copied from the source's start.
	DestinationMissing bool                    `json:"destination_missing"`
	Partitions         []PartitionContinuation `json:"partitions"`
}

// continuationPreviewTimeout bounds an add's dry run with continue: each
// partition may read a few hundred records from both clusters.
const continuationPreviewTimeout = 60 * time.Second

// previewContinuation works out, for an add's dry run with continue, what
// each partition of the topics would do when it starts: the proof the
// partition workers would run, with nothing written. A cluster that does
// not answer is an *UnavailableError.
func (s *Control) previewContinuation(ctx context.Context, mirror string, conn kafkaconn.Config, names []string,
	keepDivergent bool) ([]TopicContinuation, error) {
	if s.sourceState == nil || len(s.destination.BootstrapServers) == 0 {
		return nil, &UnavailableError{Dependency: "destination cluster",
			Detail: "this server was started without a destination cluster, so it cannot preview a continuation"}
	}
	ctx, cancel := context.WithTimeout(ctx, continuationPreviewTimeout)
	defer cancel()
	latest, err := s.sourceState(ctx, conn)
	if err != nil && !errors.Is(err, ErrStateTopicMissing) {
		return nil, sourceUnavailable(conn, fmt.Errorf("read %s: %w", StateTopic, err))
	}
	// A snapshot that cannot be decoded matters only to a partition whose
	// destination holds records: the conflict is the reason its worker
	// would show, retrying.
	snap, snapErr := DecodeState(latest)
	needsSnap := func(p int32) error {
		if snapErr == nil {
			return nil
		}
		return &ConflictError{Detail: fmt.Sprintf("continue: the source's %s cannot be read (%v), and partition %d "+
			"of the destination holds records to prove: it would wait with this error until the state can be read",
			StateTopic, snapErr, p)}
	}
	rows, err := repo.PartitionsList(ctx, s.pool, repo.PartitionsListParams{Mirror: mirror, Topics: names})
	if err != nil {
		return nil, err
	}
	own := map[repo.PartitionID]repo.Partition{}
	for _, r := range rows {
		own[repo.PartitionID{Mirror: r.Mirror, Topic: r.Topic, Partition: r.Partition}] = r
	}
	dests, err := continuationDestNames(ctx, s.pool, mirror, names)
	if err != nil {
		return nil, err
	}
	srcAdm, err := conn.NewAdmin()
	if err != nil {
		return nil, sourceUnavailable(conn, err)
	}
	defer srcAdm.Close()
	dstAdm, err := s.destination.NewAdmin()
	if err != nil {
		return nil, destinationUnavailable(err)
	}
	defer dstAdm.Close()

	out := make([]TopicContinuation, len(names))
	type job struct {
		topic, partition int // indexes into out
		in               ContinuationInput
	}
	var jobs []job
	for i, name := range names {
		dest := dests[name]
		out[i] = TopicContinuation{Topic: name, DestinationTopic: dest, Partitions: []PartitionContinuation{}}
		srcOffs, err := kafkaconn.ReadTopicOffsets(ctx, srcAdm, name, true)
		if err != nil {
			return nil, sourceUnavailable(conn, err)
		}
		dstOffs, err := kafkaconn.ReadTopicOffsets(ctx, dstAdm, dest, false)
		if err != nil {
			return nil, destinationUnavailable(err)
		}
		for p := int32(0); ; p++ {
			srcOff, err := srcOffs.Partition(p)
			if errors.Is(err, kafkaconn.ErrTopicMissing) {
				break
			} else if err != nil {
				return nil, sourceUnavailable(conn, err)
			}
			dstOff, err := dstOffs.Partition(p)
			if errors.Is(err, kafkaconn.ErrTopicMissing) {
				out[i].DestinationMissing = out[i].DestinationMissing || p == 0
				dstOff = kafkaconn.PartitionOffsets{} // created empty
			} else if err != nil {
				return nil, destinationUnavailable(err)
			}
			if dstOff.End > dstOff.Start {
				if err := needsSnap(p); err != nil {
					return nil, err
				}
			}
			if r, ok := own[repo.PartitionID{Mirror: mirror, Topic: name, Partition: p}]; ok && r.DstNext != nil && r.SrcNext != nil &&
				!MovedByAFailback(snap, name, dest, p, dstOff.End, *r.DstNext) {
				out[i].Partitions = append(out[i].Partitions, resumeContinuation(r, srcOff, dstOff))
				continue
			}
			out[i].Partitions = append(out[i].Partitions, PartitionContinuation{Partition: p})
			jobs = append(jobs, job{topic: i, partition: int(p), in: ContinuationInput{Topic: name, DestTopic: dest, Partition: p, Source: conn,
				SourceAdmin: srcAdm, Destination: s.destination, SourceState: snap, SourceOffsets: srcOff,
				DestinationOffsets: dstOff, KeepDivergent: keepDivergent}})
		}
	}
	var g errgroup.Group
	g.SetLimit(tailReadParallelism)
	for _, j := range jobs {
		g.Go(func() error {
			pc, err := ProveContinuation(ctx, j.in)
			if err != nil {
				return fmt.Errorf("%s/%d: %w", j.in.Topic, j.in.Partition, err)
			}
			out[j.topic].Partitions[j.partition] = pc // each job its own element
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, &UnavailableError{Dependency: "kafka", Detail: fmt.Sprintf("proving a continuation: %v", err)}
	}
	return out, nil
}

// MovedByAFailback says whether a restarted partition's destination, which
// this mirror wrote up to dstNext and which now ends at end, was written past
// it by a mirror in the other direction: the only case a restart with
// continue proves again. srcTopic and dstTopic are the topic's names on
// this mirror's source and destination.
func MovedByAFailback(snap StateSnapshot, srcTopic, dstTopic string, partition int32, end, dstNext int64) bool {
	if end == dstNext {
		return false
	}
	found := StoppedMirrorsOf(snap, srcTopic, dstTopic, partition)
	return len(found) == 1 && *found[0].LastMirroredSrc >= dstNext
}

// resumeContinuation is a restarted partition that resumes from its own
// checkpoint, aligning against the destination as any restart does.
func resumeContinuation(r repo.Partition, srcOff, dstOff kafkaconn.PartitionOffsets) PartitionContinuation {
	pc := PartitionContinuation{Partition: r.Partition, Outcome: ContinueResume,
		DestinationStartOffset: dstOff.Start, DestinationEndOffset: dstOff.End, SourceEndOffset: srcOff.End,
		OverlapSourceOffset: r.LastMirroredSrc, OverlapDestinationOffset: r.LastMirroredDst,
		RecordsToCopy: max(srcOff.End-*r.SrcNext, 0), DivergentTail: r.DivergentTail}
	pc.Detail = fmt.Sprintf("this mirror wrote the destination up to offset %d: it resumes from its checkpoint at source offset %d",
		*r.DstNext, *r.SrcNext)
	if dstOff.End != *r.DstNext {
		pc.Detail += fmt.Sprintf(" after aligning with the destination, which now ends at %d (records compared when it starts)", dstOff.End)
	}
	return pc
}

// destinationUnavailable turns a failed destination request into an
// *UnavailableError.
func destinationUnavailable(err error) error {
	return &UnavailableError{Dependency: "destination cluster", Detail: fmt.Sprintf("destination cluster: %v", err)}
}

// continuationDestNames maps the topics of an add's dry run to their
// destination names, as the add names them: the name a topic's row has,
// else the mirror's topic.name.prefix and the source name.
func continuationDestNames(ctx context.Context, q repo.DBTX, mirror string, names []string) (map[string]string, error) {
	m, err := repo.MirrorsGet(ctx, q, mirror)
	if errors.Is(err, repo.ErrNotFound) {
		return nil, mirrorNotFound(mirror)
	} else if err != nil {
		return nil, err
	}
	rows, err := repo.TopicsDestNames(ctx, q, mirror)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(names))
	for _, name := range names {
		if d, ok := rows[name]; ok {
			out[name] = d
		} else {
			out[name] = DestinationTopic(m.Config, name)
		}
	}
	return out, nil
}
