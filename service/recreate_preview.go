package service

import (
	"context"
	"errors"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/repo"
)

// foreignRecords says, for an add's dry run with recreate, how many records
// each matched topic's destination holds that this mirror did not write:
// recreating the topic deletes them. A partition this mirror wrote holds
// its own records below its checkpoint's destination offset; every other
// record is counted. A missing destination topic holds none.
func (s *Control) foreignRecords(ctx context.Context, mirror string, names []string, dests map[string]string) (map[string]int64, error) {
	if len(s.destination.BootstrapServers) == 0 {
		return nil, nil // started without a destination: nothing to read
	}
	ctx, cancel := context.WithTimeout(ctx, continuationPreviewTimeout)
	defer cancel()
	rows, err := repo.PartitionsList(ctx, s.pool, repo.PartitionsListParams{Mirror: mirror, Topics: names})
	if err != nil {
		return nil, err
	}
	written := map[repo.PartitionID]int64{}
	for _, r := range rows {
		if r.DstNext != nil {
			written[repo.PartitionID{Mirror: r.Mirror, Topic: r.Topic, Partition: r.Partition}] = *r.DstNext
		}
	}
	adm, err := s.destination.NewAdmin()
	if err != nil {
		return nil, destinationUnavailable(err)
	}
	defer adm.Close()
	out := make(map[string]int64, len(names))
	for _, name := range names {
		offs, err := kafkaconn.ReadTopicOffsets(ctx, adm, dests[name], false)
		if err != nil {
			return nil, destinationUnavailable(err)
		}
		for p := int32(0); ; p++ {
			o, err := offs.Partition(p)
			if errors.Is(err, kafkaconn.ErrTopicMissing) {
				break
			} else if err != nil {
				return nil, destinationUnavailable(err)
			}
			from := max(o.Start, written[repo.PartitionID{Mirror: mirror, Topic: name, Partition: p}])
			out[name] += max(0, o.End-from)
		}
	}
	return out, nil
}
