package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Codecs compresses and decompresses batches for Reencode, one compressor
// per codec, made when first needed and kept.
type Codecs struct {
	mu           sync.Mutex
	compressors  map[Codec]kgo.Compressor
	decompressor kgo.Decompressor
	buf          bytes.Buffer
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
	plain, err := c.decompressorLocked().Decompress(b.Raw[headerLen:], kgo.CompressionCodecType(b.Codec()))
	if err != nil {
		return dst, Reencoded{}, fmt.Errorf("re-encode the batch at offset %d: decompress %s: %w", b.BaseOffset, b.Codec(), err)
	}
	var (
		out          Reencoded
		records      []byte
		first, maxTS int64
		n            int32
	)
	logAppend := b.Attributes&logAppendTimeBit != 0
	for len(plain) > 0 {
		var r kmsg.Record
		if err := r.ReadFrom(plain); err != nil {
			return dst, Reencoded{}, fmt.Errorf("%w: record in the batch at offset %d: %v", ErrCorrupt, b.BaseOffset, err)
		}
		length, k := binary.Varint(plain)
		if k <= 0 || int(length) > len(plain)-k {
			return dst, Reencoded{}, fmt.Errorf("%w: record length in the batch at offset %d", ErrCorrupt, b.BaseOffset)
		}
		plain = plain[k+int(length):]
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
		body := r.AppendTo(nil)[1:] // the zero length is one byte
		records = binary.AppendVarint(records, int64(len(body)))
		records = append(records, body...)
		out.Sources = append(out.Sources, offset)
		n++
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

func (c *Codecs) decompressorLocked() kgo.Decompressor {
	if c.decompressor == nil {
		c.decompressor = kgo.DefaultDecompressor()
	}
	return c.decompressor
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
