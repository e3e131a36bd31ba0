package recordbatch

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FuzzInflate: whatever the bytes and codec, the bounded decompressor does
// not panic and returns at most its bound.
func FuzzInflate(f *testing.F) {
	for _, codec := range []kgo.CompressionCodec{kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		comp, err := kgo.DefaultCompressor(codec)
		if err != nil {
			f.Fatal(err)
		}
		var buf bytes.Buffer
		for _, plain := range [][]byte{[]byte("hello, hello, hello"), make([]byte, 1<<17)} {
			out, used := comp.Compress(&buf, plain)
			f.Add(append([]byte(nil), out...), int8(used))
		}
	}
	f.Add(append(append([]byte(nil), xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 3, 2, 4, 'a'), int8(kgo.CodecSnappy))
	d := &inflater{limit: 1 << 16}
	f.Fuzz(func(t *testing.T, in []byte, codec int8) {
		out, err := d.Decompress(in, kgo.CompressionCodecType(codec))
		if err == nil && codec != int8(kgo.CodecNone) && len(out) > d.limit {
			t.Fatalf("decompressed %d bytes past the bound %d", len(out), d.limit)
		}
	})
}
