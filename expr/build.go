package expr

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/row"
)

// intervalKind is the kind of a day-time interval (Spark's
// DayTimeIntervalType), which only INTERVAL literals have: values hold
// microseconds in I. No row column has it.
const intervalKind row.Kind = 200

// IntervalType is Spark's interval day to second.
var IntervalType = Type{Kind: intervalKind}

// IsInterval reports an interval type.
func (t Type) IsInterval() bool { return t.Kind == intervalKind }

// Interval returns an INTERVAL literal of us microseconds.
func Interval(us int64) *Expr {
	return Literal(row.Value{Kind: row.Long, I: us}, IntervalType)
}

// FormatInterval prints microseconds as an INTERVAL literal with the
// largest units that divide it.
func FormatInterval(us int64) string {
	d := time.Duration(us) * time.Microsecond
	units := []struct {
		name string
		d    time.Duration
	}{{"DAYS", 24 * time.Hour}, {"HOURS", time.Hour}, {"MINUTES", time.Minute}, {"SECONDS", time.Second}, {"MILLISECONDS", time.Millisecond}, {"MICROSECONDS", time.Microsecond}}
	if d == 0 {
		return "INTERVAL '0' SECONDS"
	}
	var parts []string
	neg := d < 0
	if neg {
		d = -d
	}
	for _, u := range units {
		if n := d / u.d; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, u.name))
			d -= n * u.d
		}
	}
	s := strings.Join(parts, " ")
	if neg {
		return "INTERVAL -" + s
	}
	return "INTERVAL " + s
}

// TypeError is a builder's refusal: the expression as Spark prints it and
// the reason, in Spark's words where Spark has them
// (DATATYPE_MISMATCH...).
type TypeError struct {
	Expr   string
	Reason string
}

func (e *TypeError) Error() string {
	return fmt.Sprintf("cannot resolve %s due to data type mismatch: %s", e.Expr, e.Reason)
}

func mismatch(e string, format string, args ...any) error {
	return &TypeError{Expr: e, Reason: fmt.Sprintf(format, args...)}
}

// castTo wraps e in an implicit cast to t (none when e already has t). A
// NULL literal just takes the type.
func castTo(e *Expr, t Type) *Expr {
	if e.Type == t {
		return e
	}
	if e.Op == OpLiteral && e.Val.Kind == row.Null {
		return Literal(row.Value{}, t)
	}
	// Constant folding of numeric literals (their casts do not depend on
	// the session time zone), so that col > 1 compares with a literal.
	if e.Op == OpLiteral && !e.Type.Array && e.Type.Kind != intervalKind && (e.Type.IsNumeric() || e.Type.Kind == row.Bool) && (t.IsNumeric() || t.Kind == row.Bool) {
		if v := castFunc(e.Type, t, Env{})(e.Val); v.Kind != row.Null {
			return Literal(v, t)
		}
	}
	return &Expr{Op: OpCast, Type: t, Args: []*Expr{e}}
}

// implicitCast is Spark's ImplicitTypeCasts.implicitCast (non-ANSI): the
// casts Spark inserts when an operator or function expects another type.
func implicitCast(e *Expr, want Type) (*Expr, bool) {
	from := e.Type
	if from == want {
		return e, true
	}
	if from.Array || want.Array || from.Kind == intervalKind || want.Kind == intervalKind {
		return nil, false
	}
	switch {
	case from.Kind == row.Null:
		return castTo(e, want), true
	case from.IsNumeric() && want.IsNumeric():
		if want.Kind == row.Decimal && from.isIntegral() && want.Precision == 0 {
			want = from.asDecimal()
		}
		return castTo(e, want), true
	case from.Kind == row.String && (want.IsNumeric() || want.Kind == row.Date || want.Kind == row.Timestamp || want.Kind == row.Bool):
		return castTo(e, want), true
	case want.Kind == row.String:
		return castTo(e, want), true
	case from.Kind == row.Date && want.Kind == row.Timestamp, from.Kind == row.Timestamp && want.Kind == row.Date:
		return castTo(e, want), true
	}
	return nil, false
}

// expect casts e to want implicitly or explains why it cannot.
func expect(fn string, i int, e *Expr, want Type) (*Expr, error) {
	c, ok := implicitCast(e, want)
	if !ok {
		return nil, mismatch(fn, "parameter %d requires the %s type, however %s has the type %s", i+1, strings.ToUpper(want.String()), e, strings.ToUpper(e.Type.String()))
	}
	return c, nil
}

// Not is NOT e.
func Not(e *Expr) (*Expr, error) {
	c, err := expect("(NOT "+e.String()+")", 0, e, BoolType)
	if err != nil {
		return nil, err
	}
	return &Expr{Op: OpNot, Type: BoolType, Args: []*Expr{c}}, nil
}

// IsNull is e IS NULL (not: IS NOT NULL).
func IsNull(e *Expr, not bool) *Expr {
	op := OpIsNull
	if not {
		op = OpIsNotNull
	}
	return &Expr{Op: op, Type: BoolType, Args: []*Expr{e}}
}

// Neg is -e.
func Neg(e *Expr) (*Expr, error) {
	if e.Type.Kind == row.String {
		e = castTo(e, DoubleType)
	}
	if !e.Type.IsNumeric() && e.Type.Kind != intervalKind {
		return nil, mismatch("(- "+e.String()+")", "the operand has the type %s, not a numeric type", strings.ToUpper(e.Type.String()))
	}
	if e.Op == OpLiteral && e.Type.Kind == intervalKind {
		return Interval(-e.Val.I), nil
	}
	return &Expr{Op: OpNeg, Type: e.Type, Args: []*Expr{e}}, nil
}

// comparisonType is Spark's findCommonTypeForBinaryComparison (non-ANSI,
// castDatetimeToString off) then findTightestCommonType.
func comparisonType(a, b Type) (Type, bool) {
	if a.Array || b.Array || a.Kind == intervalKind || b.Kind == intervalKind {
		if a == b && a.Kind == intervalKind {
			return a, true
		}
		return Type{}, false
	}
	switch {
	case a.Kind == row.String && b.Kind == row.Decimal, a.Kind == row.Decimal && b.Kind == row.String:
		return DoubleType, true
	case a.Kind == row.String && b.Kind != row.String && b.Kind != row.Null:
		return b, true
	case b.Kind == row.String && a.Kind != row.String && a.Kind != row.Null:
		return a, true
	}
	return tightestCommon(a, b)
}

// Binary builds l op r for a comparison, AND/OR, or arithmetic operator,
// with Spark's type coercion.
func Binary(op Op, l, r *Expr) (*Expr, error) {
	text := "(" + l.String() + " " + opSymbols[op] + " " + r.String() + ")"
	switch op {
	case OpAnd, OpOr:
		lc, err := expect(text, 0, l, BoolType)
		if err != nil {
			return nil, err
		}
		rc, err := expect(text, 1, r, BoolType)
		if err != nil {
			return nil, err
		}
		return &Expr{Op: op, Type: BoolType, Args: []*Expr{lc, rc}}, nil
	case OpEq, OpNullSafeEq, OpNe, OpLt, OpLe, OpGt, OpGe:
		t, ok := comparisonType(l.Type, r.Type)
		if !ok {
			return nil, mismatch(text, "the left and right operands of the binary operator have incompatible types (%s and %s)",
				strings.ToUpper(l.Type.String()), strings.ToUpper(r.Type.String()))
		}
		if t.Kind == row.Null {
			t = BoolType
		}
		return &Expr{Op: op, Type: BoolType, Args: []*Expr{castTo(l, t), castTo(r, t)}}, nil
	case OpAdd, OpSub, OpMul, OpDiv, OpIntDiv, OpMod:
		return arithmetic(op, text, l, r)
	}
	return nil, fmt.Errorf("unknown binary operator %d", op)
}

func arithmetic(op Op, text string, l, r *Expr) (*Expr, error) {
	lt, rt := l.Type, r.Type
	// Dates and timestamps with intervals and days.
	if lt.Kind == intervalKind || rt.Kind == intervalKind {
		if op == OpAdd && lt.Kind == intervalKind && rt.Kind != intervalKind {
			l, r, lt, rt = r, l, rt, lt
		}
		if (op == OpAdd || op == OpSub) && rt.Kind == intervalKind && (lt.Kind == row.Timestamp || lt.Kind == row.Date || lt.Kind == row.String) {
			if op == OpSub {
				r = Interval(-r.Val.I)
			}
			return &Expr{Op: OpAddInterval, Type: TimestampType, Args: []*Expr{castTo(l, TimestampType), r}}, nil
		}
		return nil, mismatch(text, "intervals can only be added to or subtracted from a timestamp or a date here (%s and %s)",
			strings.ToUpper(lt.String()), strings.ToUpper(rt.String()))
	}
	if lt.Kind == row.Date && (op == OpAdd || op == OpSub) && (rt.Kind == row.Int || rt.Kind == row.Long) {
		days := castTo(r, IntType)
		if op == OpSub {
			n, err := Neg(days)
			if err != nil {
				return nil, err
			}
			days = n
		}
		return &Expr{Op: OpCall, Name: "date_add", Type: DateType, Args: []*Expr{l, days}}, nil
	}
	// PromoteStrings: a string in arithmetic is a double.
	if lt.Kind == row.String {
		l, lt = castTo(l, DoubleType), DoubleType
	}
	if rt.Kind == row.String {
		r, rt = castTo(r, DoubleType), DoubleType
	}
	if lt.Kind == row.Null && rt.Kind == row.Null {
		l, r, lt, rt = castTo(l, DoubleType), castTo(r, DoubleType), DoubleType, DoubleType
	}
	if lt.Kind == row.Null {
		l, lt = castTo(l, rt), rt
	}
	if rt.Kind == row.Null {
		r, rt = castTo(r, lt), lt
	}
	if !lt.IsNumeric() || !rt.IsNumeric() {
		return nil, mismatch(text, "the binary operator requires numeric operands, not %s and %s",
			strings.ToUpper(lt.String()), strings.ToUpper(rt.String()))
	}
	if op == OpIntDiv {
		// IntegralDivide takes bigint or decimal and returns bigint.
		if lt.Kind == row.Decimal || rt.Kind == row.Decimal {
			if lt.Kind == row.Double || rt.Kind == row.Double {
				return &Expr{Op: op, Type: LongType, Args: []*Expr{castTo(l, LongType), castTo(r, LongType)}}, nil
			}
			dl, dr := decimalOperand(l, r), decimalOperand(r, l)
			return &Expr{Op: op, Type: LongType, Args: []*Expr{dl, dr}}, nil
		}
		return &Expr{Op: op, Type: LongType, Args: []*Expr{castTo(l, LongType), castTo(r, LongType)}}, nil
	}
	switch {
	case lt.Kind == row.Double || rt.Kind == row.Double:
		return &Expr{Op: op, Type: DoubleType, Args: []*Expr{castTo(l, DoubleType), castTo(r, DoubleType)}}, nil
	case lt.Kind == row.Decimal || rt.Kind == row.Decimal:
		dl, dr := decimalOperand(l, r), decimalOperand(r, l)
		return &Expr{Op: op, Type: decimalResult(op, dl.Type, dr.Type), Args: []*Expr{dl, dr}}, nil
	case op == OpDiv:
		return &Expr{Op: op, Type: DoubleType, Args: []*Expr{castTo(l, DoubleType), castTo(r, DoubleType)}}, nil
	case lt.Kind == row.Long || rt.Kind == row.Long:
		return &Expr{Op: op, Type: LongType, Args: []*Expr{castTo(l, LongType), castTo(r, LongType)}}, nil
	}
	return &Expr{Op: op, Type: IntType, Args: []*Expr{l, r}}, nil
}

// decimalOperand casts an integral operand of a decimal operation to
// decimal: an integer literal to the fewest digits that hold it (Spark's
// literalPickMinimumPrecision), a column to decimal(10,0) or (20,0).
func decimalOperand(e, other *Expr) *Expr {
	if e.Type.Kind == row.Decimal {
		return e
	}
	if e.Op == OpLiteral && e.Type.isIntegral() && e.Val.Kind != row.Null {
		n := len(strconv.FormatInt(e.Val.I, 10))
		if e.Val.I < 0 {
			n--
		}
		t := DecimalType(n, 0)
		v, _ := decimalFromInt(e.Val.I, t)
		return Literal(v, t)
	}
	return castTo(e, e.Type.asDecimal())
}

// decimalResult is Spark's DecimalPrecision result type of a decimal
// operation (allowPrecisionLoss on).
func decimalResult(op Op, a, b Type) Type {
	p1, s1, p2, s2 := int(a.Precision), int(a.Scale), int(b.Precision), int(b.Scale)
	switch op {
	case OpAdd, OpSub:
		s := max(s1, s2)
		return adjustPrecisionScale(max(p1-s1, p2-s2)+s+1, s)
	case OpMul:
		return adjustPrecisionScale(p1+p2+1, s1+s2)
	case OpDiv:
		s := max(6, s1+p2+1)
		return adjustPrecisionScale(p1-s1+s2+s, s)
	case OpMod:
		s := max(s1, s2)
		return adjustPrecisionScale(min(p1-s1, p2-s2)+s, s)
	}
	return DecimalType(p1, s1)
}

// In builds e IN (list).
func In(e *Expr, list []*Expr) (*Expr, error) {
	t := e.Type
	for _, x := range list {
		c, ok := comparisonType(t, x.Type)
		if !ok {
			return nil, mismatch("("+e.String()+" IN (...))", "the input %s and the list value %s have incompatible types (%s and %s)", e, x, strings.ToUpper(t.String()), strings.ToUpper(x.Type.String()))
		}
		t = c
	}
	args := []*Expr{castTo(e, t)}
	for _, x := range list {
		args = append(args, castTo(x, t))
	}
	return &Expr{Op: OpIn, Type: BoolType, Args: args}, nil
}

// commonType finds the type branches (CASE, COALESCE, IF, greatest) agree
// on, as Spark's findWiderCommonType: numeric widening, else a string
// wins when one branch is a string.
func commonType(what string, es []*Expr) (Type, error) {
	t := NullType
	for _, e := range es {
		c, ok := tightestCommon(t, e.Type)
		if !ok && !t.Array && !e.Type.Array && (t.Kind == row.String || e.Type.Kind == row.String) && t.Kind != intervalKind && e.Type.Kind != intervalKind {
			c, ok = StringType, true
		}
		if !ok {
			return Type{}, mismatch(what, "the input types %s and %s have no common type", strings.ToUpper(t.String()), strings.ToUpper(e.Type.String()))
		}
		t = c
	}
	return t, nil
}

// Case builds CASE WHEN c1 THEN v1 ... [ELSE e] END.
func Case(whens, thens []*Expr, els *Expr) (*Expr, error) {
	vals := append([]*Expr(nil), thens...)
	if els != nil {
		vals = append(vals, els)
	}
	t, err := commonType("CASE WHEN ...", vals)
	if err != nil {
		return nil, err
	}
	var args []*Expr
	for i := range whens {
		c, err := expect("CASE WHEN", 0, whens[i], BoolType)
		if err != nil {
			return nil, err
		}
		args = append(args, c, castTo(thens[i], t))
	}
	if els != nil {
		args = append(args, castTo(els, t))
	}
	return &Expr{Op: OpCase, Type: t, Args: args}, nil
}

// SimpleCase builds CASE x WHEN v1 THEN r1 ... END as CASE WHEN x = v1 ...
func SimpleCase(x *Expr, vals, thens []*Expr, els *Expr) (*Expr, error) {
	whens := make([]*Expr, len(vals))
	for i, v := range vals {
		w, err := Binary(OpEq, x, v)
		if err != nil {
			return nil, err
		}
		whens[i] = w
	}
	return Case(whens, thens, els)
}

// Coalesce builds coalesce(args...).
func Coalesce(args []*Expr) (*Expr, error) {
	if len(args) == 0 {
		return nil, mismatch("coalesce()", "coalesce requires at least one argument")
	}
	t, err := commonType("coalesce(...)", args)
	if err != nil {
		return nil, err
	}
	out := make([]*Expr, len(args))
	for i, a := range args {
		out[i] = castTo(a, t)
	}
	return &Expr{Op: OpCoalesce, Type: t, Args: out}, nil
}

// If builds if(cond, a, b).
func If(cond, a, b *Expr) (*Expr, error) {
	c, err := expect("if", 0, cond, BoolType)
	if err != nil {
		return nil, err
	}
	t, err := commonType("if(...)", []*Expr{a, b})
	if err != nil {
		return nil, err
	}
	return &Expr{Op: OpIf, Type: t, Args: []*Expr{c, castTo(a, t), castTo(b, t)}}, nil
}

// NullIf builds nullif(a, b): if(a = b, NULL, a).
func NullIf(a, b *Expr) (*Expr, error) {
	eq, err := Binary(OpEq, a, b)
	if err != nil {
		return nil, err
	}
	return If(eq, Literal(row.Value{}, a.Type), a)
}

// Like builds e LIKE pattern [ESCAPE esc].
func Like(e, pattern *Expr, escape rune) (*Expr, error) {
	l, err := expect("LIKE", 0, e, StringType)
	if err != nil {
		return nil, err
	}
	p, err := expect("LIKE", 1, pattern, StringType)
	if err != nil {
		return nil, err
	}
	if p.Op == OpLiteral && p.Val.Kind == row.String {
		if _, err := compileLike(p.Val.S, escape); err != nil {
			return nil, err
		}
	}
	return &Expr{Op: OpLike, Type: BoolType, Args: []*Expr{l, p}, Val: row.StringValue(string(escape))}, nil
}

// Cast builds CAST(e AS t), refusing the casts Spark's Cast.canCast
// refuses.
func Cast(e *Expr, t Type) (*Expr, error) {
	from := e.Type
	ok := false
	switch {
	case from == t, from.Kind == row.Null:
		ok = true
	case from.Array || t.Array || from.Kind == intervalKind || t.Kind == intervalKind:
	case t.Kind == row.String, from.Kind == row.String:
		ok = true
	case t.IsNumeric() || t.Kind == row.Bool:
		ok = from.IsNumeric() || from.Kind == row.Bool || from.Kind == row.Timestamp || from.Kind == row.Date
	case t.Kind == row.Timestamp:
		ok = from.IsNumeric() || from.Kind == row.Bool || from.Kind == row.Date
	case t.Kind == row.Date:
		ok = from.Kind == row.Timestamp
	}
	if !ok {
		return nil, mismatch("CAST("+e.String()+" AS "+strings.ToUpper(t.String())+")", "cannot cast %s to %s", strings.ToUpper(from.String()), strings.ToUpper(t.String()))
	}
	if from == t {
		return e, nil
	}
	return &Expr{Op: OpCast, Type: t, Args: []*Expr{e}}, nil
}

// Index builds arr[i] over split's array (0-based; out of range is null).
func Index(arr, i *Expr) (*Expr, error) {
	if !arr.Type.Array {
		return nil, mismatch(arr.String()+"["+i.String()+"]", "the operand has the type %s: only an array (split's result) can be indexed", strings.ToUpper(arr.Type.String()))
	}
	ic, err := expect("[]", 1, i, IntType)
	if err != nil {
		return nil, err
	}
	et := arr.Type
	et.Array = false
	return &Expr{Op: OpIndex, Type: et, Args: []*Expr{arr, ic}}, nil
}
