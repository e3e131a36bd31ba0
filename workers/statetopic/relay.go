package statetopic

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafkaconn"
	"kmirror/internal/notifier"
	"kmirror/internal/startstop"
	"kmirror/repo"
	"kmirror/service"
)

// outboxRelayLock is the advisory lock key that makes one instance at a time
// the relay: two relays could publish an older value of a key after a newer one.
const outboxRelayLock = 0x6b6d6972726f72 // "kmirror"

// RelayConfig wires an Relay.
type RelayConfig struct {
	Pool        *pgxpool.Pool
	Destination kafkaconn.Config
	// Partitions of __mirror_state when it is created (mirror.topic.num.partitions); default 50.
	Partitions int32
	// ReplicationFactor of __mirror_state when it is created; -1 is the broker default.
	ReplicationFactor int16
	// Interval between polls when idle and no notification came (the
	// fallback); default 5s.
	Interval time.Duration
	// Notifier, when set, wakes the relay as soon as outbox rows are
	// inserted.
	Notifier *notifier.Notifier
	// CheckpointInterval is the least time between two checkpoint records of
	// one partition; default 5s.
	CheckpointInterval time.Duration
	Logger             *slog.Logger
}

// Relay publishes outbox rows to __mirror_state in commit order with an
// idempotent producer and marks them published after the acknowledgement. A
// crash between the two publishes a row twice, which is harmless: readers
// keep the last value per key. It never loses one.
type Relay struct {
	startstop.Base
	cfg RelayConfig
	// statePartitions is __mirror_state's actual partition count.
	statePartitions int32
	// maps is what this relay last published of each partition's offset
	// map; it is rebuilt (everything published once) when a relay leads.
	maps map[repo.PartitionID]*publishedMap
	// batchBytes is publishBatchBytes; tests make it small.
	batchBytes int
	log        *slog.Logger
}

// NewRelay returns a relay; Start runs it.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	if cfg.Pool == nil || len(cfg.Destination.BootstrapServers) == 0 {
		return nil, errors.New("outbox relay: Pool and Destination are required")
	}
	cfg.Partitions = cmp.Or(cfg.Partitions, 50)
	cfg.ReplicationFactor = cmp.Or(cfg.ReplicationFactor, -1)
	cfg.Interval = cmp.Or(cfg.Interval, 5*time.Second)
	cfg.CheckpointInterval = cmp.Or(cfg.CheckpointInterval, 5*time.Second)
	return &Relay{cfg: cfg, batchBytes: publishBatchBytes,
		log: cmp.Or(cfg.Logger, slog.Default()).With("component", "outbox-relay")}, nil
}

// Start runs the relay loop in the background.
func (r *Relay) Start(ctx context.Context) error {
	if _, ok := r.StartInit(ctx); !ok {
		return startstop.ErrStarted
	}
	sub := r.cfg.Notifier.Subscribe(repo.ChannelOutbox)
	r.Go(func(ctx context.Context) {
		defer sub.Unsubscribe()
		r.run(ctx, sub)
	})
	return nil
}

// Stop ends the loop, after publishing what is left, and waits for it.
func (r *Relay) Stop() {
	if r.StopInit() {
		r.Halt()
	}
}

// run waits for the relay lock, then publishes until ctx ends or the lock's
// connection breaks; then it tries again.
func (r *Relay) run(ctx context.Context, inserted *notifier.Subscription) {
	for ctx.Err() == nil {
		if err := r.lead(ctx, inserted); err != nil && ctx.Err() == nil {
			r.log.Warn("outbox relay stopped; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (r *Relay) lead(ctx context.Context, inserted *notifier.Subscription) error {
	conn, err := r.cfg.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	got, err := repo.AdvisoryTryLock(ctx, conn, outboxRelayLock)
	if err != nil {
		return err
	}
	if !got {
		return nil // another instance relays
	}
	defer func() {
		_ = repo.AdvisoryUnlock(context.WithoutCancel(ctx), conn, outboxRelayLock)
	}()
	producer, err := r.cfg.Destination.NewClient(kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		return err
	}
	defer producer.Close()
	if err := r.ensureTopic(ctx, kadm.NewClient(producer)); err != nil {
		return err
	}
	r.log.Info("relaying the outbox", "topic", service.StateTopic, "partitions", r.statePartitions)
	var since time.Time // database time of the last checkpoint pass
	r.maps = map[repo.PartitionID]*publishedMap{}
	lastPass := time.Time{}
	for {
		n, err := r.publishOutbox(ctx, producer)
		if err == nil && time.Since(lastPass) >= r.cfg.CheckpointInterval {
			if since, err = r.publishCheckpoints(ctx, producer, since); err == nil {
				lastPass = time.Now()
			}
		}
		if err != nil && ctx.Err() != nil {
			return r.publishFinal(ctx, producer, since) // stopped in the middle of a pass
		} else if err != nil {
			return err
		}
		if n > 0 {
			continue
		}
		// The lock lives on conn: check it is still there.
		if err := conn.Ping(ctx); err != nil {
			if ctx.Err() != nil {
				return r.publishFinal(ctx, producer, since)
			}
			return fmt.Errorf("relay lock connection: %w", err)
		}
		select {
		case <-ctx.Done():
			return r.publishFinal(ctx, producer, since)
		case <-inserted.C():
		case <-time.After(r.cfg.Interval):
		}
	}
}

// publishFinal publishes, when the relay stops, what the shutdown itself
// wrote (the last state changes), then the last checkpoints and offset
// maps, so a clean shutdown leaves __mirror_state exact.
func (r *Relay) publishFinal(ctx context.Context, producer *kgo.Client, since time.Time) error {
	final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for {
		n, err := r.publishOutbox(final, producer)
		if err != nil {
			return err
		}
		if n == 0 {
			_, err = r.publishCheckpoints(final, producer, since)
			return err
		}
	}
}

func (r *Relay) ensureTopic(ctx context.Context, adm *kadm.Client) error {
	resp, err := adm.CreateTopic(ctx, r.cfg.Partitions, r.cfg.ReplicationFactor,
		map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, service.StateTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create %s: %w", service.StateTopic, err)
	}
	// An existing topic keeps its partition count: records must go where
	// earlier ones of the same mirror went.
	topics, err := adm.ListTopics(ctx, service.StateTopic)
	if err != nil {
		return fmt.Errorf("describe %s: %w", service.StateTopic, err)
	}
	d, ok := topics[service.StateTopic]
	if !ok || d.Err != nil || len(d.Partitions) == 0 {
		return fmt.Errorf("describe %s: topic not found", service.StateTopic)
	}
	r.statePartitions = int32(len(d.Partitions))
	return nil
}

// StatePartition is the __mirror_state partition of a mirror's records:
// FNV-1a of the mirror name modulo the partition count, so all of a
// mirror's records stay in order in one partition.
func StatePartition(mirror string, partitions int32) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(mirror))
	return int32(h.Sum32() % uint32(partitions))
}

const relayBatch = 500

// checkpointGroup is how many partitions' offset maps a checkpoint pass
// reads in one statement.
const checkpointGroup = 500

// publishOutbox publishes the oldest unpublished rows and marks them.
func (r *Relay) publishOutbox(ctx context.Context, producer *kgo.Client) (int, error) {
	rows, err := repo.OutboxList(ctx, r.cfg.Pool, repo.OutboxListParams{UnpublishedOnly: true, Limit: relayBatch})
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	// A partition record carries a checkpoint: the offset map up to it
	// goes first, as in a checkpoint pass, so that no reader finds a
	// checkpoint without its map. The rows' partitions and their maps are
	// read in two statements for the whole batch.
	// partOf[i] names row i's partition; ok is false for other keys.
	type partRef struct {
		id repo.PartitionID
		ok bool
	}
	partOf := make([]partRef, len(rows))
	var named []repo.PartitionID
	seen := map[repo.PartitionID]bool{}
	for i, row := range rows {
		id, ok := service.PartitionOfKey(row.Key)
		partOf[i] = partRef{id, ok}
		if ok && row.Value != nil && !seen[id] {
			seen[id] = true
			named = append(named, id)
		}
	}
	updates := map[repo.PartitionID]mapUpdate{}
	if len(named) > 0 {
		parts, err := repo.PartitionsGetMany(ctx, r.cfg.Pool, named)
		if err != nil {
			return 0, err
		}
		us, err := r.offsetMapUpdates(ctx, parts)
		if err != nil {
			return 0, err
		}
		for _, u := range us {
			updates[u.id] = u
		}
	}
	ids := make([]int64, len(rows))
	b := publishBatch{relay: r, producer: producer, what: "the outbox"}
	for i, row := range rows {
		var u mapUpdate
		if p := partOf[i]; p.ok && row.Value != nil {
			u = updates[p.id]
			delete(updates, p.id) // once, before the partition's first record
		}
		rec := &kgo.Record{Topic: service.StateTopic, Partition: StatePartition(row.Mirror, r.statePartitions),
			Key: []byte(row.Key), Value: row.Value}
		if err := b.add(ctx, u, rec); err != nil {
			return 0, err
		}
		ids[i] = row.ID
	}
	if err := b.flush(ctx); err != nil {
		return 0, err
	}
	if err := repo.OutboxMarkPublished(ctx, r.cfg.Pool, ids); err != nil {
		return 0, fmt.Errorf("mark outbox rows published: %w", err)
	}
	for i, row := range rows {
		if p := partOf[i]; p.ok && row.Value == nil {
			delete(r.maps, p.id) // a deleted partition's map was tombstoned with it
		}
	}
	return len(rows), nil
}

// checkpointOverlap re-reads rows changed shortly before the last pass: a
// transaction's updated_at is its start time, so it may commit after the
// pass that should have seen it. Publishing a record twice is harmless.
const checkpointOverlap = 10 * time.Second

// publishCheckpoints publishes the records of partitions whose row changed
// since the last pass (at most one per partition per CheckpointInterval),
// so __mirror_state carries recent checkpoints. It returns the database
// time to pass next.
func (r *Relay) publishCheckpoints(ctx context.Context, producer *kgo.Client, since time.Time) (time.Time, error) {
	now, err := repo.Now(ctx, r.cfg.Pool)
	if err != nil {
		return since, err
	}
	parts, err := repo.PartitionsChangedSince(ctx, r.cfg.Pool, since.Add(-checkpointOverlap))
	if err != nil {
		return since, err
	}
	b := publishBatch{relay: r, producer: producer, what: "checkpoints"}
	for len(parts) > 0 {
		// The maps of a group of partitions are read in one statement;
		// groups bound what one read holds.
		group := parts[:min(len(parts), checkpointGroup)]
		parts = parts[len(group):]
		updates, err := r.offsetMapUpdates(ctx, group)
		if err != nil {
			return since, err
		}
		for i, p := range group {
			// A partition's offset-map chunks go before its record, in
			// the same __mirror_state partition: whoever reads the record
			// back finds the map at least as far.
			val, err := json.Marshal(service.PartitionRecordOf(p))
			if err != nil {
				return since, err
			}
			rec := &kgo.Record{Topic: service.StateTopic, Partition: StatePartition(p.Mirror, r.statePartitions),
				Key: []byte(service.PartitionKey(p.Mirror, p.Topic, p.Partition)), Value: val}
			if err := b.add(ctx, updates[i], rec); err != nil {
				return since, err
			}
		}
	}
	if err := b.flush(ctx); err != nil {
		return since, err
	}
	return now, nil
}
