package devcluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"
)

// Demo is the traffic StartDemo puts on the source.
type Demo struct {
	Topics           map[string]int32 // topic → partitions; default orders:3, payments:2
	RecordsPerSecond int              // per topic; 0 writes none (the topics and the group still come)
	Group            string           // consuming group; default demo-consumers
}

// demoFlushTimeout bounds the producer's final flush on stop.
const demoFlushTimeout = 5 * time.Second

// StartDemo creates the demo topics on the source (existing ones are kept as
// they are) and starts a producer writing keyed JSON records to each topic at
// RecordsPerSecond, and a consumer group reading them with autocommit, so the
// source has both growing logs and committed group offsets. Both run until
// ctx ends or Close is called.
func (c *Clusters) StartDemo(ctx context.Context, d Demo) error {
	d.Group = cmp.Or(d.Group, "demo-consumers")
	if len(d.Topics) == 0 {
		d.Topics = map[string]int32{"orders": 3, "payments": 2}
	}
	if d.RecordsPerSecond < 0 {
		return fmt.Errorf("devcluster: demo records per second %d is negative", d.RecordsPerSecond)
	}
	topics := slices.Sorted(maps.Keys(d.Topics))
	for _, t := range topics {
		if n := d.Topics[t]; n < 1 {
			return fmt.Errorf("devcluster: demo topic %s: %d partitions, want at least 1", t, n)
		}
	}

	// Held throughout: a closed kfake cluster blocks callers forever, so
	// Close must not begin while the topics are created.
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil {
		return errors.New("devcluster: closed")
	}
	if c.proc != nil {
		return errProcess
	}
	for _, t := range topics {
		if c.Source.TopicInfo(t) != nil {
			continue
		}
		if err := c.Source.CreateTopic(t, d.Topics[t], nil); err != nil {
			return fmt.Errorf("devcluster: create demo topic %s: %w", t, err)
		}
	}

	producer, err := kgo.NewClient(
		kgo.SeedBrokers(c.SourceAddr()),
		kgo.WithLogger(kslog.New(c.logger.With("component", "demo-producer"))),
		kgo.RecordDeliveryTimeout(10*time.Second),
	)
	if err != nil {
		return fmt.Errorf("devcluster: demo producer: %w", err)
	}
	consumer, err := kgo.NewClient(
		kgo.SeedBrokers(c.SourceAddr()),
		kgo.WithLogger(kslog.New(c.logger.With("component", "demo-consumer", "group", d.Group))),
		kgo.ConsumerGroup(d.Group),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitInterval(time.Second), // committed offsets show up soon after start
	)
	if err != nil {
		producer.Close()
		return fmt.Errorf("devcluster: demo consumer: %w", err)
	}

	// Stop on the caller's ctx or on Close, whichever comes first.
	ctx, cancel := context.WithCancel(ctx)
	stopOnClose := context.AfterFunc(c.ctx, cancel)
	context.AfterFunc(ctx, func() { stopOnClose() })

	if d.RecordsPerSecond > 0 {
		c.wg.Go(func() { c.produce(ctx, producer, topics, d.RecordsPerSecond) })
	} else {
		producer.Close()
	}
	c.wg.Go(func() { c.consume(ctx, consumer) })
	c.logger.Info("demo traffic started", "topics", d.Topics, "records_per_second_per_topic", d.RecordsPerSecond, "group", d.Group)
	return nil
}

// produce writes rate records per second to each topic until ctx ends,
// catching up after a stall by at most one second's worth.
func (c *Clusters) produce(ctx context.Context, cl *kgo.Client, topics []string, rate int) {
	defer func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), demoFlushTimeout)
		defer cancel()
		if err := cl.Flush(flushCtx); err != nil {
			c.logger.Warn("demo producer flush timed out", "timeout", demoFlushTimeout, "err", err)
		}
		cl.Close()
	}()
	tick := time.NewTicker(max(time.Second/time.Duration(rate), 20*time.Millisecond))
	defer tick.Stop()
	start, sent := time.Now(), int64(0)
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			due := int64(now.Sub(start).Seconds() * float64(rate))
			sent = max(sent, due-int64(rate))
			for ; sent < due; sent++ {
				for _, t := range topics {
					cl.Produce(ctx, demoRecord(t, sent+1, now), c.onDemoProduced)
				}
			}
		}
	}
}

func (c *Clusters) onDemoProduced(r *kgo.Record, err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		c.logger.Warn("demo produce failed", "topic", r.Topic, "err", err)
	}
}

// demoRecord is record id of topic: keyed by id, so a key always lands in the
// same partition, with JSON named after the topic ("orders" → order_id).
func demoRecord(topic string, id int64, now time.Time) *kgo.Record {
	value := fmt.Sprintf(`{"%s_id":%d,"customer_id":%d,"amount_cents":%d,"currency":"EUR","created_at":%q}`,
		strings.TrimSuffix(topic, "s"), id, 1+id%97, 100+id*7919%100000, now.UTC().Format(time.RFC3339Nano))
	return &kgo.Record{
		Topic: topic,
		Key:   []byte(strconv.FormatInt(id, 10)),
		Value: []byte(value),
		Headers: []kgo.RecordHeader{
			{Key: "content-type", Value: []byte("application/json")},
			{Key: "producer", Value: []byte("kmirror-dev")},
		},
		Timestamp: now,
	}
}

// consume polls until ctx ends; autocommit does the rest. Close leaves the
// group, committing what was polled.
func (c *Clusters) consume(ctx context.Context, cl *kgo.Client) {
	defer cl.Close()
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return
		}
		fetches.EachError(func(topic string, p int32, err error) {
			c.logger.Warn("demo consume failed", "topic", topic, "partition", p, "err", err)
		})
	}
}
