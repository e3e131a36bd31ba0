package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultMaxInflated bounds what one batch may decompress to when kmirror
// decodes it (Reencode): 32 times a fetch's partition max bytes (1 MiB by
// default). A few kilobytes of zeros can claim gigabytes; a producer's
// batch of real records stays far below this (producers cut batches at
// about a megabyte, before or after compression).
const DefaultMaxInflated = 32 << 20

// maxZstdWindow is the largest zstd window decoded: RFC 8878 recommends
// decoders support up to 8 MiB and allows refusing more, and a producer's
// levels use no more. The streaming decoder allocates a frame's whole
// window up front, so a frame's claim must be bounded before it is read.
const maxZstdWindow = 8 << 20

// ErrInflateBound is a batch that decompresses past its bound.
var ErrInflateBound = errors.New("decompress past the bound")

// boundError is ErrInflateBound, and kgo's ErrMaxDecompress too: a kgo
// consumer then stops fetching the partition rather than decode the batch
// again and again.
type boundError struct{ limit int }

func (e *boundError) Error() string {
	return fmt.Sprintf("decompress past the bound of %d bytes", e.limit)
}

func (e *boundError) Is(target error) bool {
	return target == ErrInflateBound || target == kgo.ErrMaxDecompress
}

// inflater decompresses a batch's records, streaming, and stops as soon as
// the output passes limit: nothing the size of what a batch claims is
// allocated before it is read. It implements kgo.Decompressor, so that kgo
// reads message formats v0 and v1 through it too. Not safe for concurrent
// use (Codecs holds its mutex).
type inflater struct {
	limit int
	src   bytes.Reader
	gz    *gzip.Reader
	lz    *lz4.Reader
	zs    *zstd.Decoder
}

var _ kgo.Decompressor = (*inflater)(nil)

// Decompress implements kgo.Decompressor: the whole output, as a new
// slice, for kgo's reading of message formats v0 and v1 and for kgo
// consumers. The batch is decompressed twice: once to count its size, into
// nothing, and once into a slice of exactly that size. So a bomb costs
// its decoding and no memory, and a batch within the bound one allocation;
// these paths read few batches (alignment's records, old formats), where
// the time matters less than what a bomb could hold.
func (d *inflater) Decompress(src []byte, codec kgo.CompressionCodecType) ([]byte, error) {
	if codec == kgo.CodecNone {
		return src, nil
	}
	r, done, err := d.open(src, codec)
	if err != nil {
		return nil, err
	}
	n, err := io.Copy(io.Discard, &io.LimitedReader{R: r, N: int64(d.limit) + 1})
	done()
	if err != nil {
		return nil, d.readErr(err)
	}
	if n > int64(d.limit) {
		return nil, d.exceeded()
	}
	if r, done, err = d.open(src, codec); err != nil {
		return nil, err
	}
	defer done()
	out := make([]byte, n)
	if _, err := io.ReadFull(r, out); err != nil {
		return nil, d.readErr(err)
	}
	return out, nil
}

func (d *inflater) exceeded() error { return &boundError{limit: d.limit} }

// readErr names the zstd decoder's refusals of a frame's claims as the
// bound's.
func (d *inflater) readErr(err error) error {
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return fmt.Errorf("%w (%v)", d.exceeded(), err)
	}
	return err
}

// open returns a reader of src decompressed, and what to call when it
// has been read. The reader does not bound what it returns: its callers
// read at most limit+1 bytes of it.
func (d *inflater) open(src []byte, codec kgo.CompressionCodecType) (io.Reader, func(), error) {
	d.src.Reset(src)
	switch codec {
	case kgo.CodecNone:
		return &d.src, func() {}, nil
	case kgo.CodecSnappy:
		out, err := d.snappy(src)
		if err != nil {
			return nil, nil, err
		}
		d.src.Reset(out)
		return &d.src, func() {}, nil
	case kgo.CodecGzip:
		if d.gz == nil {
			d.gz = new(gzip.Reader)
		}
		if err := d.gz.Reset(&d.src); err != nil {
			return nil, nil, err
		}
		return d.gz, func() {}, nil
	case kgo.CodecLz4:
		if d.lz == nil {
			d.lz = lz4.NewReader(nil)
		}
		d.lz.Reset(&d.src)
		return d.lz, func() {}, nil
	case kgo.CodecZstd:
		if d.zs == nil {
			zs, err := zstd.NewReader(nil, zstd.WithDecoderLowmem(true), zstd.WithDecoderConcurrency(1),
				zstd.WithDecoderMaxWindow(min(maxZstdWindow, uint64(d.limit))), zstd.WithDecoderMaxMemory(uint64(d.limit)))
			if err != nil {
				return nil, nil, err
			}
			// A pooled inflater may be dropped; its decoder is closed then.
			runtime.AddCleanup(d, func(zs *zstd.Decoder) { zs.Close() }, zs)
			d.zs = zs
		}
		if err := d.zs.Reset(&d.src); err != nil {
			return nil, nil, d.readErr(err)
		}
		return d.zs, func() { d.src.Reset(nil) }, nil
	}
	return nil, nil, fmt.Errorf("unknown compression codec %d", codec)
}

// xerialMagic starts snappy framed as the Java client frames it: then two
// 4-byte versions, then blocks, each a 4-byte length and a snappy block.
var xerialMagic = []byte{130, 83, 78, 65, 80, 80, 89, 0}

// snappy reads a snappy block, or xerial-framed blocks. A block states its
// decoded length first, so each is checked against what is left of the
// bound before anything is allocated for it.
func (d *inflater) snappy(src []byte) ([]byte, error) {
	left := d.limit
	block := func(dst, b []byte) ([]byte, error) {
		n, err := s2.DecodedLen(b)
		if err != nil {
			return nil, err
		}
		if n > left {
			return nil, d.exceeded()
		}
		left -= n
		out, err := s2.Decode(nil, b)
		if err != nil {
			return nil, err
		}
		return append(dst, out...), nil
	}
	if len(src) < 16 || !bytes.HasPrefix(src, xerialMagic) {
		return block(nil, src)
	}
	var out []byte
	for rest := src[16:]; len(rest) > 0; {
		if len(rest) < 4 {
			return nil, errors.New("snappy: a truncated xerial block length")
		}
		size := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(size) > uint64(len(rest)) {
			return nil, fmt.Errorf("snappy: a xerial block of %d bytes with %d left", size, len(rest))
		}
		var err error
		if out, err = block(out, rest[:size]); err != nil {
			return nil, err
		}
		rest = rest[size:]
	}
	return out, nil
}

// NewDecompressor returns a kgo.Decompressor bounded at limit as Reencode
// is, safe for concurrent use: a kgo consumer given it (kafkaconn's
// clients, which read records back for alignment) inflates a batch no
// further than kmirror does itself, where kgo's own would go to 1 GiB,
// appending its way there a quarter at a time.
func NewDecompressor(limit int) kgo.Decompressor {
	return &sharedInflater{limit: limit}
}

type sharedInflater struct {
	limit int
	pool  sync.Pool
}

func (s *sharedInflater) Decompress(src []byte, codec kgo.CompressionCodecType) ([]byte, error) {
	d, _ := s.pool.Get().(*inflater)
	if d == nil {
		d = &inflater{limit: s.limit}
	}
	defer s.pool.Put(d)
	return d.Decompress(src, codec)
}
