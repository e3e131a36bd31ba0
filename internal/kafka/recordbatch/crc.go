package recordbatch

import "hash/crc32"

// A produced batch differs from the fetched one only in its first bytes
// (attributes, producer id, epoch, sequence), so its CRC follows from the
// fetched CRC, which Split checked, without reading the records again: a
// CRC is linear, so for two messages of one length
//
//	crc(a) ^ crc(b) = raw(a ^ b)
//
// where raw is the register run from 0 with no final inversion. a ^ b is the
// changed prefix's difference followed by n zero bytes, and running n zero
// bytes through the register multiplies it by x^(8n) modulo the polynomial.
// That product costs at most 32 shifts per set bit of n's binary form
// instead of a pass over n bytes, which for a large batch is most of a
// copy's CRC work (the fetch's check being the rest).

// castagnoliReflected is CRC-32C's polynomial with its bits reversed, as
// the table-driven CRC uses it: bit 31 stands for x^0, bit 0 for x^31.
const castagnoliReflected = 0x82f63b78

// multiplyModP multiplies a and b, polynomials in the reflected form,
// modulo the polynomial.
func multiplyModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0 && a != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
			a ^= m
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReflected
		} else {
			b >>= 1
		}
	}
	return p
}

// powersOfX[k] is x^(2^k) modulo the polynomial, reflected.
var powersOfX = func() (t [64]uint32) {
	t[0] = 1 << 30 // x^1
	for k := 1; k < len(t); k++ {
		t[k] = multiplyModP(t[k-1], t[k-1])
	}
	return t
}()

// shiftZeros is raw(d ‖ n zero bytes) given raw(d): d times x^(8n).
func shiftZeros(d uint32, n int) uint32 {
	for k := 3; n != 0; k, n = k+1, n>>1 { // 8n = n << 3
		if n&1 != 0 {
			d = multiplyModP(powersOfX[k], d)
		}
	}
	return d
}

// incrementalCRCFrom is the covered length from which the CRC is updated
// rather than computed again. BenchmarkProducedCRC puts the crossing higher
// for bytes in the cache, but a fetched batch has usually left the cache,
// where a pass over it is several times slower.
const incrementalCRCFrom = 4 << 10

// updatedCRC is the CRC of covered, a batch's bytes from the attributes on,
// after its first len(before) bytes changed from before to their current
// value, given old, the CRC of the bytes before the change.
func updatedCRC(old uint32, before, covered []byte) uint32 {
	if len(covered) < incrementalCRCFrom {
		return crc32.Checksum(covered, castagnoli)
	}
	var diff [offNumRecords - offAttributes]byte
	d := diff[:len(before)]
	for i := range d {
		d[i] = before[i] ^ covered[i]
	}
	// crc32.Update inverts the register before and after: from ^0 it runs
	// the register from 0 and returns it inverted.
	raw := ^crc32.Update(^uint32(0), castagnoli, d)
	return old ^ shiftZeros(raw, len(covered)-len(d))
}
