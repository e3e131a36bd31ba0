package recordbatch

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestUpdatedCRC: the CRC derived from the old one equals the one computed
// over the changed bytes, for lengths on both sides of the threshold and
// around powers of two, and for every changed prefix length.
func TestUpdatedCRC(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	lengths := []int{36, 37, 100, 4095, 4096, 4097, 8192, 16 << 10, 65535, 65536, 1 << 20, 1<<20 + 13}
	for range 20 {
		lengths = append(lengths, 36+rng.IntN(2<<20))
	}
	for _, n := range lengths {
		covered := make([]byte, n)
		for i := range covered {
			covered[i] = byte(rng.Uint32())
		}
		old := crc32.Checksum(covered, castagnoli)
		for _, k := range []int{1, 2, 12, offNumRecords - offAttributes} {
			before := append([]byte(nil), covered[:k]...)
			for i := range k {
				covered[i] ^= byte(rng.Uint32())
			}
			got, want := updatedCRC(old, before, covered), crc32.Checksum(covered, castagnoli)
			if got != want {
				t.Fatalf("length %d, %d bytes changed: CRC %08x, want %08x", n, k, got, want)
			}
			old = want
		}
	}
}

// BenchmarkProducedCRC compares updating a batch's CRC with computing it
// again, by size: incrementalCRCFrom is where the update starts to win.
func BenchmarkProducedCRC(b *testing.B) {
	for _, n := range []int{1 << 10, 2 << 10, 4 << 10, 16 << 10, 256 << 10, 1 << 20} {
		covered := make([]byte, n)
		before := make([]byte, offNumRecords-offAttributes)
		b.Run(fmt.Sprintf("computed/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				crc32.Checksum(covered, castagnoli)
			}
		})
		b.Run(fmt.Sprintf("updated/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				d := before
				raw := ^crc32.Update(^uint32(0), castagnoli, d)
				shiftZeros(raw, n-len(d))
			}
		})
	}
}
