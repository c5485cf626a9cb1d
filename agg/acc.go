package agg

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"

	"github.com/axiomhq/hyperloglog"

	"github.com/sluicehq/sluice/expr"
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
//
// A decimal sum or average keeps its exact sum as a decimal's unscaled
// integer at the argument's scale: in I while it fits an int64, else in S
// (base-10 digits), as row.Value holds a decimal.
type Acc struct {
	N   int64
	I   int64
	F   float64
	S   string
	H   *hyperloglog.Sketch
	Has bool
	K   row.Kind
	// Scale is a decimal min's or max's scale.
	Scale uint8
}

// value is min's or max's value.
func (a *Acc) value() row.Value { return row.Value{Kind: a.K, Scale: a.Scale, I: a.I, F: a.F, S: a.S} }

// set makes v min's or max's value.
func (a *Acc) set(v row.Value) {
	a.K, a.Scale, a.I, a.F, a.S, a.Has = v.Kind, v.Scale, v.I, v.F, v.S, true
}

// compareValues orders two values of a min or max: decimals by value
// (their digits may be in S), others as row.Compare does.
func compareValues(a, b row.Value) int {
	if a.Kind == row.Decimal && b.Kind == row.Decimal {
		return expr.CompareDecimal(a, b)
	}
	return row.Compare(a, b)
}

// addDecimal adds the unscaled integer (i, s) to the accumulator's exact
// sum (I, S): int64 arithmetic until it overflows, then big.Int.
func (a *Acc) addDecimal(i int64, s string) {
	if a.S == "" && s == "" {
		if sum := a.I + i; (sum > a.I) == (i > 0) {
			a.I = sum
			return
		}
	}
	x := bigOf(a.I, a.S)
	x.Add(x, bigOf(i, s))
	if x.IsInt64() {
		a.I, a.S = x.Int64(), ""
	} else {
		a.I, a.S = 0, x.String()
	}
}

func bigOf(i int64, s string) *big.Int {
	if s == "" {
		return big.NewInt(i)
	}
	x, _ := new(big.Int).SetString(s, 10)
	return x
}

// decimalSum is a decimal sum's value at type t (the argument's scale),
// or null when it does not fit t's precision (Spark's sum and average of
// decimals are null on overflow in the default, non-ANSI, mode).
func decimalSum(a *Acc, t expr.Type) row.Value {
	v, ok := expr.DecimalOf(bigOf(a.I, a.S), t)
	if !ok {
		return row.Value{}
	}
	return v
}

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
		switch v.Kind {
		case row.Double:
			a.F += v.F
		case row.Decimal:
			a.addDecimal(v.I, v.S)
		default:
			a.I += v.I
		}
	case opAvg:
		a.N++
		if v.Kind == row.Decimal {
			a.addDecimal(v.I, v.S)
		} else {
			a.F += v.Float()
		}
	case opMin:
		if !a.Has || compareValues(v, a.value()) < 0 {
			a.set(v)
		}
	case opMax:
		if !a.Has || compareValues(v, a.value()) > 0 {
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
		if m.Kind == row.Decimal {
			a.addDecimal(b.I, b.S)
		} else {
			a.I += b.I
		}
		a.F += b.F
	case opAvg:
		a.N += b.N
		if m.Kind == row.Decimal {
			a.addDecimal(b.I, b.S)
		}
		a.F += b.F
	case opMin:
		if b.Has && (!a.Has || compareValues(b.value(), a.value()) < 0) {
			a.set(b.value())
		}
	case opMax:
		if b.Has && (!a.Has || compareValues(b.value(), a.value()) > 0) {
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
		switch m.Kind {
		case row.Double:
			return row.DoubleValue(a.F)
		case row.Decimal:
			return decimalSum(a, m.Out)
		}
		return row.LongValue(a.I)
	case opAvg:
		if a.N == 0 {
			return row.Value{}
		}
		if m.Kind == row.Decimal {
			// Spark's Average: the sum (decimal(p+10, s), null when it
			// overflows) divided by the count as a decimal(20,0), at
			// decimal(p+4, s+4), HALF_UP, null on overflow.
			sumType := expr.DecimalType(min(int(m.Arg.Precision)+10, expr.MaxPrecision), int(m.Arg.Scale))
			sum := decimalSum(a, sumType)
			if sum.Kind == row.Null {
				return sum
			}
			v, ok := expr.DecimalArith(expr.OpDiv, sum, row.Value{Kind: row.Decimal, I: a.N}, m.Out)
			if !ok {
				return row.Value{}
			}
			return v
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
			if l.Measures[i].Kind == row.Decimal {
				b = appendString(b, a.S)
			}
		case opAvg:
			b = binary.AppendVarint(b, a.N)
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(a.F))
			if l.Measures[i].Kind == row.Decimal {
				b = binary.AppendVarint(b, a.I)
				b = appendString(b, a.S)
			}
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
			if err == nil && m.Kind == row.Decimal {
				a.S, b, err = readString(b)
			}
		case opAvg:
			a.N, b, err = readVarint(b)
			if err == nil {
				a.F, b, err = readFloat(b)
			}
			if err == nil && m.Kind == row.Decimal {
				a.I, b, err = readVarint(b)
				if err == nil {
					a.S, b, err = readString(b)
				}
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

// appendString appends a uvarint length and the bytes (a decimal sum's
// digits past an int64).
func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func readString(b []byte) (string, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return "", nil, fmt.Errorf("truncated")
	}
	return string(b[k : k+int(n)]), b[k+int(n):], nil
}

func readFloat(b []byte) (float64, []byte, error) {
	if len(b) < 8 {
		return 0, nil, fmt.Errorf("truncated")
	}
	return math.Float64frombits(binary.BigEndian.Uint64(b)), b[8:], nil
}
