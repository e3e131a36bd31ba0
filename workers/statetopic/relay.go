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
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/runtime/notifier"
	"kmirror/internal/runtime/startstop"
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
	// Registerer receives kmirror_state_topic_recreated_total; nil leaves
	// it unregistered.
	Registerer prometheus.Registerer
	// StopBudget, when set, bounds the final publish and the lock's
	// release by what is left of the instance's shutdown budget.
	StopBudget *startstop.Budget
}

// Bounds of the relay's waits on the destination, each named in the error
// it ends with. kgo retries a produce whose outcome it cannot know (a broker
// that died mid-request, a topic that vanished) for as long as it is asked
// to wait, so the relay stops waiting, abandons its producer (closing it
// fails what it holds) and leads again: rows not yet marked published go
// out again, and publishing a record twice is harmless.
const (
	// publishTimeout bounds the wait for the acknowledgement of one batch.
	publishTimeout = 15 * time.Second
	// adminTimeout bounds each admin request (describe, create).
	adminTimeout = 10 * time.Second
	// finalTimeout bounds what a stopping relay publishes.
	finalTimeout = 5 * time.Second
	// unlockTimeout bounds the release of the relay lock.
	unlockTimeout = 5 * time.Second
	// stopStepTimeout bounds the final publish and the unlock within an
	// instance's shutdown budget: what it does not publish, the next
	// relay does.
	stopStepTimeout = time.Second
)

// A leading relay checks every topicCheckInterval that __mirror_state
// still exists, and gives up leading once topicMissingChecks checks in a
// row found it missing (one could be a broker's metadata that has not
// caught up with a creation). An idle relay produces nothing that would
// fail, and a busy one waits on records kgo retries without end, so
// neither would otherwise notice a destination that came back empty.
const (
	topicCheckInterval = 2 * time.Second
	topicMissingChecks = 2
)

var errStateTopicMissing = fmt.Errorf("%s is missing on the destination", service.StateTopic)

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
	// pendingSnapshot is the state snapshot this relay queued for a
	// missing __mirror_state and has not yet seen published: a create that
	// keeps failing must not queue the whole state at every retry.
	pendingSnapshot *service.StateSnapshotQueued
	// pendingLost: the topic had been published to before it went missing.
	pendingLost bool
	recreated   prometheus.Counter
	log         *slog.Logger
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
	recreated := prometheus.NewCounter(prometheus.CounterOpts{Name: "kmirror_state_topic_recreated_total",
		Help: "Times the outbox relay found " + service.StateTopic + " missing on the destination while the database held mirrors, " +
			"and queued the whole state to republish into the topic it creates again."})
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(recreated); err != nil {
			return nil, fmt.Errorf("outbox relay: register metrics: %w", err)
		}
	}
	return &Relay{cfg: cfg, batchBytes: publishBatchBytes, recreated: recreated,
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
	r.StopAndHalt()
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
		d := r.cfg.StopBudget.Bound(unlockTimeout, stopStepTimeout)
		unlock, cancel := context.WithTimeoutCause(context.WithoutCancel(ctx), d,
			fmt.Errorf("release the relay lock: timed out after %s", d))
		defer cancel()
		_ = repo.AdvisoryUnlock(unlock, conn, outboxRelayLock)
	}()
	producer, err := r.cfg.Destination.NewClient(kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		return err
	}
	defer producer.Close()
	if err := r.ensureTopic(ctx, producer); err != nil {
		return err
	}
	r.log.Info("relaying the outbox", "topic", service.StateTopic, "partitions", r.statePartitions)
	// work ends when the relay stops or when watchTopic finds the topic
	// gone; ending it also ends a publish waiting on the producer.
	work, stopWork := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		r.watchTopic(work, producer, stopWork)
	}()
	defer func() {
		stopWork(nil)
		<-watched
	}()
	// A relay that starts leading publishes every partition's record with
	// its whole offset map (since is zero and maps empty), which is also
	// what a recreated __mirror_state needs of them.
	var since time.Time // database time of the last checkpoint pass
	r.maps = map[repo.PartitionID]*publishedMap{}
	lastPass := time.Time{}
	for {
		n, err := r.publishOutbox(work, producer)
		if err == nil && time.Since(lastPass) >= r.cfg.CheckpointInterval {
			if since, err = r.publishCheckpoints(work, producer, since); err == nil {
				lastPass = time.Now()
			}
		}
		if err == nil && n == 0 {
			r.snapshotPublished()
			// The lock lives on conn: check it is still there.
			if err = conn.Ping(work); err != nil && work.Err() == nil {
				return fmt.Errorf("relay lock connection: %w", err)
			}
		}
		switch {
		case ctx.Err() != nil:
			return r.publishFinal(ctx, producer, since) // stopped, maybe in the middle of a pass
		case work.Err() != nil:
			return context.Cause(work)
		case err != nil:
			return err
		case n > 0:
			continue
		}
		select {
		case <-work.Done():
		case <-inserted.C():
		case <-time.After(r.cfg.Interval):
		}
	}
}

// watchTopic ends work with errStateTopicMissing once __mirror_state has
// been missing for topicMissingChecks checks in a row. A destination that
// does not answer is not a missing topic: the publish timeout covers it.
func (r *Relay) watchTopic(work context.Context, producer *kgo.Client, stop context.CancelCauseFunc) {
	t := time.NewTicker(topicCheckInterval)
	defer t.Stop()
	missing := 0
	for {
		select {
		case <-work.Done():
			return
		case <-t.C:
		}
		n, err := r.statePartitionCount(work, producer)
		if err != nil || n > 0 {
			missing = 0
			continue
		}
		if missing++; missing >= topicMissingChecks {
			stop(errStateTopicMissing)
			return
		}
	}
}

// publishFinal publishes, when the relay stops, what the shutdown itself
// wrote (the last state changes), then the last checkpoints and offset
// maps, so a clean shutdown leaves __mirror_state exact.
func (r *Relay) publishFinal(ctx context.Context, producer *kgo.Client, since time.Time) error {
	d := r.cfg.StopBudget.Bound(finalTimeout, stopStepTimeout)
	final, cancel := context.WithTimeoutCause(context.WithoutCancel(ctx), d,
		fmt.Errorf("final publish to %s: timed out after %s", service.StateTopic, d))
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

// statePartitionCount is __mirror_state's partition count, 0 when the
// destination says the topic does not exist; an error means it did not
// say, or that the topic has no partitions yet. It asks a broker each
// time: kadm's cached metadata could still say "missing" about a topic
// created a moment ago.
func (r *Relay) statePartitionCount(ctx context.Context, producer *kgo.Client) (int32, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, adminTimeout,
		fmt.Errorf("describe %s: timed out after %s", service.StateTopic, adminTimeout))
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(service.StateTopic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, producer)
	if err != nil {
		return 0, fmt.Errorf("describe %s: %w", service.StateTopic, cmp.Or(context.Cause(ctx), err))
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != service.StateTopic {
			continue
		}
		switch err := kerr.ErrorForCode(t.ErrorCode); {
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			return 0, nil
		case err != nil:
			return 0, fmt.Errorf("describe %s: %w", service.StateTopic, err)
		case len(t.Partitions) == 0:
			return 0, fmt.Errorf("describe %s: no partitions yet", service.StateTopic)
		}
		return int32(len(t.Partitions)), nil
	}
	return 0, nil
}

// ensureTopic creates __mirror_state when it is missing and learns its
// partition count. A missing topic while the database holds mirrors is a
// destination that lost it (rebuilt, or its disks replaced): rows already
// marked published would never reach the new topic, so the whole state is
// queued again first. Queueing before creating means a relay that fails in
// between finds the topic still missing at its next lead; queueing after
// could leave a created topic without the state.
func (r *Relay) ensureTopic(ctx context.Context, producer *kgo.Client) error {
	n, err := r.statePartitionCount(ctx, producer)
	if err != nil {
		return err
	}
	if n == 0 {
		if err := r.queueSnapshot(ctx); err != nil {
			return err
		}
		if err := r.createTopic(ctx, kadm.NewClient(producer)); err != nil {
			return err
		}
		// An existing topic keeps its partition count: records must go
		// where earlier ones of the same mirror went.
		if n, err = r.statePartitionCount(ctx, producer); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("describe %s: not found after it was created", service.StateTopic)
		}
	}
	r.statePartitions = n
	return nil
}

// createTopic creates __mirror_state compacted with the configured
// partitions; one that already exists is not an error.
func (r *Relay) createTopic(ctx context.Context, adm *kadm.Client) error {
	ctx, cancel := context.WithTimeoutCause(ctx, adminTimeout,
		fmt.Errorf("create %s: timed out after %s", service.StateTopic, adminTimeout))
	defer cancel()
	resp, err := adm.CreateTopic(ctx, r.cfg.Partitions, r.cfg.ReplicationFactor,
		map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, service.StateTopic)
	if err != nil {
		err = cmp.Or(context.Cause(ctx), err)
	} else {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create %s: %w", service.StateTopic, err)
	}
	return nil
}

// queueSnapshot queues the whole state for a missing __mirror_state,
// unless a snapshot this relay queued earlier is still wholly unpublished
// (a create that failed): that one reaches the new topic. One published
// even in part, maybe to a topic that went missing again, or by another
// instance's relay, is queued again.
func (r *Relay) queueSnapshot(ctx context.Context) error {
	if q := r.pendingSnapshot; q != nil {
		waiting, err := repo.OutboxUnpublished(ctx, r.cfg.Pool, q.FirstID)
		if err != nil {
			return err
		}
		if waiting {
			return nil
		}
	}
	r.pendingSnapshot = nil
	// A topic that nothing was ever published to is new, not lost: the
	// snapshot is harmless then (and needed by a restored database, which
	// has no outbox rows), but no loss is counted or reported.
	lost, err := repo.OutboxAnyPublished(ctx, r.cfg.Pool)
	if err != nil {
		return err
	}
	q, err := service.QueueStateSnapshot(ctx, r.cfg.Pool)
	if err != nil {
		return fmt.Errorf("queue the state for the missing %s: %w", service.StateTopic, err)
	}
	if q.Records() > 0 {
		r.pendingSnapshot = &q
		r.pendingLost = lost
		if lost {
			r.recreated.Inc()
		}
	}
	return nil
}

// snapshotPublished reports the pending snapshot once the outbox has been
// drained past it; by then the leading relay's first checkpoint pass has
// republished every partition's record and offset map too.
func (r *Relay) snapshotPublished() {
	q := r.pendingSnapshot
	if q == nil {
		return
	}
	r.pendingSnapshot = nil
	if !r.pendingLost {
		r.log.Info(fmt.Sprintf("created %s and published the state (%d records)", service.StateTopic, q.Records()+q.Partitions))
		return
	}
	r.log.Warn(fmt.Sprintf("%s was missing on the destination; recreated it and republished %d records "+
		"(every mirror, topic, synced-ACL set and partition) with the offset maps", service.StateTopic, q.Records()+q.Partitions),
		"mirrors", q.Mirrors, "topics", q.Topics, "acl_sets", q.ACLSets, "partitions", q.Partitions,
		"state_partitions", r.statePartitions)
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
