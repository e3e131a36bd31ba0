// Package legacyformat writes Kafka message sets in the formats older than
// record batches (v0 and v1), for tests of sources that still serve them:
// kfake stores only v2 batches, so a test answers a fetch with these bytes.
package legacyformat

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"hash/crc32"
)

// Message is one message: offset, size, CRC (IEEE, over what follows it),
// magic, attributes, the timestamp (v1 only), key and value. A nil key or
// value is null.
func Message(magic, attrs int8, offset, ts int64, key, value []byte) []byte {
	body := []byte{byte(magic), byte(attrs)}
	if magic == 1 {
		body = binary.BigEndian.AppendUint64(body, uint64(ts))
	}
	for _, b := range [][]byte{key, value} {
		if b == nil {
			body = binary.BigEndian.AppendUint32(body, 0xffffffff)
			continue
		}
		body = binary.BigEndian.AppendUint32(body, uint32(len(b)))
		body = append(body, b...)
	}
	out := binary.BigEndian.AppendUint64(nil, uint64(offset))
	out = binary.BigEndian.AppendUint32(out, uint32(4+len(body)))
	out = binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(body))
	return append(out, body...)
}

// Record is what one message of a wrapper holds.
type Record struct {
	Key, Value []byte
	Timestamp  int64
}

// GzipWrapper is a gzip-compressed v1 message holding the records as v1
// messages from offset first: inner offsets relative from 0, the
// wrapper's offset its last inner message's absolute offset, and its
// timestamp the first record's.
func GzipWrapper(first int64, rs []Record) []byte {
	var inner []byte
	for i, r := range rs {
		inner = append(inner, Message(1, 0, int64(i), r.Timestamp, r.Key, r.Value)...)
	}
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	_, _ = w.Write(inner) // a bytes.Buffer takes every write
	_ = w.Close()
	return Message(1, 1, first+int64(len(rs))-1, rs[0].Timestamp, nil, z.Bytes())
}
