package recordbatch

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Codecs compresses and decompresses batches for Reencode, one compressor
// per codec, made when first needed and kept.
type Codecs struct {
	// MaxInflated bounds what one batch may decompress to; a batch that
	// would inflate past it fails its check. Default DefaultMaxInflated.
	MaxInflated int

	mu          sync.Mutex
	compressors map[Codec]kgo.Compressor
	inflater    *inflater
	rd          bufio.Reader // the records of the batch being re-encoded
	rec         []byte       // the record being read
	body        []byte       // the record being written
	buf         bytes.Buffer
}

// Reencoded is a batch built again from a fetched one.
type Reencoded struct {
	// Sources are the source offsets of the batch's records, in order:
	// record i of the new batch is the source's record Sources[i].
	Sources []int64
}

// Reencode appends a new batch holding the records of b from source offset
// from on, for a producer with id pid and epoch, at sequence seq: offsets
// renumbered without gaps, every record's timestamp its own (a log-append
// time becomes each record's create time), compressed with codec. It serves
// the batches WholeCopyProblem names (message formats v0 and v1 among
// them: legacy.go), and a mirror that recompresses on purpose. A batch with no record from from on
// appends nothing.
func (c *Codecs) Reencode(dst []byte, b *Batch, from int64, codec Codec, pid int64, epoch int16, seq int32) ([]byte, Reencoded, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b.Magic < 2 {
		return c.reencodeLegacy(dst, b, from, codec, pid, epoch, seq)
	}
	if b.Control() {
		return dst, Reencoded{}, errors.New("re-encode: a control batch")
	}
	inf := c.inflaterLocked()
	stream, done, err := inf.open(b.Raw[headerLen:], kgo.CompressionCodecType(b.Codec()))
	if err != nil {
		return dst, Reencoded{}, c.decodeErr(b, err)
	}
	defer done()
	// The records are read one at a time from the decompressing stream,
	// each checked against what is left of the bound before it is read:
	// a record that claims more than that is refused before anything is
	// allocated for it, and the whole batch is never held decompressed.
	c.rd.Reset(stream)
	defer func() {
		if cap(c.rec) > 1<<20 || cap(c.body) > 1<<20 {
			c.rec, c.body = nil, nil // a large record's buffers are not kept
		}
	}()
	left := int64(inf.limit)
	var (
		out          Reencoded
		records      []byte
		first, maxTS int64
		n            int32
		read         int32 // records read, kept or not
		lastDelta    = int32(-1)
	)
	logAppend := b.Attributes&logAppendTimeBit != 0
	for {
		length, err := binary.ReadVarint(&c.rd)
		if err == io.EOF {
			break
		}
		if err != nil {
			return dst, Reencoded{}, c.decodeErr(b, err)
		}
		// The header was checked against the fetch (Fetched); what it
		// says of the records must hold too, or offsets would be given
		// to records that are not there, or records to offsets past
		// the batch's.
		if read == b.NumRecords {
			return dst, Reencoded{}, checkFailed(b.BaseOffset, "more records than its count %d", b.NumRecords)
		}
		if length < 0 {
			return dst, Reencoded{}, fmt.Errorf("%w: record length %d in the batch at offset %d", ErrCorrupt, length, b.BaseOffset)
		}
		if left -= length; left < 0 {
			return dst, Reencoded{}, checkFailed(b.BaseOffset, "its %s records %v", b.Codec(), inf.exceeded())
		}
		c.rec = binary.AppendVarint(c.rec[:0], length)
		c.rec = slices.Grow(c.rec, int(length))
		if _, err := io.ReadFull(&c.rd, c.rec[len(c.rec):len(c.rec)+int(length)]); err != nil {
			return dst, Reencoded{}, c.decodeErr(b, err)
		}
		var r kmsg.Record
		// Its key, value and headers alias c.rec until it is appended.
		if err := r.UnsafeReadFrom(c.rec[:len(c.rec)+int(length)]); err != nil {
			return dst, Reencoded{}, fmt.Errorf("%w: record in the batch at offset %d: %v", ErrCorrupt, b.BaseOffset, err)
		}
		read++
		if r.OffsetDelta <= lastDelta || r.OffsetDelta > b.LastOffsetDelta {
			return dst, Reencoded{}, checkFailed(b.BaseOffset, "record %d has offset delta %d, after %d and within [0, %d] it must be",
				read-1, r.OffsetDelta, lastDelta, b.LastOffsetDelta)
		}
		lastDelta = r.OffsetDelta
		offset := b.BaseOffset + int64(r.OffsetDelta)
		if offset < from {
			continue
		}
		ts := b.FirstTimestamp + r.TimestampDelta64
		if logAppend {
			ts = b.MaxTimestamp
		}
		if n == 0 {
			first, maxTS = ts, ts
		}
		maxTS = max(maxTS, ts)
		r.OffsetDelta = n
		r.TimestampDelta64 = ts - first
		r.TimestampDelta = int32(r.TimestampDelta64)
		r.Length = 0
		c.body = r.AppendTo(c.body[:0])
		body := c.body[1:] // the zero length is one byte
		// Doubled when full: append's growth of large slices (a
		// quarter) would allocate four times what the batch holds.
		if need := len(body) + binary.MaxVarintLen32; cap(records)-len(records) < need {
			records = slices.Grow(records, max(need, len(records)))
		}
		records = binary.AppendVarint(records, int64(len(body)))
		records = append(records, body...)
		out.Sources = append(out.Sources, offset)
		n++
	}
	if read != b.NumRecords {
		return dst, Reencoded{}, checkFailed(b.BaseOffset, "%d records where its count says %d", read, b.NumRecords)
	}
	if n == 0 {
		return dst, out, nil
	}
	dst, err = c.appendBatch(dst, records, n, first, maxTS, codec, pid, epoch, seq)
	return dst, out, err
}

// appendBatch appends a v2 batch of n records (their bytes as a batch
// holds them, offset deltas from 0) for a producer with id pid and epoch,
// at sequence seq, compressed with codec. c.mu is held.
func (c *Codecs) appendBatch(dst, records []byte, n int32, first, maxTS int64, codec Codec, pid int64, epoch int16, seq int32) ([]byte, error) {
	data, err := c.compress(codec, records)
	if err != nil {
		return dst, err
	}
	start := len(dst)
	dst = append(dst, make([]byte, headerLen)...)
	dst = append(dst, data...)
	h := dst[start:]
	binary.BigEndian.PutUint64(h[offBaseOffset:], 0)
	binary.BigEndian.PutUint32(h[offLength:], uint32(len(h)-12))
	binary.BigEndian.PutUint32(h[offLeaderEpoch:], 0xffffffff)
	h[offMagic] = 2
	binary.BigEndian.PutUint16(h[offAttributes:], uint16(codec))
	binary.BigEndian.PutUint32(h[offLastOffsetDelta:], uint32(n-1))
	binary.BigEndian.PutUint64(h[offFirstTimestamp:], uint64(first))
	binary.BigEndian.PutUint64(h[offMaxTimestamp:], uint64(maxTS))
	binary.BigEndian.PutUint64(h[offProducerID:], uint64(pid))
	binary.BigEndian.PutUint16(h[offProducerEpoch:], uint16(epoch))
	binary.BigEndian.PutUint32(h[offBaseSequence:], uint32(seq))
	binary.BigEndian.PutUint32(h[offNumRecords:], uint32(n))
	binary.BigEndian.PutUint32(h[offCRC:], crc32.Checksum(h[offAttributes:], castagnoli))
	return dst, nil
}

// decodeErr says why a batch's records could not be read: past the bound
// (a check), or not what their codec makes.
func (c *Codecs) decodeErr(b *Batch, err error) error {
	switch {
	case errors.Is(err, ErrInflateBound):
		return checkFailed(b.BaseOffset, "its %s records %v", b.Codec(), err)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return fmt.Errorf("%w: the records of the batch at offset %d end inside a record", ErrCorrupt, b.BaseOffset)
	}
	return fmt.Errorf("re-encode the batch at offset %d: decompress %s: %w", b.BaseOffset, b.Codec(), c.inflater.readErr(err))
}

// inflaterLocked is the bounded decompressor; c.mu is held.
func (c *Codecs) inflaterLocked() *inflater {
	if c.inflater == nil {
		c.inflater = &inflater{limit: cmp.Or(c.MaxInflated, DefaultMaxInflated)}
	}
	return c.inflater
}

// compress compresses records with codec. The result may alias c.buf, so
// it is copied out before the next call (Reencode holds c.mu throughout).
func (c *Codecs) compress(codec Codec, records []byte) ([]byte, error) {
	if codec == None {
		return records, nil
	}
	comp, ok := c.compressors[codec]
	if !ok {
		var err error
		if comp, err = kgo.DefaultCompressor(kgoCodec(codec)); err != nil {
			return nil, err
		}
		if c.compressors == nil {
			c.compressors = map[Codec]kgo.Compressor{}
		}
		c.compressors[codec] = comp
	}
	c.buf.Reset()
	data, used := comp.Compress(&c.buf, records)
	if used != kgo.CompressionCodecType(codec) {
		return nil, fmt.Errorf("compress with %s: the compressor used codec %d", codec, used)
	}
	return data, nil
}

func kgoCodec(c Codec) kgo.CompressionCodec {
	switch c {
	case Gzip:
		return kgo.GzipCompression()
	case Snappy:
		return kgo.SnappyCompression()
	case LZ4:
		return kgo.Lz4Compression()
	case Zstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}
