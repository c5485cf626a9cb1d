package expr

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"

	"github.com/sluicehq/sluice/row"
)

// Evaluator computes an expression over one row. It is safe for
// concurrent use. A non-nil error is an *EvalError: the row cannot be
// evaluated as Spark would (Spark fails the query; the caller sets the
// record aside as malformed with the error as its reason).
type Evaluator func(r row.Row) (row.Value, error)

// Env is what an expression's value depends on besides the row: the
// session time zone of string/timestamp casts and of the date and time
// functions (nil: UTC).
type Env struct {
	Zone *row.Zone
}

func (env Env) zone() *row.Zone {
	if env.Zone == nil {
		return row.UTC
	}
	return env.Zone
}

// EvalError says why a row could not be evaluated: the expression as
// Spark prints it and the reason. It matches row.ErrMalformed.
type EvalError struct {
	Expr   string
	Reason string
}

func (e *EvalError) Error() string { return fmt.Sprintf("evaluate %s: %s", e.Expr, e.Reason) }

// Is makes an *EvalError match row.ErrMalformed, so a caller that sets
// malformed records aside handles it as it handles a decoding failure.
func (e *EvalError) Is(target error) bool { return target == row.ErrMalformed }

// ErrEval matches every *EvalError through errors.As; kept for callers
// that only test.
var _ error = (*EvalError)(nil)

// IsEvalError reports whether err is an evaluation failure of a row.
func IsEvalError(err error) bool {
	var e *EvalError
	return errors.As(err, &e)
}

type fn = func(r row.Row) (row.Value, error)

var (
	null  = row.Value{}
	vTrue = row.Value{Kind: row.Bool, I: 1}
	vFals = row.Value{Kind: row.Bool}
)

func boolV(b bool) row.Value {
	if b {
		return vTrue
	}
	return vFals
}

// Compile turns e into an Evaluator. Patterns and formats given as
// literals are compiled here, once.
func Compile(e *Expr, env Env) (Evaluator, error) {
	f, err := compile(e, env)
	if err != nil {
		return nil, err
	}
	return Evaluator(f), nil
}

func compileArgs(es []*Expr, env Env) ([]fn, error) {
	out := make([]fn, len(es))
	for i, a := range es {
		f, err := compile(a, env)
		if err != nil {
			return nil, err
		}
		out[i] = f
	}
	return out, nil
}

func compile(e *Expr, env Env) (fn, error) {
	switch e.Op {
	case OpColumn:
		c := e.Col
		return func(r row.Row) (row.Value, error) { return r[c], nil }, nil
	case OpLiteral:
		v := e.Val
		return func(row.Row) (row.Value, error) { return v, nil }, nil
	case OpCast:
		return compileCast(e, env)
	case OpNot:
		a, err := compile(e.Args[0], env)
		if err != nil {
			return nil, err
		}
		return func(r row.Row) (row.Value, error) {
			v, err := a(r)
			if err != nil || v.Kind == row.Null {
				return null, err
			}
			return boolV(v.I == 0), nil
		}, nil
	case OpAnd, OpOr:
		return compileLogic(e, env)
	case OpIsNull, OpIsNotNull:
		a, err := compile(e.Args[0], env)
		if err != nil {
			return nil, err
		}
		want := e.Op == OpIsNull
		if e.Args[0].Op == OpColumn {
			c := e.Args[0].Col
			return func(r row.Row) (row.Value, error) { return boolV((r[c].Kind == row.Null) == want), nil }, nil
		}
		return func(r row.Row) (row.Value, error) {
			v, err := a(r)
			if err != nil {
				return null, err
			}
			return boolV((v.Kind == row.Null) == want), nil
		}, nil
	case OpEq, OpNullSafeEq, OpNe, OpLt, OpLe, OpGt, OpGe:
		return compileComparison(e, env)
	case OpAdd, OpSub, OpMul, OpDiv, OpIntDiv, OpMod:
		return compileArith(e, env)
	case OpNeg:
		return compileNeg(e, env)
	case OpAddInterval:
		a, err := compile(e.Args[0], env)
		if err != nil {
			return nil, err
		}
		d := e.Args[1].Val.I
		return func(r row.Row) (row.Value, error) {
			v, err := a(r)
			if err != nil || v.Kind == row.Null {
				return null, err
			}
			return row.TimestampValue(v.I + d), nil
		}, nil
	case OpIn:
		return compileIn(e, env)
	case OpCase:
		args, err := compileArgs(e.Args, env)
		if err != nil {
			return nil, err
		}
		n := len(args)
		return func(r row.Row) (row.Value, error) {
			for i := 0; i+1 < n; i += 2 {
				c, err := args[i](r)
				if err != nil {
					return null, err
				}
				if c.Kind != row.Null && c.I != 0 {
					return args[i+1](r)
				}
			}
			if n%2 == 1 {
				return args[n-1](r)
			}
			return null, nil
		}, nil
	case OpCoalesce:
		args, err := compileArgs(e.Args, env)
		if err != nil {
			return nil, err
		}
		return func(r row.Row) (row.Value, error) {
			for _, a := range args {
				v, err := a(r)
				if err != nil || v.Kind != row.Null {
					return v, err
				}
			}
			return null, nil
		}, nil
	case OpIf:
		args, err := compileArgs(e.Args, env)
		if err != nil {
			return nil, err
		}
		return func(r row.Row) (row.Value, error) {
			c, err := args[0](r)
			if err != nil {
				return null, err
			}
			if c.Kind != row.Null && c.I != 0 {
				return args[1](r)
			}
			return args[2](r)
		}, nil
	case OpLike:
		return compileLikeExpr(e, env)
	case OpCall:
		return compileCall(e, env)
	case OpIndex:
		return compileIndex(e, env)
	}
	return nil, fmt.Errorf("compile %s: unknown operator %d", e, e.Op)
}

func compileLogic(e *Expr, env Env) (fn, error) {
	a, err := compile(e.Args[0], env)
	if err != nil {
		return nil, err
	}
	b, err := compile(e.Args[1], env)
	if err != nil {
		return nil, err
	}
	if e.Op == OpAnd {
		return func(r row.Row) (row.Value, error) {
			x, err := a(r)
			if err != nil {
				return null, err
			}
			if x.Kind != row.Null && x.I == 0 {
				return vFals, nil
			}
			y, err := b(r)
			if err != nil {
				return null, err
			}
			if y.Kind != row.Null && y.I == 0 {
				return vFals, nil
			}
			if x.Kind == row.Null || y.Kind == row.Null {
				return null, nil
			}
			return vTrue, nil
		}, nil
	}
	return func(r row.Row) (row.Value, error) {
		x, err := a(r)
		if err != nil {
			return null, err
		}
		if x.Kind != row.Null && x.I != 0 {
			return vTrue, nil
		}
		y, err := b(r)
		if err != nil {
			return null, err
		}
		if y.Kind != row.Null && y.I != 0 {
			return vTrue, nil
		}
		if x.Kind == row.Null || y.Kind == row.Null {
			return null, nil
		}
		return vFals, nil
	}, nil
}

// compareValues orders two non-null values of one type as Spark does:
// strings by UTF-8 bytes, doubles with NaN above everything and equal to
// itself (and -0.0 equal to 0.0), decimals by value.
func compareValues(a, b row.Value) int {
	switch a.Kind {
	case row.String:
		return strings.Compare(a.S, b.S)
	case row.Double:
		x, y := a.F, b.F
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		case x == y:
			return 0
		}
		xn, yn := math.IsNaN(x), math.IsNaN(y)
		switch {
		case xn && yn:
			return 0
		case xn:
			return 1
		}
		return -1
	case row.Decimal:
		return compareDecimal(a, b)
	default:
		switch {
		case a.I < b.I:
			return -1
		case a.I > b.I:
			return 1
		}
		return 0
	}
}

func cmpResult(op Op, c int) bool {
	switch op {
	case OpEq, OpNullSafeEq:
		return c == 0
	case OpNe:
		return c != 0
	case OpLt:
		return c < 0
	case OpLe:
		return c <= 0
	case OpGt:
		return c > 0
	}
	return c >= 0
}

func compileComparison(e *Expr, env Env) (fn, error) {
	op := e.Op
	l, r := e.Args[0], e.Args[1]
	// Fast paths: a column against a literal, for the integer-like kinds
	// and strings, with no call per operand.
	if l.Op == OpColumn && r.Op == OpLiteral && r.Val.Kind != row.Null && op != OpNullSafeEq {
		c, lit := l.Col, r.Val
		switch lit.Kind {
		case row.Long, row.Int, row.Timestamp, row.Date, row.Bool:
			x := lit.I
			switch op {
			case OpEq:
				return func(rw row.Row) (row.Value, error) {
					v := rw[c]
					if v.Kind == row.Null {
						return null, nil
					}
					return boolV(v.I == x), nil
				}, nil
			case OpLt:
				return func(rw row.Row) (row.Value, error) {
					v := rw[c]
					if v.Kind == row.Null {
						return null, nil
					}
					return boolV(v.I < x), nil
				}, nil
			case OpGe:
				return func(rw row.Row) (row.Value, error) {
					v := rw[c]
					if v.Kind == row.Null {
						return null, nil
					}
					return boolV(v.I >= x), nil
				}, nil
			}
			return func(rw row.Row) (row.Value, error) {
				v := rw[c]
				if v.Kind == row.Null {
					return null, nil
				}
				return boolV(cmpResult(op, compareValues(v, lit))), nil
			}, nil
		case row.String:
			s := lit.S
			if op == OpEq {
				return func(rw row.Row) (row.Value, error) {
					v := rw[c]
					if v.Kind == row.Null {
						return null, nil
					}
					return boolV(v.S == s), nil
				}, nil
			}
			if op == OpNe {
				return func(rw row.Row) (row.Value, error) {
					v := rw[c]
					if v.Kind == row.Null {
						return null, nil
					}
					return boolV(v.S != s), nil
				}, nil
			}
		}
	}
	a, err := compile(l, env)
	if err != nil {
		return nil, err
	}
	b, err := compile(r, env)
	if err != nil {
		return nil, err
	}
	if op == OpNullSafeEq {
		return func(rw row.Row) (row.Value, error) {
			x, err := a(rw)
			if err != nil {
				return null, err
			}
			y, err := b(rw)
			if err != nil {
				return null, err
			}
			if x.Kind == row.Null || y.Kind == row.Null {
				return boolV(x.Kind == y.Kind), nil
			}
			return boolV(compareValues(x, y) == 0), nil
		}, nil
	}
	return func(rw row.Row) (row.Value, error) {
		x, err := a(rw)
		if err != nil || x.Kind == row.Null {
			return null, err
		}
		y, err := b(rw)
		if err != nil || y.Kind == row.Null {
			return null, err
		}
		return boolV(cmpResult(op, compareValues(x, y))), nil
	}, nil
}

func compileArith(e *Expr, env Env) (fn, error) {
	a, err := compile(e.Args[0], env)
	if err != nil {
		return nil, err
	}
	b, err := compile(e.Args[1], env)
	if err != nil {
		return nil, err
	}
	op, t := e.Op, e.Type
	var f func(x, y row.Value) row.Value
	switch {
	case op == OpIntDiv && e.Args[0].Type.Kind == row.Decimal:
		// Truncated quotient of the two values at one scale.
		f = func(x, y row.Value) row.Value {
			sc := max(int(x.Scale), int(y.Scale))
			ux, uy := rescale(unscaled(x), int(x.Scale), sc), rescale(unscaled(y), int(y.Scale), sc)
			if uy.Sign() == 0 {
				return null
			}
			return row.LongValue(int64(lowBits(new(big.Int).Quo(ux, uy))))
		}
	case op == OpIntDiv:
		f = func(x, y row.Value) row.Value {
			if y.I == 0 {
				return null
			}
			if y.I == -1 {
				return row.LongValue(-x.I)
			}
			return row.LongValue(x.I / y.I)
		}
	case t.Kind == row.Int:
		f = func(x, y row.Value) row.Value {
			var z int32
			a, b := int32(x.I), int32(y.I)
			switch op {
			case OpAdd:
				z = a + b
			case OpSub:
				z = a - b
			case OpMul:
				z = a * b
			case OpMod:
				if b == 0 {
					return null
				}
				if b == -1 {
					return row.Value{Kind: row.Int}
				}
				z = a % b
			}
			return row.Value{Kind: row.Int, I: int64(z)}
		}
	case t.Kind == row.Long:
		switch op {
		case OpAdd:
			f = func(x, y row.Value) row.Value { return row.LongValue(x.I + y.I) }
		case OpSub:
			f = func(x, y row.Value) row.Value { return row.LongValue(x.I - y.I) }
		case OpMul:
			f = func(x, y row.Value) row.Value { return row.LongValue(x.I * y.I) }
		case OpMod:
			f = func(x, y row.Value) row.Value {
				if y.I == 0 {
					return null
				}
				if y.I == -1 {
					return row.LongValue(0)
				}
				return row.LongValue(x.I % y.I)
			}
		}
	case t.Kind == row.Double:
		switch op {
		case OpAdd:
			f = func(x, y row.Value) row.Value { return row.DoubleValue(x.F + y.F) }
		case OpSub:
			f = func(x, y row.Value) row.Value { return row.DoubleValue(x.F - y.F) }
		case OpMul:
			f = func(x, y row.Value) row.Value { return row.DoubleValue(x.F * y.F) }
		case OpDiv:
			f = func(x, y row.Value) row.Value {
				if y.F == 0 {
					return null
				}
				return row.DoubleValue(x.F / y.F)
			}
		case OpMod:
			f = func(x, y row.Value) row.Value {
				if y.F == 0 {
					return null
				}
				return row.DoubleValue(math.Mod(x.F, y.F))
			}
		}
	case t.Kind == row.Decimal:
		f = func(x, y row.Value) row.Value {
			v, ok := decimalArith(op, x, y, t)
			if !ok {
				return null
			}
			return v
		}
	}
	if f == nil {
		return nil, fmt.Errorf("compile %s: no arithmetic for %s", e, t)
	}
	return func(r row.Row) (row.Value, error) {
		x, err := a(r)
		if err != nil || x.Kind == row.Null {
			return null, err
		}
		y, err := b(r)
		if err != nil || y.Kind == row.Null {
			return null, err
		}
		return f(x, y), nil
	}, nil
}

func compileNeg(e *Expr, env Env) (fn, error) {
	a, err := compile(e.Args[0], env)
	if err != nil {
		return nil, err
	}
	t := e.Type
	return func(r row.Row) (row.Value, error) {
		v, err := a(r)
		if err != nil || v.Kind == row.Null {
			return null, err
		}
		switch t.Kind {
		case row.Int:
			return row.Value{Kind: row.Int, I: int64(-int32(v.I))}, nil
		case row.Long:
			return row.LongValue(-v.I), nil
		case row.Double:
			return row.DoubleValue(-v.F), nil
		case row.Decimal:
			if v.S == "" && v.I != math.MinInt64 {
				v.I = -v.I
				return v, nil
			}
			out, _ := decimalValue(new(big.Int).Neg(unscaled(v)), t)
			return out, nil
		}
		return null, nil
	}, nil
}

func compileIn(e *Expr, env Env) (fn, error) {
	x, err := compile(e.Args[0], env)
	if err != nil {
		return nil, err
	}
	list := e.Args[1:]
	allLit, hasNull := true, false
	for _, l := range list {
		if l.Op != OpLiteral {
			allLit = false
		} else if l.Val.Kind == row.Null {
			hasNull = true
		}
	}
	kind := e.Args[0].Type.Kind
	if allLit && (kind == row.String || kind == row.Long || kind == row.Int || kind == row.Timestamp || kind == row.Date || kind == row.Bool) {
		strs := map[string]bool{}
		ints := map[int64]bool{}
		for _, l := range list {
			if l.Val.Kind == row.Null {
				continue
			}
			strs[l.Val.S] = true
			ints[l.Val.I] = true
		}
		isStr := kind == row.String
		return func(r row.Row) (row.Value, error) {
			v, err := x(r)
			if err != nil || v.Kind == row.Null {
				return null, err
			}
			if (isStr && strs[v.S]) || (!isStr && ints[v.I]) {
				return vTrue, nil
			}
			if hasNull {
				return null, nil
			}
			return vFals, nil
		}, nil
	}
	items, err := compileArgs(list, env)
	if err != nil {
		return nil, err
	}
	return func(r row.Row) (row.Value, error) {
		v, err := x(r)
		if err != nil || v.Kind == row.Null {
			return null, err
		}
		sawNull := false
		for _, it := range items {
			w, err := it(r)
			if err != nil {
				return null, err
			}
			if w.Kind == row.Null {
				sawNull = true
				continue
			}
			if compareValues(v, w) == 0 {
				return vTrue, nil
			}
		}
		if sawNull {
			return null, nil
		}
		return vFals, nil
	}, nil
}

// Filter is a compiled conjunction of predicates: a row is kept when every
// predicate is true (null and false drop it, as WHERE does).
type Filter struct {
	preds []fn
	texts []string
}

// CompileFilter compiles the conjuncts (boolean expressions) of a WHERE
// or HAVING clause. No conjuncts keeps every row.
func CompileFilter(conjuncts []*Expr, env Env) (*Filter, error) {
	f := &Filter{}
	for _, c := range conjuncts {
		if c.Type != BoolType {
			return nil, fmt.Errorf("compile filter %s: the predicate is a %s, not a boolean", c, c.Type)
		}
		p, err := compile(c, env)
		if err != nil {
			return nil, err
		}
		f.preds = append(f.preds, p)
		f.texts = append(f.texts, c.String())
	}
	return f, nil
}

// Keep reports whether r passes every predicate. An error is an
// *EvalError: set the record aside as malformed with it as the reason.
func (f *Filter) Keep(r row.Row) (bool, error) {
	for _, p := range f.preds {
		v, err := p(r)
		if err != nil {
			return false, err
		}
		if v.Kind == row.Null || v.I == 0 {
			return false, nil
		}
	}
	return true, nil
}

// Projection computes a new row of expressions over an input row.
type Projection struct {
	exprs []fn
	types []Type
}

// CompileProjection compiles the output expressions of a projection.
func CompileProjection(exprs []*Expr, env Env) (*Projection, error) {
	p := &Projection{}
	for _, e := range exprs {
		if e.Type.Array || e.Type.Kind == intervalKind {
			return nil, fmt.Errorf("compile projection: %s has the type %s, which no sink can write", e, e.Type)
		}
		f, err := compile(e, env)
		if err != nil {
			return nil, err
		}
		p.exprs = append(p.exprs, f)
		p.types = append(p.types, e.Type)
	}
	return p, nil
}

// Types returns the output types, in order.
func (p *Projection) Types() []Type { return p.types }

// Apply appends the projected values of r to dst[:0] and returns it (the
// caller may reuse dst across rows once it has consumed the result).
func (p *Projection) Apply(dst, r row.Row) (row.Row, error) {
	dst = dst[:0]
	for _, f := range p.exprs {
		v, err := f(r)
		if err != nil {
			return nil, err
		}
		dst = append(dst, v)
	}
	return dst, nil
}
