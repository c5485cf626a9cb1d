package agg

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/axiomhq/hyperloglog"

	"github.com/sluicehq/sluice/row"
)

// Acc is one measure's accumulator for one group. Which fields are used
// depends on the function:
//
//	count                  N
//	sum                    Has, I (long) or F (double)
//	min, max               Has, and the value: K, with I, F or S
//	avg                    N, F (sum as double)
//	approx_count_distinct  H
//
// min and max keep their value in the fields of its kind rather than in a
// row.Value: an Acc is 56 bytes, not 80, and map and reduce tasks hold
// one per group and measure (their slices were most of a batch's
// allocations at a million groups).
type Acc struct {
	N   int64
	I   int64
	F   float64
	S   string
	H   *hyperloglog.Sketch
	Has bool
	K   row.Kind
}

// value is min's or max's value.
func (a *Acc) value() row.Value { return row.Value{Kind: a.K, I: a.I, F: a.F, S: a.S} }

// set makes v min's or max's value.
func (a *Acc) set(v row.Value) { a.K, a.I, a.F, a.S, a.Has = v.Kind, v.I, v.F, v.S, true }

// update folds one input value into the accumulator.
func (m *Measure) update(a *Acc, r row.Row, scratch []byte) []byte {
	if m.Col < 0 { // count(*)
		a.N++
		return scratch
	}
	v := r[m.Col]
	if v.Kind == row.Null {
		return scratch
	}
	switch m.op {
	case opCount:
		a.N++
	case opSum:
		a.Has = true
		if v.Kind == row.Double {
			a.F += v.F
		} else {
			a.I += v.I
		}
	case opAvg:
		a.N++
		a.F += v.Float()
	case opMin:
		if !a.Has || row.Compare(v, a.value()) < 0 {
			a.set(v)
		}
	case opMax:
		if !a.Has || row.Compare(v, a.value()) > 0 {
			a.set(v)
		}
	case opApproxCountDistinct:
		if a.H == nil {
			a.H = hyperloglog.New14()
		}
		scratch = appendValue(scratch[:0], v)
		a.H.Insert(scratch)
	}
	return scratch
}

// merge folds accumulator b into a.
func (m *Measure) merge(a, b *Acc) {
	switch m.op {
	case opCount:
		a.N += b.N
	case opSum:
		a.Has = a.Has || b.Has
		a.I += b.I
		a.F += b.F
	case opAvg:
		a.N += b.N
		a.F += b.F
	case opMin:
		if b.Has && (!a.Has || row.Compare(b.value(), a.value()) < 0) {
			a.set(b.value())
		}
	case opMax:
		if b.Has && (!a.Has || row.Compare(b.value(), a.value()) > 0) {
			a.set(b.value())
		}
	case opApproxCountDistinct:
		if b.H == nil {
			return
		}
		if a.H == nil {
			a.H = b.H.Clone()
			return
		}
		// Merge fails only on differing precisions; all sketches are New14.
		_ = a.H.Merge(b.H)
	}
}

// result is the measure's output value.
func (m *Measure) result(a *Acc) row.Value {
	switch m.op {
	case opCount:
		return row.LongValue(a.N)
	case opSum:
		if !a.Has {
			return row.Value{}
		}
		if m.Kind == row.Double {
			return row.DoubleValue(a.F)
		}
		return row.LongValue(a.I)
	case opAvg:
		if a.N == 0 {
			return row.Value{}
		}
		return row.DoubleValue(a.F / float64(a.N))
	case opMin, opMax:
		if !a.Has {
			return row.Value{}
		}
		return a.value()
	case opApproxCountDistinct:
		if a.H == nil {
			return row.LongValue(0)
		}
		return row.LongValue(int64(a.H.Estimate()))
	}
	return row.Value{}
}

// accFormat versions the encoding of accumulators in state and shuffle.
const accFormat = 1

// AppendAccs appends the encoding of one group's accumulators.
func (l *Layout) AppendAccs(b []byte, accs []Acc) []byte {
	b = append(b, accFormat)
	for i := range l.Measures {
		a := &accs[i]
		switch l.Measures[i].op {
		case opCount:
			b = binary.AppendVarint(b, a.N)
		case opSum:
			b = appendBool(b, a.Has)
			b = binary.AppendVarint(b, a.I)
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(a.F))
		case opAvg:
			b = binary.AppendVarint(b, a.N)
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(a.F))
		case opMin, opMax:
			b = appendBool(b, a.Has)
			if a.Has {
				b = appendValue(b, a.value())
			}
		case opApproxCountDistinct:
			if a.H == nil {
				b = binary.AppendUvarint(b, 0)
				continue
			}
			hb, _ := a.H.MarshalBinary()
			b = binary.AppendUvarint(b, uint64(len(hb)))
			b = append(b, hb...)
		}
	}
	return b
}

// DecodeAccs decodes one group's accumulators into dst (len = measures).
func (l *Layout) DecodeAccs(b []byte, dst []Acc) error {
	if len(b) == 0 || b[0] != accFormat {
		return fmt.Errorf("decode aggregate: unknown format")
	}
	b = b[1:]
	var err error
	for i := range l.Measures {
		a := &dst[i]
		*a = Acc{}
		m := &l.Measures[i]
		switch m.op {
		case opCount:
			a.N, b, err = readVarint(b)
		case opSum:
			a.Has, b, err = readBool(b)
			if err == nil {
				a.I, b, err = readVarint(b)
			}
			if err == nil {
				a.F, b, err = readFloat(b)
			}
		case opAvg:
			a.N, b, err = readVarint(b)
			if err == nil {
				a.F, b, err = readFloat(b)
			}
		case opMin, opMax:
			a.Has, b, err = readBool(b)
			if err == nil && a.Has {
				var v row.Value
				if v, b, err = readValue(b, m.Kind); err == nil {
					a.set(v)
				}
			}
		case opApproxCountDistinct:
			n, k := binary.Uvarint(b)
			if k <= 0 || uint64(len(b)-k) < n {
				return fmt.Errorf("decode aggregate: truncated sketch")
			}
			b = b[k:]
			if n > 0 {
				a.H = hyperloglog.New14()
				if err := a.H.UnmarshalBinary(b[:n]); err != nil {
					return fmt.Errorf("decode aggregate: %w", err)
				}
			}
			b = b[n:]
		}
		if err != nil {
			return fmt.Errorf("decode aggregate %s: %w", m.Fn, err)
		}
	}
	return nil
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func readBool(b []byte) (bool, []byte, error) {
	if len(b) < 1 {
		return false, nil, fmt.Errorf("truncated")
	}
	return b[0] == 1, b[1:], nil
}

func readVarint(b []byte) (int64, []byte, error) {
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, nil, fmt.Errorf("truncated")
	}
	return v, b[n:], nil
}

func readFloat(b []byte) (float64, []byte, error) {
	if len(b) < 8 {
		return 0, nil, fmt.Errorf("truncated")
	}
	return math.Float64frombits(binary.BigEndian.Uint64(b)), b[8:], nil
}
