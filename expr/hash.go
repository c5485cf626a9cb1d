package expr

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/bits"

	"github.com/sluicehq/sluice/row"
)

// Spark's hash(): Murmur3 x86_32 (org.apache.spark.unsafe.hash.
// Murmur3_x86_32) with seed 42, each argument hashed with the previous
// result as its seed, a null leaving the seed as it is. Values are hashed
// as Spark stores them: int and date as an int, bigint and timestamp as a
// long, double as the long of its bits (-0.0 as 0.0), boolean as the int 1
// or 0, a string's UTF-8 bytes with Spark's legacy tail (hashUnsafeBytes:
// each trailing byte mixed as a sign-extended int), a decimal of at most 18
// digits as its unscaled long, a wider one as the bytes of its unscaled
// BigInteger.

const (
	murmurC1 = 0xcc9e2d51
	murmurC2 = 0x1b873593
	hashSeed = 42
)

func mixK1(k1 uint32) uint32 {
	k1 *= murmurC1
	k1 = bits.RotateLeft32(k1, 15)
	return k1 * murmurC2
}

func mixH1(h1, k1 uint32) uint32 {
	h1 ^= k1
	h1 = bits.RotateLeft32(h1, 13)
	return h1*5 + 0xe6546b64
}

func fmix(h1 uint32, length uint32) uint32 {
	h1 ^= length
	h1 ^= h1 >> 16
	h1 *= 0x85ebca6b
	h1 ^= h1 >> 13
	h1 *= 0xc2b2ae35
	h1 ^= h1 >> 16
	return h1
}

func hashInt(i int32, seed uint32) uint32 {
	return fmix(mixH1(seed, mixK1(uint32(i))), 4)
}

func hashLong(l int64, seed uint32) uint32 {
	low, high := uint32(uint64(l)), uint32(uint64(l)>>32)
	h1 := mixH1(seed, mixK1(low))
	h1 = mixH1(h1, mixK1(high))
	return fmix(h1, 8)
}

func hashBytes(b []byte, seed uint32) uint32 {
	aligned := len(b) - len(b)%4
	h1 := seed
	for i := 0; i < aligned; i += 4 {
		h1 = mixH1(h1, mixK1(binary.LittleEndian.Uint32(b[i:])))
	}
	for i := aligned; i < len(b); i++ {
		h1 = mixH1(h1, mixK1(uint32(int32(int8(b[i])))))
	}
	return fmix(h1, uint32(len(b)))
}

// hashValue folds one value into seed as Spark's Murmur3Hash does.
func hashValue(v row.Value, t Type, seed uint32) uint32 {
	switch v.Kind {
	case row.Null:
		return seed
	case row.Int, row.Date, row.Bool:
		return hashInt(int32(v.I), seed)
	case row.Long, row.Timestamp:
		return hashLong(v.I, seed)
	case row.Double:
		f := v.F
		if f == 0 {
			f = 0 // -0.0 hashes as 0.0 (SPARK-35207)
		}
		bits := math.Float64bits(f)
		if math.IsNaN(f) {
			bits = 0x7ff8000000000000 // Double.doubleToLongBits' canonical NaN
		}
		return hashLong(int64(bits), seed)
	case row.String:
		return hashBytes([]byte(v.S), seed)
	case row.Decimal:
		if t.Precision <= 18 && v.S == "" {
			return hashLong(v.I, seed)
		}
		return hashBytes(twosComplementBytes(v), seed)
	}
	return seed
}

// twosComplementBytes is BigInteger.toByteArray of the unscaled value: the
// shortest big-endian two's complement.
func twosComplementBytes(v row.Value) []byte {
	u := unscaled(v)
	if u.Sign() >= 0 {
		b := u.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// -x in two's complement: invert (x-1).
	m := new(big.Int).Neg(u)
	m.Sub(m, big.NewInt(1))
	b := m.Bytes()
	for i := range b {
		b[i] = ^b[i]
	}
	if len(b) == 0 || b[0]&0x80 == 0 {
		b = append([]byte{0xff}, b...)
	}
	return b
}
