package expr

import (
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/row"
)

// Decimal values: the unscaled integer is in Value.I when it fits an
// int64 and in Value.S (base-10 digits) otherwise; Value.Scale is the
// type's scale. Arithmetic works on big.Int (Spark works on
// java.math.BigDecimal past 18 digits too) and rounds HALF_UP, as
// Spark's Decimal.toPrecision does; a result wider than its type's
// precision is null (non-ANSI mode's overflow).

var pow10s = func() [19]int64 {
	var p [19]int64
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

var bigPow10s = func() [2*MaxPrecision + 8]*big.Int {
	var p [2*MaxPrecision + 8]*big.Int
	p[0] = big.NewInt(1)
	ten := big.NewInt(10)
	for i := 1; i < len(p); i++ {
		p[i] = new(big.Int).Mul(p[i-1], ten)
	}
	return p
}()

func bigPow10(n int) *big.Int {
	if n < len(bigPow10s) {
		return bigPow10s[n]
	}
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}

// unscaled returns a decimal value's unscaled integer.
func unscaled(v row.Value) *big.Int {
	if v.S == "" {
		return big.NewInt(v.I)
	}
	u, _ := new(big.Int).SetString(v.S, 10)
	return u
}

// decimalValue makes a value of type t from an unscaled integer already at
// t's scale, or reports false when it needs more than t's precision.
func decimalValue(u *big.Int, t Type) (row.Value, bool) {
	if u.IsInt64() {
		return smallDecimal(u.Int64(), t)
	}
	if new(big.Int).Abs(u).Cmp(bigPow10(int(t.Precision))) >= 0 {
		return row.Value{}, false
	}
	return row.Value{Kind: row.Decimal, Scale: t.Scale, S: u.String()}, true
}

// smallDecimal makes a value from an int64 unscaled integer at t's scale.
func smallDecimal(i int64, t Type) (row.Value, bool) {
	if t.Precision <= 18 && (i >= pow10s[t.Precision] || i <= -pow10s[t.Precision]) {
		return row.Value{}, false
	}
	return row.Value{Kind: row.Decimal, Scale: t.Scale, I: i}, true
}

// rescale returns u (at scale from) at scale to, rounding HALF_UP (away
// from zero on a tie) when digits are dropped.
func rescale(u *big.Int, from, to int) *big.Int {
	switch {
	case to == from:
		return u
	case to > from:
		return new(big.Int).Mul(u, bigPow10(to-from))
	}
	return divHalfUp(u, bigPow10(from-to))
}

// divHalfUp divides rounding half away from zero (RoundingMode.HALF_UP).
func divHalfUp(a, b *big.Int) *big.Int {
	q, r := new(big.Int).QuoRem(a, b, new(big.Int))
	if r.Sign() == 0 {
		return q
	}
	r2 := new(big.Int).Abs(r)
	r2.Lsh(r2, 1)
	if r2.Cmp(new(big.Int).Abs(b)) >= 0 {
		if (a.Sign() < 0) != (b.Sign() < 0) {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return q
}

// toDecimalType converts a decimal value v (scale v.Scale) to type t,
// rounding HALF_UP; false on overflow.
func toDecimalType(v row.Value, t Type) (row.Value, bool) {
	if v.S == "" && int(v.Scale) == int(t.Scale) {
		return smallDecimal(v.I, t)
	}
	return decimalValue(rescale(unscaled(v), int(v.Scale), int(t.Scale)), t)
}

// decimalFromInt converts an integer to decimal type t.
func decimalFromInt(i int64, t Type) (row.Value, bool) {
	if t.Scale <= 18 {
		p := pow10s[t.Scale]
		if hi, lo := mulOverflows(i, p); !hi {
			return smallDecimal(lo, t)
		}
	}
	return decimalValue(new(big.Int).Mul(big.NewInt(i), bigPow10(int(t.Scale))), t)
}

func mulOverflows(a, b int64) (bool, int64) {
	if a == 0 || b == 0 {
		return false, 0
	}
	c := a * b
	if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return true, 0
	}
	return false, c
}

// parseDecimalText reads Java BigDecimal's syntax ([+-]digits[.digits]
// [e[+-]digits], or .digits) into an unscaled integer and scale.
func parseDecimalText(s string) (*big.Int, int, bool) {
	if s == "" {
		return nil, 0, false
	}
	neg := false
	switch s[0] {
	case '+', '-':
		neg = s[0] == '-'
		s = s[1:]
	}
	mant, exp := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp = s[:i], s[i+1:]
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" && frac == "" {
		return nil, 0, false
	}
	for _, c := range intPart + frac {
		if c < '0' || c > '9' {
			return nil, 0, false
		}
	}
	scale := len(frac)
	if exp != "" {
		e, err := strconv.Atoi(exp)
		if err != nil || e > 1000 || e < -1000 {
			return nil, 0, false
		}
		scale -= e
	}
	u, ok := new(big.Int).SetString(intPart+frac, 10)
	if !ok {
		return nil, 0, false
	}
	if neg {
		u.Neg(u)
	}
	return u, scale, true
}

// decimalFromText converts decimal text to type t (HALF_UP); false when it
// is not a number or does not fit.
func decimalFromText(s string, t Type) (row.Value, bool) {
	u, scale, ok := parseDecimalText(s)
	if !ok {
		return row.Value{}, false
	}
	if scale < 0 {
		u = new(big.Int).Mul(u, bigPow10(-scale))
		scale = 0
	}
	return decimalValue(rescale(u, scale, int(t.Scale)), t)
}

// decimalFromDouble converts as Spark's Decimal(d) does: the double's
// shortest decimal text (Double.toString), then to t HALF_UP. NaN and
// infinities give false.
func decimalFromDouble(f float64, t Type) (row.Value, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return row.Value{}, false
	}
	return decimalFromText(strconv.FormatFloat(f, 'e', -1, 64), t)
}

// decimalToDouble converts a decimal value to the nearest double.
func decimalToDouble(v row.Value) float64 {
	if v.S == "" && v.I > -1<<53 && v.I < 1<<53 && v.Scale <= 22 {
		// Exact integer over an exact power of ten: one correctly rounded
		// division.
		return float64(v.I) / math.Pow10(int(v.Scale))
	}
	f, _ := strconv.ParseFloat(row.FormatDecimal(v), 64)
	return f
}

// decimalToLong truncates toward zero and keeps the low 64 bits, as
// java.math.BigDecimal.longValue (non-ANSI CAST to bigint).
func decimalToLong(v row.Value) int64 {
	if v.S == "" {
		if v.Scale == 0 {
			return v.I
		}
		if v.Scale <= 18 {
			return v.I / pow10s[v.Scale]
		}
		return 0
	}
	q := new(big.Int).Quo(unscaled(v), bigPow10(int(v.Scale)))
	return int64(lowBits(q))
}

func lowBits(q *big.Int) uint64 {
	m := new(big.Int).And(new(big.Int).Abs(q), new(big.Int).SetUint64(math.MaxUint64)).Uint64()
	if q.Sign() < 0 {
		return -m
	}
	return m
}

// compareDecimal compares two decimal values of the same scale.
func compareDecimal(a, b row.Value) int {
	if a.S == "" && b.S == "" && a.Scale == b.Scale {
		switch {
		case a.I < b.I:
			return -1
		case a.I > b.I:
			return 1
		}
		return 0
	}
	ua, ub := unscaled(a), unscaled(b)
	return rescale(ua, int(a.Scale), max(int(a.Scale), int(b.Scale))).Cmp(rescale(ub, int(b.Scale), max(int(a.Scale), int(b.Scale))))
}

// decimalArith computes a op b for decimals, at the result type t; false
// on overflow or division by zero.
func decimalArith(op Op, a, b row.Value, t Type) (row.Value, bool) {
	sa, sb := int(a.Scale), int(b.Scale)
	// Fast path: add and subtract of small values at one scale.
	if (op == OpAdd || op == OpSub) && a.S == "" && b.S == "" && sa == sb && sa == int(t.Scale) {
		x, y := a.I, b.I
		if op == OpSub {
			if y == math.MinInt64 {
				goto slow
			}
			y = -y
		}
		if s := x + y; (s > x) == (y > 0) {
			return smallDecimal(s, t)
		}
	}
slow:
	ua, ub := unscaled(a), unscaled(b)
	var r *big.Int
	var scale int
	switch op {
	case OpAdd, OpSub:
		scale = max(sa, sb)
		x, y := rescale(ua, sa, scale), rescale(ub, sb, scale)
		if op == OpAdd {
			r = new(big.Int).Add(x, y)
		} else {
			r = new(big.Int).Sub(x, y)
		}
	case OpMul:
		r, scale = new(big.Int).Mul(ua, ub), sa+sb
	case OpDiv:
		if ub.Sign() == 0 {
			return row.Value{}, false
		}
		// BigDecimal.divide(that, 38, HALF_UP), then toPrecision.
		scale = MaxPrecision
		num := new(big.Int).Mul(ua, bigPow10(scale+sb-sa+0))
		if scale+sb-sa < 0 {
			num = divHalfUp(ua, bigPow10(sa-sb-scale))
		}
		r = divHalfUp(num, ub)
	case OpMod:
		if ub.Sign() == 0 {
			return row.Value{}, false
		}
		scale = max(sa, sb)
		r = new(big.Int).Rem(rescale(ua, sa, scale), rescale(ub, sb, scale))
	}
	return decimalValue(rescale(r, scale, int(t.Scale)), t)
}

// DecimalArith computes a op b (OpAdd, OpSub, OpMul, OpDiv or OpMod) for
// decimal values at the result type t, as the expression of that type
// does: exact, then rounded HALF_UP to t's scale (a division first to 38
// digits, as Spark's Decimal divides); false on overflow of t's precision
// or a division by zero. The aggregates use it for decimal sums and
// averages.
func DecimalArith(op Op, a, b row.Value, t Type) (row.Value, bool) { return decimalArith(op, a, b, t) }

// CompareDecimal orders two decimal values (of any scales).
func CompareDecimal(a, b row.Value) int { return compareDecimal(a, b) }

// DecimalOf returns a decimal value of type t from an unscaled integer
// already at t's scale, or false when it needs more than t's precision.
func DecimalOf(unscaled *big.Int, t Type) (row.Value, bool) { return decimalValue(unscaled, t) }

// Unscaled returns a decimal value's unscaled integer.
func Unscaled(v row.Value) *big.Int { return unscaled(v) }
