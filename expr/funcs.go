package expr

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sluicehq/sluice/row"
)

// Function documents one scalar function for docs/sql.md (a test there
// checks every function is documented).
type Function struct {
	Name    string
	Args    string // the signature's arguments, as Spark's docs write them
	Summary string
}

// Functions lists the scalar functions Call resolves, in the order
// docs/sql.md documents them.
func Functions() []Function { return slices.Clone(functionDocs) }

var functionDocs = []Function{
	{"lower", "str", "str in lower case"},
	{"upper", "str", "str in upper case"},
	{"trim", "str", "str without leading and trailing spaces"},
	{"ltrim", "str", "str without leading spaces"},
	{"rtrim", "str", "str without trailing spaces"},
	{"length", "expr", "the number of characters of a string"},
	{"char_length", "expr", "length"},
	{"character_length", "expr", "length"},
	{"substring", "str, pos[, len]", "the substring from the 1-based pos (negative: from the end), len characters long"},
	{"substr", "str, pos[, len]", "substring"},
	{"concat", "col1, col2, ...", "the strings joined; null when one is null"},
	{"concat_ws", "sep, str1, str2, ...", "the non-null strings joined with sep"},
	{"regexp_extract", "str, regexp[, idx]", "group idx (default 1) of the first match of regexp, or an empty string"},
	{"split", "str, regex[, limit]", "the array of the parts of str around regex matches; index it: split(s, ',')[0]"},
	{"date_trunc", "fmt, ts", "ts truncated to the unit fmt (YEAR, QUARTER, MONTH, WEEK, DAY, HOUR, MINUTE, SECOND, ...) in the session time zone"},
	{"to_date", "date_str[, fmt]", "the date of a string (by the datetime pattern fmt, if given) or of a timestamp"},
	{"date_format", "timestamp, fmt", "the timestamp written by the datetime pattern fmt in the session time zone"},
	{"year", "date", "the year of a date or timestamp"},
	{"month", "date", "the month (1-12) of a date or timestamp"},
	{"day", "date", "the day of the month of a date or timestamp"},
	{"dayofmonth", "date", "day"},
	{"hour", "timestamp", "the hour (0-23) of a timestamp in the session time zone"},
	{"minute", "timestamp", "the minute of a timestamp in the session time zone"},
	{"second", "timestamp", "the second of a timestamp"},
	{"unix_timestamp", "timeExp[, fmt]", "seconds since the epoch of a timestamp, a date, or a string read by fmt (default yyyy-MM-dd HH:mm:ss)"},
	{"from_unixtime", "unix_time[, fmt]", "seconds since the epoch written by fmt (default yyyy-MM-dd HH:mm:ss) in the session time zone"},
	{"abs", "expr", "the absolute value"},
	{"round", "expr[, d]", "expr rounded to d decimal places (default 0) with HALF_UP"},
	{"floor", "expr", "the largest integer not greater than expr"},
	{"ceil", "expr", "the smallest integer not smaller than expr"},
	{"ceiling", "expr", "ceil"},
	{"greatest", "expr, ...", "the greatest non-null value"},
	{"least", "expr, ...", "the least non-null value"},
	{"hash", "expr1, expr2, ...", "Spark's Murmur3 hash of the values (seed 42)"},
	{"coalesce", "expr1, expr2, ...", "the first non-null value"},
	{"nvl", "expr1, expr2", "coalesce of two"},
	{"ifnull", "expr1, expr2", "coalesce of two"},
	{"if", "cond, expr1, expr2", "expr1 when cond is true, else expr2"},
	{"nullif", "expr1, expr2", "null when expr1 = expr2, else expr1"},
	{"isnull", "expr", "expr IS NULL"},
	{"isnotnull", "expr", "expr IS NOT NULL"},
}

// Aggregate functions (resolved by the analyzer, not Call).
var aggregateNames = map[string]bool{
	"count": true, "sum": true, "min": true, "max": true, "avg": true, "mean": true,
	"approx_count_distinct": true,
}

// IsAggregate reports whether name is an aggregate function Sluice knows.
func IsAggregate(name string) bool { return aggregateNames[strings.ToLower(name)] }

// IsFunction reports whether Call resolves name.
func IsFunction(name string) bool {
	name = strings.ToLower(name)
	for _, f := range functionDocs {
		if f.Name == name {
			return true
		}
	}
	return name == "date_add"
}

func wrongArgs(name string, want string, got int) error {
	return &TypeError{Expr: name + "(...)", Reason: fmt.Sprintf("[WRONG_NUM_ARGS] the function %s requires %s parameters but the actual number is %d", name, want, got)}
}

func call(name string, t Type, args ...*Expr) *Expr {
	return &Expr{Op: OpCall, Name: name, Type: t, Args: args}
}

// Call resolves the scalar function name over args with Spark's implicit
// casts and result types.
func Call(name string, args []*Expr) (*Expr, error) {
	name = strings.ToLower(name)
	n := len(args)
	nargs := func(lo, hi int) error {
		if n < lo || n > hi {
			want := fmt.Sprint(lo)
			if hi != lo {
				if hi > 100 {
					want = fmt.Sprintf("at least %d", lo)
				} else {
					want = fmt.Sprintf("%d to %d", lo, hi)
				}
			}
			return wrongArgs(name, want, n)
		}
		return nil
	}
	cast := func(i int, t Type) (*Expr, error) { return expect(name, i, args[i], t) }
	strArgs := func() ([]*Expr, error) {
		out := make([]*Expr, n)
		for i := range args {
			c, err := cast(i, StringType)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	switch name {
	case "lower", "upper", "length", "char_length", "character_length":
		if err := nargs(1, 1); err != nil {
			return nil, err
		}
		s, err := cast(0, StringType)
		if err != nil {
			return nil, err
		}
		if name == "lower" || name == "upper" {
			return call(name, StringType, s), nil
		}
		return call("length", IntType, s), nil
	case "trim", "ltrim", "rtrim":
		if err := nargs(1, 2); err != nil {
			return nil, err
		}
		as, err := strArgs()
		if err != nil {
			return nil, err
		}
		return call(name, StringType, as...), nil
	case "substring", "substr":
		if err := nargs(2, 3); err != nil {
			return nil, err
		}
		s, err := cast(0, StringType)
		if err != nil {
			return nil, err
		}
		out := []*Expr{s}
		for i := 1; i < n; i++ {
			c, err := cast(i, IntType)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		if n == 2 {
			out = append(out, Literal(row.Value{Kind: row.Int, I: math.MaxInt32}, IntType))
		}
		return call("substring", StringType, out...), nil
	case "concat":
		as, err := strArgs()
		if err != nil {
			return nil, err
		}
		return call(name, StringType, as...), nil
	case "concat_ws":
		if err := nargs(1, 1<<20); err != nil {
			return nil, err
		}
		as, err := strArgs()
		if err != nil {
			return nil, err
		}
		return call(name, StringType, as...), nil
	case "regexp_extract":
		if err := nargs(2, 3); err != nil {
			return nil, err
		}
		s, err := cast(0, StringType)
		if err != nil {
			return nil, err
		}
		p, err := cast(1, StringType)
		if err != nil {
			return nil, err
		}
		idx := Literal(row.Value{Kind: row.Int, I: 1}, IntType)
		if n == 3 {
			if idx, err = cast(2, IntType); err != nil {
				return nil, err
			}
		}
		if p.Op == OpLiteral && p.Val.Kind == row.String {
			re, err := compileRegex(p.Val.S)
			if err != nil {
				return nil, &TypeError{Expr: "regexp_extract", Reason: err.Error()}
			}
			if idx.Op == OpLiteral && idx.Val.Kind != row.Null {
				if i := idx.Val.I; i < 0 || int(i) > re.NumSubexp() {
					return nil, &TypeError{Expr: "regexp_extract", Reason: fmt.Sprintf("[INVALID_PARAMETER_VALUE.REGEX_GROUP_INDEX] the value of parameter idx is invalid: expects group index between 0 and %d, but got %d", re.NumSubexp(), i)}
				}
			}
		}
		return call(name, StringType, s, p, idx), nil
	case "split":
		if err := nargs(2, 3); err != nil {
			return nil, err
		}
		s, err := cast(0, StringType)
		if err != nil {
			return nil, err
		}
		p, err := cast(1, StringType)
		if err != nil {
			return nil, err
		}
		limit := Literal(row.Value{Kind: row.Int, I: -1}, IntType)
		if n == 3 {
			if limit, err = cast(2, IntType); err != nil {
				return nil, err
			}
		}
		if p.Op == OpLiteral && p.Val.Kind == row.String {
			if _, err := compileRegex(p.Val.S); err != nil {
				return nil, &TypeError{Expr: "split", Reason: err.Error()}
			}
		}
		return call(name, Type{Kind: row.String, Array: true}, s, p, limit), nil
	case "date_trunc":
		if err := nargs(2, 2); err != nil {
			return nil, err
		}
		f, err := cast(0, StringType)
		if err != nil {
			return nil, err
		}
		ts, err := cast(1, TimestampType)
		if err != nil {
			return nil, err
		}
		return call(name, TimestampType, f, ts), nil
	case "to_date":
		if err := nargs(1, 2); err != nil {
			return nil, err
		}
		if n == 1 {
			if args[0].Type.Kind == row.Timestamp || args[0].Type.Kind == row.Date {
				return castTo(args[0], DateType), nil
			}
			s, err := cast(0, StringType)
			if err != nil {
				return nil, err
			}
			return castTo(s, DateType), nil
		}
		s, err := cast(0, StringType)
		if err != nil {
			return nil, err
		}
		f, err := patternArg(name, args[1], true)
		if err != nil {
			return nil, err
		}
		return call(name, DateType, s, f), nil
	case "date_format":
		if err := nargs(2, 2); err != nil {
			return nil, err
		}
		ts, err := cast(0, TimestampType)
		if err != nil {
			return nil, err
		}
		f, err := patternArg(name, args[1], false)
		if err != nil {
			return nil, err
		}
		return call(name, StringType, ts, f), nil
	case "hour", "minute", "second":
		if err := nargs(1, 1); err != nil {
			return nil, err
		}
		ts, err := cast(0, TimestampType)
		if err != nil {
			return nil, err
		}
		return call(name, IntType, ts), nil
	case "year", "month", "day", "dayofmonth":
		if err := nargs(1, 1); err != nil {
			return nil, err
		}
		d, err := cast(0, DateType)
		if err != nil {
			return nil, err
		}
		if name == "dayofmonth" {
			name = "day"
		}
		return call(name, IntType, d), nil
	case "unix_timestamp":
		if err := nargs(1, 2); err != nil {
			return nil, err
		}
		x := args[0]
		switch x.Type.Kind {
		case row.Timestamp, row.Date:
			return call(name, LongType, castTo(x, TimestampType)), nil
		}
		s, err := cast(0, StringType)
		if err != nil {
			return nil, err
		}
		f := Literal(row.StringValue("yyyy-MM-dd HH:mm:ss"), StringType)
		if n == 2 {
			if f, err = patternArg(name, args[1], true); err != nil {
				return nil, err
			}
		}
		return call(name, LongType, s, f), nil
	case "from_unixtime":
		if err := nargs(1, 2); err != nil {
			return nil, err
		}
		sec, err := cast(0, LongType)
		if err != nil {
			return nil, err
		}
		f := Literal(row.StringValue("yyyy-MM-dd HH:mm:ss"), StringType)
		if n == 2 {
			if f, err = patternArg(name, args[1], false); err != nil {
				return nil, err
			}
		}
		return call(name, StringType, sec, f), nil
	case "abs":
		if err := nargs(1, 1); err != nil {
			return nil, err
		}
		x := args[0]
		if x.Type.Kind == row.String || x.Type.Kind == row.Null {
			x = castTo(x, DoubleType)
		}
		if !x.Type.IsNumeric() {
			return nil, mismatch("abs("+x.String()+")", "parameter 1 requires a numeric type, however %s has the type %s", x, strings.ToUpper(x.Type.String()))
		}
		return call(name, x.Type, x), nil
	case "round":
		if err := nargs(1, 2); err != nil {
			return nil, err
		}
		x := args[0]
		if x.Type.Kind == row.String || x.Type.Kind == row.Null {
			x = castTo(x, DoubleType)
		}
		if !x.Type.IsNumeric() {
			return nil, mismatch("round("+x.String()+")", "parameter 1 requires a numeric type, however %s has the type %s", x, strings.ToUpper(x.Type.String()))
		}
		d := int64(0)
		if n == 2 {
			s := args[1]
			if s.Op != OpLiteral || !s.Type.isIntegral() || s.Val.Kind == row.Null {
				return nil, mismatch("round", "[NON_FOLDABLE_INPUT] the scale of round must be an integer literal, not %s", s)
			}
			d = s.Val.I
		}
		t := x.Type
		if t.Kind == row.Decimal {
			p, s := int(t.Precision), int(t.Scale)
			if d < 0 {
				t = boundedDecimal(p-s+1, 0)
			} else {
				ns := min(s, int(d))
				t = boundedDecimal(p-s+1+ns, ns)
			}
		}
		return call(name, t, x, Literal(row.Value{Kind: row.Int, I: d}, IntType)), nil
	case "floor", "ceil", "ceiling":
		if err := nargs(1, 1); err != nil {
			return nil, err
		}
		x := args[0]
		if x.Type.Kind == row.String || x.Type.Kind == row.Null {
			x = castTo(x, DoubleType)
		}
		if !x.Type.IsNumeric() {
			return nil, mismatch(name+"("+x.String()+")", "parameter 1 requires a numeric type, however %s has the type %s", x, strings.ToUpper(x.Type.String()))
		}
		if name == "ceiling" {
			name = "ceil"
		}
		t := LongType
		if x.Type.Kind == row.Decimal {
			t = boundedDecimal(int(x.Type.Precision)-int(x.Type.Scale)+1, 0)
			if x.Type.Scale == 0 {
				t = x.Type
			}
		} else {
			x = castTo(x, map[bool]Type{true: DoubleType, false: LongType}[x.Type.Kind == row.Double])
		}
		return call(name, t, x), nil
	case "greatest", "least":
		if err := nargs(2, 1<<20); err != nil {
			return nil, err
		}
		t, err := commonType(name+"(...)", args)
		if err != nil {
			return nil, err
		}
		out := make([]*Expr, n)
		for i, a := range args {
			out[i] = castTo(a, t)
		}
		return call(name, t, out...), nil
	case "hash":
		if err := nargs(1, 1<<20); err != nil {
			return nil, err
		}
		for _, a := range args {
			if a.Type.Array || a.Type.Kind == intervalKind {
				return nil, mismatch("hash(...)", "the input %s has the type %s, which Sluice does not hash", a, a.Type)
			}
		}
		return call(name, IntType, args...), nil
	case "coalesce", "nvl", "ifnull":
		if name != "coalesce" {
			if err := nargs(2, 2); err != nil {
				return nil, err
			}
		}
		return Coalesce(args)
	case "if":
		if err := nargs(3, 3); err != nil {
			return nil, err
		}
		return If(args[0], args[1], args[2])
	case "nullif":
		if err := nargs(2, 2); err != nil {
			return nil, err
		}
		return NullIf(args[0], args[1])
	case "isnull", "isnotnull":
		if err := nargs(1, 1); err != nil {
			return nil, err
		}
		return IsNull(args[0], name == "isnotnull"), nil
	}
	return nil, fmt.Errorf("unknown function %s", name)
}

// patternArg checks a datetime pattern argument: a literal pattern is
// compiled now, so a bad one is refused at validation.
func patternArg(fn string, e *Expr, parsing bool) (*Expr, error) {
	c, err := expect(fn, 1, e, StringType)
	if err != nil {
		return nil, err
	}
	if c.Op == OpLiteral && c.Val.Kind == row.String {
		if _, err := compilePattern(c.Val.S, parsing); err != nil {
			return nil, &TypeError{Expr: fn, Reason: err.Error()}
		}
	}
	return c, nil
}

// compileRegex compiles a Java regular expression with Go's RE2, which
// takes most of Java's syntax but not backreferences or lookaround
// (docs/spark-differences.md#regex-re2).
func compileRegex(p string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, fmt.Errorf("the regular expression '%s' does not compile with RE2 (Sluice's regular expressions take Go's RE2 syntax, without Java's backreferences and lookaround: docs/spark-differences.md#regex-re2): %v", p, err)
	}
	return re, nil
}

func compileCall(e *Expr, env Env) (fn, error) {
	args, err := compileArgs(e.Args, env)
	if err != nil {
		return nil, err
	}
	zone := env.zone()
	loc := zone.Location()
	text := e.String()
	unary := func(f func(v row.Value) row.Value) fn {
		a := args[0]
		return func(r row.Row) (row.Value, error) {
			v, err := a(r)
			if err != nil || v.Kind == row.Null {
				return null, err
			}
			return f(v), nil
		}
	}
	switch e.Name {
	case "lower":
		return unary(func(v row.Value) row.Value { return row.StringValue(strings.ToLower(v.S)) }), nil
	case "upper":
		return unary(func(v row.Value) row.Value { return row.StringValue(strings.ToUpper(v.S)) }), nil
	case "length":
		return unary(func(v row.Value) row.Value {
			return row.Value{Kind: row.Int, I: int64(utf8.RuneCountInString(v.S))}
		}), nil
	case "trim", "ltrim", "rtrim":
		name := e.Name
		trimFn := func(s, chars string) string {
			switch name {
			case "ltrim":
				return strings.TrimLeft(s, chars)
			case "rtrim":
				return strings.TrimRight(s, chars)
			}
			return strings.Trim(s, chars)
		}
		if len(args) == 1 {
			return unary(func(v row.Value) row.Value { return row.StringValue(trimFn(v.S, " ")) }), nil
		}
		return nary(args, func(vs []row.Value) (row.Value, error) { return row.StringValue(trimFn(vs[0].S, vs[1].S)), nil }), nil
	case "substring":
		return nary(args, func(vs []row.Value) (row.Value, error) {
			return row.StringValue(substringSQL(vs[0].S, int32(vs[1].I), int32(vs[2].I))), nil
		}), nil
	case "concat":
		return nary(args, func(vs []row.Value) (row.Value, error) {
			var b strings.Builder
			for _, v := range vs {
				b.WriteString(v.S)
			}
			return row.StringValue(b.String()), nil
		}), nil
	case "concat_ws":
		return func(r row.Row) (row.Value, error) {
			sep, err := args[0](r)
			if err != nil || sep.Kind == row.Null {
				return null, err
			}
			var b strings.Builder
			first := true
			for _, a := range args[1:] {
				v, err := a(r)
				if err != nil {
					return null, err
				}
				if v.Kind == row.Null {
					continue
				}
				if !first {
					b.WriteString(sep.S)
				}
				first = false
				b.WriteString(v.S)
			}
			return row.StringValue(b.String()), nil
		}, nil
	case "regexp_extract":
		cache := regexCache(e.Args[1])
		return nary(args, func(vs []row.Value) (row.Value, error) {
			re, err := cache(vs[1].S)
			if err != nil {
				return null, &EvalError{Expr: text, Reason: err.Error()}
			}
			idx := int(vs[2].I)
			if idx < 0 || idx > re.NumSubexp() {
				return null, &EvalError{Expr: text, Reason: fmt.Sprintf("[INVALID_PARAMETER_VALUE.REGEX_GROUP_INDEX] expects group index between 0 and %d, but got %d", re.NumSubexp(), idx)}
			}
			m := re.FindStringSubmatchIndex(vs[0].S)
			if m == nil || m[2*idx] < 0 {
				return row.StringValue(""), nil
			}
			return row.StringValue(vs[0].S[m[2*idx]:m[2*idx+1]]), nil
		}), nil
	case "split":
		return nil, fmt.Errorf("compile %s: split's array must be indexed (split(s, ',')[0])", text)
	case "date_trunc":
		return nary(args, func(vs []row.Value) (row.Value, error) {
			us, ok := truncTimestamp(vs[1].I, vs[0].S, loc)
			if !ok {
				return null, nil
			}
			return row.TimestampValue(us), nil
		}), nil
	case "date_format", "from_unixtime":
		pat := patternCache(e.Args[1], false)
		isSec := e.Name == "from_unixtime"
		return nary(args, func(vs []row.Value) (row.Value, error) {
			p, err := pat(vs[1].S)
			if err != nil {
				return null, &EvalError{Expr: text, Reason: err.Error()}
			}
			us := vs[0].I
			if isSec {
				us = saturatingMul(us, 1e6)
			}
			return row.StringValue(p.format(us, loc, zone.String())), nil
		}), nil
	case "to_date", "unix_timestamp":
		if len(args) == 1 { // unix_timestamp(timestamp)
			return unary(func(v row.Value) row.Value { return row.LongValue(floorDiv(v.I, 1e6)) }), nil
		}
		pat := patternCache(e.Args[1], true)
		toDate := e.Name == "to_date"
		return nary(args, func(vs []row.Value) (row.Value, error) {
			p, err := pat(vs[1].S)
			if err != nil {
				return null, &EvalError{Expr: text, Reason: err.Error()}
			}
			f, ok := p.parse(vs[0].S, false)
			if !ok {
				if _, legacy := p.parse(vs[0].S, true); legacy {
					return null, &EvalError{Expr: text, Reason: upgradeError(vs[0].S)}
				}
				return null, nil
			}
			us := f.micros(loc)
			if toDate {
				return row.Value{Kind: row.Date, I: microsToDays(us, loc)}, nil
			}
			return row.LongValue(floorDiv(us, 1e6)), nil
		}), nil
	case "hour", "minute", "second":
		name := e.Name
		return unary(func(v row.Value) row.Value {
			t := localTime(v.I, loc)
			switch name {
			case "hour":
				return row.Value{Kind: row.Int, I: int64(t.Hour())}
			case "minute":
				return row.Value{Kind: row.Int, I: int64(t.Minute())}
			}
			return row.Value{Kind: row.Int, I: int64(t.Second())}
		}), nil
	case "year", "month", "day":
		name := e.Name
		return unary(func(v row.Value) row.Value {
			y, m, d := civilFromDays(v.I)
			switch name {
			case "year":
				return row.Value{Kind: row.Int, I: int64(y)}
			case "month":
				return row.Value{Kind: row.Int, I: int64(m)}
			}
			return row.Value{Kind: row.Int, I: int64(d)}
		}), nil
	case "date_add":
		return nary(args, func(vs []row.Value) (row.Value, error) {
			return row.Value{Kind: row.Date, I: int64(int32(vs[0].I + vs[1].I))}, nil
		}), nil
	case "abs":
		t := e.Type
		return unary(func(v row.Value) row.Value {
			switch t.Kind {
			case row.Int:
				if int32(v.I) < 0 {
					v.I = int64(-int32(v.I))
				}
			case row.Long:
				if v.I < 0 {
					v.I = -v.I
				}
			case row.Double:
				v.F = math.Abs(v.F)
			case row.Decimal:
				if v.S == "" && v.I != math.MinInt64 {
					if v.I < 0 {
						v.I = -v.I
					}
					return v
				}
				out, _ := decimalValue(new(big.Int).Abs(unscaled(v)), t)
				return out
			}
			return v
		}), nil
	case "round":
		return compileRound(e, args[0])
	case "floor", "ceil":
		ceil := e.Name == "ceil"
		t := e.Type
		return unary(func(v row.Value) row.Value {
			switch v.Kind {
			case row.Double:
				f := math.Floor(v.F)
				if ceil {
					f = math.Ceil(v.F)
				}
				return row.LongValue(javaDoubleToLong(f))
			case row.Decimal:
				u := unscaled(v)
				p := bigPow10(int(v.Scale))
				q, m := new(big.Int).DivMod(u, p, new(big.Int)) // floor for positive divisor
				if ceil && m.Sign() != 0 {
					q.Add(q, big.NewInt(1))
				}
				out, ok := decimalValue(rescale(q, 0, int(t.Scale)), t)
				if !ok {
					return null
				}
				return out
			}
			return row.LongValue(v.I)
		}), nil
	case "greatest", "least":
		greatest := e.Name == "greatest"
		return func(r row.Row) (row.Value, error) {
			best := null
			for _, a := range args {
				v, err := a(r)
				if err != nil {
					return null, err
				}
				if v.Kind == row.Null {
					continue
				}
				if best.Kind == row.Null {
					best = v
					continue
				}
				c := compareValues(v, best)
				if (greatest && c > 0) || (!greatest && c < 0) {
					best = v
				}
			}
			return best, nil
		}, nil
	case "hash":
		types := make([]Type, len(e.Args))
		for i, a := range e.Args {
			types[i] = a.Type
		}
		return func(r row.Row) (row.Value, error) {
			h := uint32(hashSeed)
			for i, a := range args {
				v, err := a(r)
				if err != nil {
					return null, err
				}
				h = hashValue(v, types[i], h)
			}
			return row.Value{Kind: row.Int, I: int64(int32(h))}, nil
		}, nil
	}
	return nil, fmt.Errorf("compile %s: unknown function %s", text, e.Name)
}

// nary evaluates every argument and gives null when one is null.
func nary(args []fn, f func(vs []row.Value) (row.Value, error)) fn {
	n := len(args)
	return func(r row.Row) (row.Value, error) {
		var buf [4]row.Value
		vs := buf[:0]
		if n > len(buf) {
			vs = make([]row.Value, 0, n)
		}
		for _, a := range args {
			v, err := a(r)
			if err != nil || v.Kind == row.Null {
				return null, err
			}
			vs = append(vs, v)
		}
		return f(vs)
	}
}

// regexCache returns the compiled pattern of a literal at once, and of a
// computed pattern by compiling it (keeping the last one).
func regexCache(p *Expr) func(string) (*regexp.Regexp, error) {
	if p.Op == OpLiteral && p.Val.Kind == row.String {
		re, err := compileRegex(p.Val.S)
		return func(string) (*regexp.Regexp, error) { return re, err }
	}
	return compileRegex
}

func patternCache(p *Expr, parsing bool) func(string) (*dtPattern, error) {
	if p.Op == OpLiteral && p.Val.Kind == row.String {
		pat, err := compilePattern(p.Val.S, parsing)
		return func(string) (*dtPattern, error) { return pat, err }
	}
	return func(s string) (*dtPattern, error) { return compilePattern(s, parsing) }
}

// substringSQL is UTF8String.substringSQL: 1-based pos, 0 is 1, negative
// counts from the end; characters are code points.
func substringSQL(s string, pos, length int32) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	n := int64(len(s))
	if !ascii {
		n = int64(utf8.RuneCountInString(s))
	}
	var start int64
	switch {
	case pos > 0:
		start = int64(pos) - 1
	case pos < 0:
		start = n + int64(pos)
	}
	end := start + int64(length)
	end = max(min(end, math.MaxInt32), math.MinInt32)
	start = max(start, 0)
	if start >= end || start >= n {
		return ""
	}
	end = min(end, n)
	if ascii {
		return s[start:end]
	}
	rs := []rune(s)
	return string(rs[start:end])
}

func compileRound(e *Expr, a fn) (fn, error) {
	d := int(e.Args[1].Val.I)
	t := e.Type
	return func(r row.Row) (row.Value, error) {
		v, err := a(r)
		if err != nil || v.Kind == row.Null {
			return null, err
		}
		switch v.Kind {
		case row.Double:
			if math.IsNaN(v.F) || math.IsInf(v.F, 0) {
				return v, nil
			}
			u, sc, _ := parseDecimalText(formatShortest(v.F))
			rounded := rescale(u, sc, d)
			f, _ := parseJavaDouble(row.FormatDecimal(row.Value{Kind: row.Decimal, S: rounded.String(), Scale: 0}) + "e" + fmt.Sprint(-d))
			return row.DoubleValue(f), nil
		case row.Int, row.Long:
			if d >= 0 {
				return v, nil
			}
			rounded := rescale(big.NewInt(v.I), 0, d)
			out := new(big.Int).Mul(rounded, bigPow10(-d))
			if v.Kind == row.Int {
				return row.Value{Kind: row.Int, I: int64(int32(lowBits(out)))}, nil
			}
			return row.LongValue(int64(lowBits(out))), nil
		case row.Decimal:
			target := min(d, int(v.Scale))
			u := rescale(unscaled(v), int(v.Scale), target)
			u = rescale(u, target, int(t.Scale))
			out, ok := decimalValue(u, t)
			if !ok {
				return null, nil
			}
			return out, nil
		}
		return v, nil
	}, nil
}

// formatShortest is the double's shortest decimal text (the digits of
// Java's Double.toString, which Spark's round reads through BigDecimal).
func formatShortest(f float64) string { return strconv.FormatFloat(f, 'e', -1, 64) }

// truncTimestamp is DateTimeUtils.truncTimestamp with the unit names
// date_trunc takes; false for an unknown unit (null).
func truncTimestamp(us int64, unit string, loc *locationT) (int64, bool) {
	switch strings.ToUpper(unit) {
	case "MICROSECOND":
		return us, true
	case "MILLISECOND":
		return us - floorMod(us, 1000), true
	case "SECOND":
		return us - floorMod(us, 1e6), true
	}
	t := localTime(us, loc)
	y, m, d := t.Date()
	var out timeT
	switch strings.ToUpper(unit) {
	case "MINUTE":
		out = dateIn(y, int(m), d, t.Hour(), t.Minute(), loc)
	case "HOUR":
		out = dateIn(y, int(m), d, t.Hour(), 0, loc)
	case "DAY", "DD":
		out = dateIn(y, int(m), d, 0, 0, loc)
	case "WEEK":
		wd := (int(t.Weekday()) + 6) % 7 // Monday is 0
		out = dateIn(y, int(m), d-wd, 0, 0, loc)
	case "MONTH", "MM", "MON":
		out = dateIn(y, int(m), 1, 0, 0, loc)
	case "QUARTER":
		out = dateIn(y, (int(m)-1)/3*3+1, 1, 0, 0, loc)
	case "YEAR", "YYYY", "YY":
		out = dateIn(y, 1, 1, 0, 0, loc)
	default:
		return 0, false
	}
	return out.UnixMicro(), true
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

func compileIndex(e *Expr, env Env) (fn, error) {
	sp := e.Args[0]
	if sp.Op != OpCall || sp.Name != "split" {
		return nil, fmt.Errorf("compile %s: only split's result can be indexed", e)
	}
	args, err := compileArgs(append(append([]*Expr(nil), sp.Args...), e.Args[1]), env)
	if err != nil {
		return nil, err
	}
	text := e.String()
	// A pattern without regular-expression syntax splits on its text.
	if p := sp.Args[1]; p.Op == OpLiteral && p.Val.Kind == row.String && regexp.QuoteMeta(p.Val.S) == p.Val.S && p.Val.S != "" {
		sep := p.Val.S
		return nary(args, func(vs []row.Value) (row.Value, error) {
			s, limit, idx := vs[0].S, int(vs[2].I), int(vs[3].I)
			if idx < 0 {
				return null, nil
			}
			for i := 0; ; i++ {
				j := strings.Index(s, sep)
				if i == idx {
					if j < 0 || (limit > 0 && i == limit-1) {
						return row.StringValue(s), nil
					}
					return row.StringValue(s[:j]), nil
				}
				if j < 0 || (limit > 0 && i >= limit-1) {
					return null, nil
				}
				s = s[j+len(sep):]
			}
		}), nil
	}
	cache := regexCache(sp.Args[1])
	return nary(args, func(vs []row.Value) (row.Value, error) {
		re, err := cache(vs[1].S)
		if err != nil {
			return null, &EvalError{Expr: text, Reason: err.Error()}
		}
		limit := int(vs[2].I)
		if limit <= 0 {
			limit = -1
		}
		parts := re.Split(vs[0].S, limit)
		idx := int(vs[3].I)
		if idx < 0 || idx >= len(parts) {
			return null, nil
		}
		return row.StringValue(parts[idx]), nil
	}), nil
}
