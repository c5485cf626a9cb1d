package agg

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"strings"

	"github.com/sluicehq/sluice/row"
)

// Keys are order-preserving: comparing encoded keys as bytes orders them by
// (bound, group values), so sorted keys give sorted output rows and a range
// scan over the bound prefix finds closed windows.

const (
	tagNull   = 0x00
	tagFalse  = 0x01
	tagTrue   = 0x02
	tagInt    = 0x03 // long and timestamp
	tagDouble = 0x04
	tagString = 0x05
	// tagDecimal: the scale (one byte), then the unscaled integer,
	// order-preserving among values of one scale: 0x01, its byte length
	// and its magnitude big-endian when >= 0; 0x00, 0xFF minus the
	// length and the magnitude's bytes inverted when < 0.
	tagDecimal = 0x06
)

// appendInt64 appends i big-endian with the sign bit flipped, so byte order
// is numeric order.
func appendInt64(b []byte, i int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(i)^(1<<63))
}

func readInt64(b []byte) int64 {
	return int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
}

// appendValue appends an order-preserving encoding of v.
func appendValue(b []byte, v row.Value) []byte {
	switch v.Kind {
	case row.Null:
		return append(b, tagNull)
	case row.Bool:
		if v.I != 0 {
			return append(b, tagTrue)
		}
		return append(b, tagFalse)
	case row.Long, row.Timestamp, row.Int, row.Date:
		return appendInt64(append(b, tagInt), v.I)
	case row.Decimal:
		return appendDecimal(append(b, tagDecimal, v.Scale), v)
	case row.Double:
		bits := math.Float64bits(v.F)
		if bits&(1<<63) != 0 {
			bits = ^bits
		} else {
			bits |= 1 << 63
		}
		return binary.BigEndian.AppendUint64(append(b, tagDouble), bits)
	case row.String:
		b = append(b, tagString)
		for i := 0; i < len(v.S); i++ {
			c := v.S[i]
			if c == 0x00 {
				b = append(b, 0x00, 0xFF)
			} else {
				b = append(b, c)
			}
		}
		return append(b, 0x00, 0x01)
	}
	panic(fmt.Sprintf("agg: cannot encode kind %v", v.Kind))
}

// readValueString is readValue on a key held as a string: a string value
// without escapes is a substring of the key (no allocation, no copy).
func readValueString(s string, k row.Kind) (row.Value, string, error) {
	if len(s) > 0 && s[0] == tagString {
		body := s[1:]
		if i := strings.IndexByte(body, 0x00); i >= 0 && i+1 < len(body) && body[i+1] == 0x01 {
			return row.StringValue(body[:i]), body[i+2:], nil
		}
	}
	v, rest, err := readValue([]byte(s), k)
	if err != nil {
		return row.Value{}, "", err
	}
	return v, s[len(s)-len(rest):], nil
}

// readValue decodes one value of kind k (k gives Long vs Timestamp) from b
// and returns the rest.
func readValue(b []byte, k row.Kind) (row.Value, []byte, error) {
	if len(b) == 0 {
		return row.Value{}, nil, fmt.Errorf("decode key: truncated")
	}
	tag := b[0]
	b = b[1:]
	switch tag {
	case tagNull:
		return row.Value{}, b, nil
	case tagFalse:
		return row.BoolValue(false), b, nil
	case tagTrue:
		return row.BoolValue(true), b, nil
	case tagInt:
		if len(b) < 8 {
			return row.Value{}, nil, fmt.Errorf("decode key: truncated int")
		}
		kind := row.Long
		switch k {
		case row.Timestamp, row.Int, row.Date:
			kind = k
		}
		return row.Value{Kind: kind, I: readInt64(b)}, b[8:], nil
	case tagDouble:
		if len(b) < 8 {
			return row.Value{}, nil, fmt.Errorf("decode key: truncated double")
		}
		bits := binary.BigEndian.Uint64(b)
		if bits&(1<<63) != 0 {
			bits &^= 1 << 63
		} else {
			bits = ^bits
		}
		return row.DoubleValue(math.Float64frombits(bits)), b[8:], nil
	case tagDecimal:
		return readDecimal(b)
	case tagString:
		if i := bytes.IndexByte(b, 0x00); i >= 0 && i+1 < len(b) && b[i+1] == 0x01 {
			// No escaped NUL (the usual string): one allocation.
			return row.StringValue(string(b[:i])), b[i+2:], nil
		}
		var s []byte
		for i := 0; i < len(b); i++ {
			if b[i] != 0x00 {
				s = append(s, b[i])
				continue
			}
			if i+1 >= len(b) {
				break
			}
			switch b[i+1] {
			case 0xFF:
				s = append(s, 0x00)
				i++
			case 0x01:
				return row.StringValue(string(s)), b[i+2:], nil
			default:
				return row.Value{}, nil, fmt.Errorf("decode key: bad string escape")
			}
		}
		return row.Value{}, nil, fmt.Errorf("decode key: unterminated string")
	}
	return row.Value{}, nil, fmt.Errorf("decode key: unknown tag %#x", tag)
}

// Hash is the stable key hash that assigns groups to state partitions:
// 64-bit FNV-1a over the encoded key. It is part of the checkpoint format
// (recorded as KeyHashName) and must never change for a given name.
func Hash(key []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range key {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// KeyHashName names Hash and the key encoding in checkpoint metadata.
const KeyHashName = "fnv1a64/key-v1"

// PartitionOf maps a key to one of n state partitions.
func PartitionOf(key []byte, n int) int {
	return int(Hash(key) % uint64(n))
}

// AppendKey appends the order-preserving encoding of r's values at cols,
// as a group key encodes its groupBy values: what another stateful
// operator (dedup) keys its state and partitions its rows by, so that
// PartitionOf and the state stores see keys of one format.
func AppendKey(b []byte, r row.Row, cols []int) []byte {
	for _, c := range cols {
		b = appendValue(b, r[c])
	}
	return b
}

// AppendBound appends an event-time bound (microseconds) as the 8 bytes a
// state key starts with: big-endian with the sign bit flipped, so that
// bytes order is time order and a watermark's EvictBelow bound is one
// such value.
func AppendBound(b []byte, t int64) []byte { return appendInt64(b, t) }

// ReadBound reads the bound AppendBound wrote at the start of b (8 bytes
// or more).
func ReadBound(b []byte) int64 { return readInt64(b) }

// appendDecimal appends a decimal's unscaled integer (see tagDecimal).
// A value whose digits are in S but fit an int64 encodes as the same
// value in I does, so equal values make equal keys.
func appendDecimal(b []byte, v row.Value) []byte {
	var mag []byte
	neg := false
	if v.S == "" {
		u := uint64(v.I)
		if v.I < 0 {
			neg, u = true, uint64(-v.I) // -MinInt64 wraps to 1<<63, its magnitude
		}
		var buf [8]byte
		binary.BigEndian.PutUint64(buf[:], u)
		i := 0
		for i < 8 && buf[i] == 0 {
			i++
		}
		mag = buf[i:]
	} else {
		u, _ := new(big.Int).SetString(v.S, 10)
		neg = u.Sign() < 0
		mag = new(big.Int).Abs(u).Bytes()
	}
	if !neg {
		b = append(b, 0x01, byte(len(mag)))
		return append(b, mag...)
	}
	b = append(b, 0x00, 0xFF-byte(len(mag)))
	for _, c := range mag {
		b = append(b, ^c)
	}
	return b
}

// readDecimal reads what appendDecimal wrote after the tag (the scale
// first).
func readDecimal(b []byte) (row.Value, []byte, error) {
	if len(b) < 3 {
		return row.Value{}, nil, fmt.Errorf("decode key: truncated decimal")
	}
	v := row.Value{Kind: row.Decimal, Scale: b[0]}
	neg := b[1] == 0x00
	n := int(b[2])
	if neg {
		n = 0xFF - n
	}
	b = b[3:]
	if n > len(b) {
		return row.Value{}, nil, fmt.Errorf("decode key: truncated decimal")
	}
	mag := make([]byte, n)
	copy(mag, b[:n])
	if neg {
		for i := range mag {
			mag[i] = ^mag[i]
		}
	}
	u := new(big.Int).SetBytes(mag)
	if neg {
		u.Neg(u)
	}
	if u.IsInt64() {
		v.I = u.Int64()
	} else {
		v.S = u.String()
	}
	return v, b[n:], nil
}
