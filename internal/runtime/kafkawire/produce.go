package kafkawire

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ProduceTopic is a topic's part of a produce request: each partition's
// record batches, as one byte slice written as it lies.
type ProduceTopic struct {
	Topic      string
	Partitions []ProducePartition
}

// ProducePartition is one partition's record batches.
type ProducePartition struct {
	Partition int32
	Records   []byte
}

// Produce versions: from 3 (record batches, v2) to 12; 13 names topics by
// id, which a copier naming topics gains nothing from.
const (
	minProduceVersion = 3
	maxProduceVersion = 12
)

// Produce sends a produce request of the batches (acks -1: all replicas)
// with the broker's timeout, and waits for the answer as long as the
// connection lives or wait allows (zero: as long as the connection lives).
func Produce(ctx context.Context, c *Conn, timeout time.Duration, wait time.Duration, topics []ProduceTopic) (*kmsg.ProduceResponse, error) {
	v, ok := c.Version(kmsg.Produce.Int16(), maxProduceVersion)
	if !ok || v < minProduceVersion {
		return nil, fmt.Errorf("kafkawire: broker %d takes no produce version from %d to %d", c.broker.NodeID,
			minProduceVersion, maxProduceVersion)
	}
	body, err := c.Do(ctx, Request{Key: kmsg.Produce.Int16(), Version: v, Flexible: v >= 9, FlexibleAnswer: v >= 9,
		Body: appendProduce(v, -1, int32(timeout.Milliseconds()), topics), Timeout: wait})
	if err != nil {
		return nil, err
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(v)
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("kafkawire: reading a produce answer: %w", err)
	}
	return resp, nil
}

// appendProduce encodes a produce request's body at version v as parts:
// the bytes kafkawire writes, and between them each partition's records,
// not copied.
func appendProduce(v, acks int16, timeoutMillis int32, topics []ProduceTopic) net.Buffers {
	flexible := v >= 9
	var bufs net.Buffers
	b := make([]byte, 0, 64+32*len(topics))
	start := 0
	appendLen := func(n int) { // an array's count or a string's or bytes' length
		if flexible {
			b = binary.AppendUvarint(b, uint64(n)+1)
		} else {
			b = binary.BigEndian.AppendUint32(b, uint32(n))
		}
	}
	if flexible {
		b = append(b, 0) // null transactional id
	} else {
		b = binary.BigEndian.AppendUint16(b, 0xffff)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(acks))
	b = binary.BigEndian.AppendUint32(b, uint32(timeoutMillis))
	appendLen(len(topics))
	for _, t := range topics {
		if flexible {
			appendLen(len(t.Topic))
		} else {
			b = binary.BigEndian.AppendUint16(b, uint16(len(t.Topic)))
		}
		b = append(b, t.Topic...)
		appendLen(len(t.Partitions))
		for _, p := range t.Partitions {
			b = binary.BigEndian.AppendUint32(b, uint32(p.Partition))
			appendLen(len(p.Records))
			bufs = append(bufs, b[start:], p.Records)
			start = len(b)
			if flexible {
				b = append(b, 0) // the partition's tagged fields
			}
		}
		if flexible {
			b = append(b, 0) // the topic's
		}
	}
	if flexible {
		b = append(b, 0) // the request's
	}
	return append(bufs, b[start:])
}
