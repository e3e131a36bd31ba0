package partition

import (
	"context"
	"errors"
	"fmt"
	"kmirror/internal/kafka/batchproduce"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/kafka/recordbatch"
	"kmirror/workers/lease"
	"slices"
	"strings"
	"time"
)

// copier is the copy as the workers use it (worker.Copy): the instance's
// batch producer and its client's health, and the mirrors' copy settings
// and throttles, with the signal that wakes the sessions when what the
// clients' health would put in their rows changes. It is made as the
// engine starts, once the producer is open.
type copier struct {
	producer *batchproduce.Producer
	health   *clientHealth
	settings *copySettings
	changes  *healthChanges
	// servers are the destination's bootstrap servers, which a public
	// error names.
	servers []string
}

// Produce hands a batch to the batch producer.
func (c *copier) Produce(ctx context.Context, topic string, partition int32, b batchproduce.Payload, promise func(batchproduce.Result)) {
	c.producer.Produce(ctx, topic, partition, b, promise)
}

// ProducerTrouble is the older of the producer client's trouble and the
// destination partition's own run of retries.
func (c *copier) ProducerTrouble(topic string, partition int32) (time.Time, error) {
	return oldestTrouble(
		func() (time.Time, error) { return c.health.trouble(troubleAfter) },
		func() (time.Time, error) { return c.retrying(topic, partition) })
}

// RefreshProducerMetadata makes the producer read the leaders again.
func (c *copier) RefreshProducerMetadata() { c.producer.RefreshMetadata() }

// Recompression is the mirror's compression.type, when it is not each
// batch's own (copy_settings.go).
func (c *copier) Recompression(mirror string) (recordbatch.Codec, bool) {
	return c.settings.recompression(mirror)
}

// Throttle waits for the mirror's replication throttle (copy_settings.go).
func (c *copier) Throttle(ctx context.Context, done <-chan struct{}, k lease.Key, size func() int64) (time.Duration, error) {
	return c.settings.wait(ctx, done, k, size)
}

// HealthChanged is closed when what the clients' health would put in the
// partitions' rows changes.
func (c *copier) HealthChanged() <-chan struct{} { return c.changes.updated() }

// retrying is how long, and why, the producer has retried a
// destination partition's copies without an answer, once it has lasted
// troubleAfter.
func (c *copier) retrying(dstTopic string, partition int32) (time.Time, error) {
	since, err := c.producer.Retrying(dstTopic, partition)
	if err == nil || time.Since(since) < troubleAfter {
		return time.Time{}, nil
	}
	if !errors.Is(err, batchproduce.ErrNoLeader) && !errors.Is(err, batchproduce.ErrNotAnswered) {
		// A request that failed reads the same whatever answered
		// (client_health.go); the producer's hook logged it.
		err = kafkaconn.Public(err, c.servers)
	}
	return since, fmt.Errorf("retrying %s/%d: %w", dstTopic, partition, err)
}

// retryingSignature names the destination partitions the producer
// has retried for troubleAfter, for the client watch to tell a change.
func (c *copier) retryingSignature() string {
	var out []string
	for tp, since := range c.producer.RetryingPartitions(troubleAfter) {
		out = append(out, fmt.Sprintf("%s/%d@%d", tp.Topic, tp.Partition, since.UnixNano()))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}
