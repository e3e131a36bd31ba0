// Package recordbatch reads and rewrites Kafka's v2 record batches as bytes,
// so that a fetched batch can be produced to another cluster without being
// decompressed: only the batch header changes (offsets, producer fields,
// the transactional bit) and its CRC is computed again. The records,
// compressed or not, are copied as they are, and keep their codec.
package recordbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// The v2 batch header, by byte offset (KIP-98's RecordBatch layout).
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offFirstTimestamp  = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offNumRecords      = 57
	headerLen          = 61

	// legacyHeaderLen is what every message format shares: the offset, the
	// length, a field (CRC or leader epoch) and the magic byte.
	legacyHeaderLen = 17
)

// legacyMinSize is the smallest message of formats v0 and v1 (Kafka's
// LegacyRecord overheads, with the offset and length): attributes, a
// timestamp from v1, and the key and value lengths follow the magic byte.
var legacyMinSize = [2]int{12 + 14, 12 + 22}

// Attribute bits of a v2 batch.
const (
	codecMask        = 0x07
	logAppendTimeBit = 0x08
	transactionalBit = 0x10
	controlBit       = 0x20
	// deleteHorizonBit: compaction put a delete horizon in the first
	// timestamp field (KIP-534), so it no longer dates the records.
	deleteHorizonBit = 0x40
)

// Codec is a batch's compression, as Kafka numbers it.
type Codec int8

// The codecs Kafka defines.
const (
	None Codec = iota
	Gzip
	Snappy
	LZ4
	Zstd
)

// ParseCodec returns the codec Kafka names name ("none", "gzip", "snappy",
// "lz4", "zstd"); ok is false for any other name.
func ParseCodec(name string) (c Codec, ok bool) {
	for c := None; c <= Zstd; c++ {
		if c.String() == name {
			return c, true
		}
	}
	return 0, false
}

func (c Codec) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is a batch whose length or CRC does not hold: copying it would
// write damaged records under a fresh CRC.
var ErrCorrupt = errors.New("corrupt record batch")

// Batch is one batch of a fetch response, its bytes as the broker sent them.
// The header fields are read from Raw; for a message set older than v2 only
// BaseOffset and Magic are.
type Batch struct {
	Raw        []byte
	BaseOffset int64
	// LeaderEpoch is the source leader's epoch when the batch was
	// appended (v2; -1 for older formats): a fetch names the last one
	// read (KIP-320), so that the leader can say where its log diverged.
	LeaderEpoch     int32
	Magic           int8
	Attributes      int16
	LastOffsetDelta int32
	FirstTimestamp  int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	NumRecords      int32
}

// Split cuts a partition's fetched bytes into batches, checking each v2
// batch's CRC. A broker may end a response with a partial batch (it fills a
// size limit); that tail is left out, as consumers leave it. A message set
// older than v2 is returned with its Magic, codec and offset only, for
// Reencode to build a v2 batch of its records.
func Split(in []byte) ([]Batch, error) {
	var out []Batch
	for len(in) >= legacyHeaderLen {
		length := int32(binary.BigEndian.Uint32(in[offLength:]))
		if length < legacyHeaderLen-12 {
			return out, fmt.Errorf("%w: length %d", ErrCorrupt, length)
		}
		size := 12 + int(length)
		if len(in) < size {
			break // a partial batch at the end of the response
		}
		raw := in[:size:size]
		in = in[size:]
		b := Batch{Raw: raw, BaseOffset: int64(binary.BigEndian.Uint64(raw[offBaseOffset:])), Magic: int8(raw[offMagic]), LeaderEpoch: -1}
		if b.Magic < 2 && size < legacyMinSize[max(b.Magic, 0)] {
			return out, fmt.Errorf("%w: a v%d message of %d bytes", ErrCorrupt, b.Magic, size)
		}
		if b.Magic < 2 {
			// The codec and timestamp-type bits of a message's attributes
			// are where a v2 batch has them. Its offset is its last
			// record's (a wrapper's is its last inner message's).
			b.Attributes = int16(raw[offMagic+1])
			out = append(out, b)
			continue
		}
		if size < headerLen {
			return out, fmt.Errorf("%w: a v2 batch of %d bytes", ErrCorrupt, size)
		}
		if want, got := binary.BigEndian.Uint32(raw[offCRC:]), crc32.Checksum(raw[offAttributes:], castagnoli); want != got {
			return out, fmt.Errorf("%w: batch at offset %d has CRC %08x, its bytes %08x", ErrCorrupt, b.BaseOffset, want, got)
		}
		b.LeaderEpoch = int32(binary.BigEndian.Uint32(raw[offLeaderEpoch:]))
		b.Attributes = int16(binary.BigEndian.Uint16(raw[offAttributes:]))
		b.LastOffsetDelta = int32(binary.BigEndian.Uint32(raw[offLastOffsetDelta:]))
		b.FirstTimestamp = int64(binary.BigEndian.Uint64(raw[offFirstTimestamp:]))
		b.MaxTimestamp = int64(binary.BigEndian.Uint64(raw[offMaxTimestamp:]))
		b.ProducerID = int64(binary.BigEndian.Uint64(raw[offProducerID:]))
		b.ProducerEpoch = int16(binary.BigEndian.Uint16(raw[offProducerEpoch:]))
		b.BaseSequence = int32(binary.BigEndian.Uint32(raw[offBaseSequence:]))
		b.NumRecords = int32(binary.BigEndian.Uint32(raw[offNumRecords:]))
		out = append(out, b)
	}
	return out, nil
}

// Codec is the batch's compression.
func (b *Batch) Codec() Codec { return Codec(b.Attributes & codecMask) }

// Transactional says the batch was written in a transaction.
func (b *Batch) Transactional() bool { return b.Attributes&transactionalBit != 0 }

// Control says the batch holds a transaction marker, not data.
func (b *Batch) Control() bool { return b.Attributes&controlBit != 0 }

// Records is the batch's record count.
func (b *Batch) Records() int32 { return b.NumRecords }

// FirstRecordTimestamp is the first record's timestamp in milliseconds as a
// consumer reads it: the batch's first timestamp, or, for a batch stamped
// with log-append time, the broker's append time (the max timestamp) that
// each of its records reads.
func (b *Batch) FirstRecordTimestamp() int64 {
	if b.Attributes&logAppendTimeBit != 0 {
		return b.MaxTimestamp
	}
	return b.FirstTimestamp
}

// NextOffset is the offset after the batch's last record.
func (b *Batch) NextOffset() int64 { return b.BaseOffset + int64(b.LastOffsetDelta) + 1 }

// WholeCopyProblem says why the batch cannot be produced as it is, or ""
// when it can. from is the first source offset the copy wants.
//
//   - A message set older than v2 has no producer fields to rewrite.
//   - Compaction can leave gaps between a batch's offsets, and a broker
//     refuses a produced batch whose offset range is not its record count
//     (Kafka's LogValidator, kfake alike): the records must be renumbered.
//   - With log-append time the records' own timestamps were replaced by the
//     source broker's; produced as they are, the destination would stamp
//     them again or keep the producer's originals, not the source's. A
//     delete horizon likewise takes the first timestamp's place.
//   - A batch that starts before from holds records already copied.
func (b *Batch) WholeCopyProblem(from int64) string {
	switch {
	case b.Magic < 2:
		return fmt.Sprintf("message format v%d", b.Magic)
	case b.NumRecords != b.LastOffsetDelta+1:
		return "offset gaps left by compaction"
	case b.Attributes&logAppendTimeBit != 0:
		return "log-append timestamps"
	case b.Attributes&deleteHorizonBit != 0:
		return "a compaction delete horizon"
	case b.BaseOffset < from:
		return "starts before the copy's next offset"
	}
	return ""
}

// AppendProduced appends the batch as a producer with id pid and epoch
// sends it: base offset 0 (the broker assigns offsets), no leader epoch,
// not transactional, sequence seq, and a new CRC. The records and their
// offset and timestamp deltas are copied as they are. It is meant for
// batches whose WholeCopyProblem is "" and whose CRC holds (Split checks
// it: the new CRC is derived from it).
func (b *Batch) AppendProduced(dst []byte, pid int64, epoch int16, seq int32) []byte {
	start := len(dst)
	dst = append(dst, b.Raw...)
	rewriteProduced(dst[start:], b.Attributes, pid, epoch, seq)
	return dst
}

// Produced rewrites the batch's own bytes as AppendProduced writes them and
// returns them: no copy, for a batch that is produced once and not read
// again (its header fields stay as fetched).
func (b *Batch) Produced(pid int64, epoch int16, seq int32) []byte {
	rewriteProduced(b.Raw, b.Attributes, pid, epoch, seq)
	return b.Raw
}

func rewriteProduced(out []byte, attributes int16, pid int64, epoch int16, seq int32) {
	var before [offNumRecords - offAttributes]byte
	copy(before[:], out[offAttributes:offNumRecords])
	binary.BigEndian.PutUint64(out[offBaseOffset:], 0)
	binary.BigEndian.PutUint32(out[offLeaderEpoch:], 0xffffffff) // -1
	attrs := uint16(attributes) &^ transactionalBit
	binary.BigEndian.PutUint16(out[offAttributes:], attrs)
	binary.BigEndian.PutUint64(out[offProducerID:], uint64(pid))
	binary.BigEndian.PutUint16(out[offProducerEpoch:], uint16(epoch))
	binary.BigEndian.PutUint32(out[offBaseSequence:], uint32(seq))
	crc := updatedCRC(binary.BigEndian.Uint32(out[offCRC:]), before[:], out[offAttributes:])
	binary.BigEndian.PutUint32(out[offCRC:], crc)
}
