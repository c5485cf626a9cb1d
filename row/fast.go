package row

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strings"

	"github.com/valyala/fastjson"
)

// The fast path: most records are a flat JSON object whose keys are the
// schema's names and whose values are strings and numbers without escapes.
// decodeFast reads such a record in one pass over its bytes, without
// copying it and without building fastjson's tree, notes where each
// field's value is, and converts the fields with the same function as the
// full path (value), so the rules are written once.
//
// It declines (and Decode takes the full path, from the start) whenever it
// is not sure to give what the full path gives: an escape in a key or a
// string, an object or array value, a token fastjson reads in its own way
// (nan, inf, a lone sign), anything fastjson would refuse, and every
// record that is malformed, so that the errors are the full path's. What
// it accepts is a subset of what fastjson accepts, read the same way:
// whitespace is fastjson's (space, \t, \n, \r), a string ends at the first
// quote, a number token is the run of [0-9.eE+-] fastjson takes.

// fastState is the fast path's scratch.
type fastState struct {
	vals []fastVal
	// order[k] is the field the k-th key of the last record matched (-1:
	// none), tried first for the k-th key of the next: records of one
	// producer keep their keys in one order.
	order []int32
	names []fastName // per field
}

// fastName is a field name compared eight bytes at a time against a
// record's key.
type fastName struct {
	n      int
	w, m   [2]uint64 // the name's first 16 bytes, little-endian, and their mask
	simple bool      // at most 16 bytes, none of them '"' or '\\'
}

func newFastName(name string) fastName {
	fn := fastName{n: len(name), simple: len(name) <= 16 && !strings.ContainsAny(name, "\"\\")}
	for i := 0; i < len(name) && i < 16; i++ {
		fn.w[i/8] |= uint64(name[i]) << (8 * (i % 8))
		fn.m[i/8] |= 0xff << (8 * (i % 8))
	}
	return fn
}

// at reports whether b holds, from i, this name and then a closing quote
// (a key equal to the name: the name has no quote or backslash).
func (fn *fastName) at(b []byte, i int) bool {
	if !fn.simple || i+16 > len(b) || i+fn.n >= len(b) || b[i+fn.n] != '"' {
		return false
	}
	return binary.LittleEndian.Uint64(b[i:])&fn.m[0] == fn.w[0] &&
		binary.LittleEndian.Uint64(b[i+8:])&fn.m[1] == fn.w[1]
}

// fastVal is where one field's value is in the record.
type fastVal struct {
	set        bool
	t          fastjson.Type
	start, end int // the string's content, or the number token
}

// maxFastKeys bounds the key positions fastState remembers.
const maxFastKeys = 64

func (s *fastState) init(fields []Field) {
	s.vals = make([]fastVal, len(fields))
	s.names = make([]fastName, len(fields))
	for i, f := range fields {
		s.names[i] = newFastName(f.Name)
	}
	s.order = make([]int32, maxFastKeys)
	for i := range s.order {
		s.order[i] = -1
	}
}

// isWS is fastjson's whitespace.
func isWS(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

// isNumberByte is what fastjson's parseRawNumber takes into a number.
func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == '-' || c == 'e' || c == 'E' || c == '+'
}

// quoteOrBackslash returns the index in b, from i, of the first '"' or
// '\\' (len(b): none), eight bytes at a time.
func quoteOrBackslash(b []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q, s := x^(ones*'"'), x^(ones*'\\')
		// A byte of q or s is zero where b has the byte; the lowest flag
		// is exact (a borrow only flags bytes above a zero byte).
		if m := ((q-ones)&^q | (s-ones)&^s) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(b); i++ {
		if b[i] == '"' || b[i] == '\\' {
			return i
		}
	}
	return len(b)
}

// field returns the field named key (-1: none), trying the field the k-th
// key matched last time first.
func (d *Decoder) field(k int, key []byte) int {
	s := &d.fast
	if k < len(s.order) {
		if f := s.order[k]; f >= 0 && d.fields[f].Name == string(key) {
			return int(f)
		}
	}
	f := -1
	if d.index != nil {
		if i, ok := d.index[string(key)]; ok {
			f = i
		}
	} else {
		for i := range d.fields {
			if d.fields[i].Name == string(key) {
				f = i
				break
			}
		}
	}
	if k < len(s.order) {
		s.order[k] = int32(f)
	}
	return f
}

// decodeFast decodes data when it has the common shape and converts
// without a reason; ok false says nothing about data (see above).
func (d *Decoder) decodeFast(data []byte, dst Row) (Row, bool) {
	vals := d.fast.vals
	clear(vals)
	n := len(data)
	i := skipWS(data, 0)
	if i >= n || data[i] != '{' {
		return dst, false
	}
	i = skipWS(data, i+1)
	if i >= n {
		return dst, false
	}
	if data[i] == '}' {
		i++
	} else {
		for k := 0; ; k++ {
			// A key: no escape.
			if data[i] != '"' {
				return dst, false
			}
			ks := i + 1
			f := -1
			if k < len(d.fast.order) {
				// The name this key position had last time, in place.
				if g := d.fast.order[k]; g >= 0 && d.fast.names[g].at(data, ks) {
					f = int(g)
					i = skipWS(data, ks+d.fast.names[g].n+1)
				}
			}
			if f < 0 {
				q := quoteOrBackslash(data, ks)
				if q == n || data[q] != '"' {
					return dst, false
				}
				f = d.field(k, data[ks:q])
				i = skipWS(data, q+1)
			}
			if i >= n || data[i] != ':' {
				return dst, false
			}
			i = skipWS(data, i+1)
			if i >= n {
				return dst, false
			}
			// A value: a string without escapes, a number token, true,
			// false or null.
			var v fastVal
			switch c := data[i]; c {
			case '"':
				vs := i + 1
				q := quoteOrBackslash(data, vs)
				if q == n || data[q] != '"' {
					return dst, false
				}
				v = fastVal{set: true, t: fastjson.TypeString, start: vs, end: q}
				i = q + 1
			case 't':
				if !bytes.HasPrefix(data[i:], []byte("true")) {
					return dst, false
				}
				v = fastVal{set: true, t: fastjson.TypeTrue}
				i += 4
			case 'f':
				if !bytes.HasPrefix(data[i:], []byte("false")) {
					return dst, false
				}
				v = fastVal{set: true, t: fastjson.TypeFalse}
				i += 5
			case 'n':
				if !bytes.HasPrefix(data[i:], []byte("null")) {
					return dst, false // or nan, which fastjson reads as a number
				}
				v = fastVal{set: true, t: fastjson.TypeNull}
				i += 4
			default:
				j := i
				for j < n && isNumberByte(data[j]) {
					j++
				}
				// fastjson reads a token of no such byte, or a lone sign,
				// as inf or nan if it can; and one that runs to the end
				// of the record is an unclosed object.
				if j == i || j == i+1 && (c == '-' || c == '+') || j == n {
					return dst, false
				}
				v = fastVal{set: true, t: fastjson.TypeNumber, start: i, end: j}
				i = j
			}
			if f >= 0 {
				vals[f] = v // the last of repeated keys wins, as in the full path
			}
			i = skipWS(data, i)
			if i >= n {
				return dst, false
			}
			if data[i] == ',' {
				i = skipWS(data, i+1)
				if i >= n {
					return dst, false
				}
				continue
			}
			if data[i] != '}' {
				return dst, false
			}
			i++
			break
		}
	}
	if skipWS(data, i) != n {
		return dst, false
	}

	nf := len(d.fields)
	if cap(dst) < nf {
		dst = make(Row, nf)
	} else {
		dst = dst[:nf]
	}
	for f := range d.fields {
		fd, v := &d.fields[f], &vals[f]
		text := data[v.start:v.end]
		if v.t == fastjson.TypeString && v.set {
			// The common cases, as value would convert them.
			switch fd.Kind {
			case String:
				if fd.Unused {
					dst[f] = Value{}
				} else {
					dst[f] = Value{Kind: String, S: string(text)}
				}
				continue
			case Timestamp:
				if us, ok := fastTimestamp(text, d.session); ok {
					if fd.Unused {
						dst[f] = Value{}
					} else {
						dst[f] = Value{Kind: Timestamp, I: us}
					}
					continue
				}
			}
		}
		val, reason := d.value(fd, v.set, v.t, text, nil)
		if reason != "" {
			return dst[:0], false
		}
		dst[f] = val
	}
	return dst, true
}
