package expr

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/row"
)

// Casts follow Spark 3.5's Cast with spark.sql.ansi.enabled false: a
// value that does not convert gives null, integral narrowing wraps,
// double to integral saturates (Java's (long) d), and strings convert
// with Spark's own parsers (UTF8String.toLong, Double.parseDouble,
// stringToTimestamp and stringToDate in the session time zone).

func compileCast(e *Expr, env Env) (fn, error) {
	a, err := compile(e.Args[0], env)
	if err != nil {
		return nil, err
	}
	c := castFunc(e.Args[0].Type, e.Type, env)
	return func(r row.Row) (row.Value, error) {
		v, err := a(r)
		if err != nil || v.Kind == row.Null {
			return null, err
		}
		return c(v), nil
	}, nil
}

// castFunc returns the conversion of a non-null value of type from to to.
func castFunc(from, to Type, env Env) func(row.Value) row.Value {
	zone := env.zone()
	loc := zone.Location()
	switch to.Kind {
	case row.String:
		return func(v row.Value) row.Value { return row.StringValue(toText(v, loc)) }
	case row.Long, row.Int:
		narrow := to.Kind == row.Int
		return func(v row.Value) row.Value {
			var i int64
			switch v.Kind {
			case row.Long, row.Int:
				i = v.I
			case row.Bool:
				i = v.I
			case row.Double:
				if narrow {
					return row.Value{Kind: row.Int, I: int64(javaDoubleToInt(v.F))}
				}
				i = javaDoubleToLong(v.F)
			case row.Timestamp:
				i = floorDiv(v.I, 1e6)
			case row.Decimal:
				i = decimalToLong(v)
			case row.String:
				n, ok := parseSparkLong(v.S, narrow)
				if !ok {
					return null
				}
				i = n
			default:
				return null
			}
			if narrow {
				return row.Value{Kind: row.Int, I: int64(int32(i))}
			}
			return row.LongValue(i)
		}
	case row.Double:
		return func(v row.Value) row.Value {
			switch v.Kind {
			case row.Long, row.Int, row.Bool:
				return row.DoubleValue(float64(v.I))
			case row.Double:
				return v
			case row.Timestamp:
				return row.DoubleValue(float64(v.I) / 1e6)
			case row.Decimal:
				return row.DoubleValue(decimalToDouble(v))
			case row.String:
				f, ok := parseJavaDouble(v.S)
				if !ok {
					return null
				}
				return row.DoubleValue(f)
			}
			return null
		}
	case row.Decimal:
		return func(v row.Value) row.Value {
			var out row.Value
			ok := false
			switch v.Kind {
			case row.Long, row.Int, row.Bool:
				out, ok = decimalFromInt(v.I, to)
			case row.Double:
				out, ok = decimalFromDouble(v.F, to)
			case row.Timestamp:
				out, ok = decimalFromDouble(float64(v.I)/1e6, to)
			case row.Decimal:
				out, ok = toDecimalType(v, to)
			case row.String:
				out, ok = decimalFromText(strings.TrimFunc(v.S, isJavaSpace), to)
			}
			if !ok {
				return null
			}
			return out
		}
	case row.Bool:
		return func(v row.Value) row.Value {
			switch v.Kind {
			case row.Long, row.Int, row.Bool, row.Timestamp:
				return boolV(v.I != 0)
			case row.Double:
				return boolV(v.F != 0)
			case row.Decimal:
				return boolV(v.I != 0 || v.S != "")
			case row.String:
				switch strings.ToLower(strings.TrimFunc(v.S, isJavaSpace)) {
				case "t", "true", "y", "yes", "1":
					return vTrue
				case "f", "false", "n", "no", "0":
					return vFals
				}
			}
			return null
		}
	case row.Timestamp:
		return func(v row.Value) row.Value {
			switch v.Kind {
			case row.Long, row.Int:
				return row.TimestampValue(saturatingMul(v.I, 1e6))
			case row.Bool:
				return row.TimestampValue(v.I)
			case row.Double:
				if math.IsNaN(v.F) || math.IsInf(v.F, 0) {
					return null
				}
				return row.TimestampValue(javaDoubleToLong(v.F * 1e6))
			case row.Decimal:
				return row.TimestampValue(javaDoubleToLong(decimalToDouble(v) * 1e6))
			case row.Date:
				return row.TimestampValue(dateToMicros(v.I, loc))
			case row.String:
				// A time without a date is null here: Spark puts it on the
				// current day (docs/spark-differences.md#time-without-date).
				us, ok, _ := row.ParseTimestampIn([]byte(v.S), zone)
				if !ok {
					return null
				}
				return row.TimestampValue(us)
			}
			return null
		}
	case row.Date:
		return func(v row.Value) row.Value {
			switch v.Kind {
			case row.Timestamp:
				return row.Value{Kind: row.Date, I: microsToDays(v.I, loc)}
			case row.String:
				d, ok := parseSparkDate(v.S)
				if !ok {
					return null
				}
				return row.Value{Kind: row.Date, I: d}
			}
			return null
		}
	}
	return func(row.Value) row.Value { return null }
}

func isJavaSpace(r rune) bool { return r <= ' ' }

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func saturatingMul(a, b int64) int64 {
	if over, c := mulOverflows(a, b); !over {
		return c
	}
	if (a < 0) != (b < 0) {
		return math.MinInt64
	}
	return math.MaxInt64
}

// javaDoubleToLong is Java's (long) d: NaN is 0, out of range saturates.
func javaDoubleToLong(f float64) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= 9.223372036854775807e18:
		return math.MaxInt64
	case f <= -9.223372036854775808e18:
		return math.MinInt64
	}
	return int64(f)
}

func javaDoubleToInt(f float64) int32 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= math.MaxInt32:
		return math.MaxInt32
	case f <= math.MinInt32:
		return math.MinInt32
	}
	return int32(f)
}

// parseSparkLong is UTF8String.toLong / toInt (the non-ANSI cast): after
// trimming whitespace and control characters, an optional sign, digits,
// and an optional fraction that is dropped; out of range is null.
func parseSparkLong(s string, narrow bool) (int64, bool) {
	s = strings.TrimFunc(s, isJavaSpace)
	if s == "" {
		return 0, false
	}
	neg := false
	switch s[0] {
	case '+', '-':
		neg = s[0] == '-'
		s = s[1:]
	}
	intPart, frac, hasDot := strings.Cut(s, ".")
	if intPart == "" && (!hasDot || frac == "") {
		return 0, false
	}
	for i := 0; i < len(frac); i++ {
		if frac[i] < '0' || frac[i] > '9' {
			return 0, false
		}
	}
	limit := uint64(math.MaxInt64)
	if narrow {
		limit = math.MaxInt32
	}
	if neg {
		limit++
	}
	var n uint64
	for i := 0; i < len(intPart); i++ {
		c := intPart[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
		if n > limit {
			return 0, false
		}
	}
	if neg {
		return -int64(n), true
	}
	return int64(n), true
}

// parseJavaDouble is Double.parseDouble (after String.trim) with Spark's
// special literals (inf, infinity, nan in any case, with a sign).
func parseJavaDouble(s string) (float64, bool) {
	s = strings.TrimFunc(s, isJavaSpace)
	if s == "" {
		return 0, false
	}
	if n := len(s); n > 1 && strings.ContainsRune("fFdD", rune(s[n-1])) && (s[n-2] >= '0' && s[n-2] <= '9' || s[n-2] == '.') {
		s = s[:n-1]
	}
	if strings.ContainsRune(s, '_') {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return f, true
		}
		return 0, false
	}
	return f, true
}

// parseSparkDate is DateTimeUtils.stringToDate: [+-]yyyy[y...][-[m]m
// [-[d]d]] followed by nothing, or by ' ' or 'T' and anything.
func parseSparkDate(s string) (int64, bool) {
	s = strings.TrimFunc(s, isJavaSpace)
	if s == "" {
		return 0, false
	}
	sign := 1
	if s[0] == '-' || s[0] == '+' {
		if s[0] == '-' {
			sign = -1
		}
		s = s[1:]
	}
	seg := [3]int{0, 1, 1}
	i, n := 0, 0
	digits := 0
	for n < len(s) {
		c := s[n]
		if c >= '0' && c <= '9' {
			seg[i] = seg[i]*boolInt(digits > 0, 10, 0) + int(c-'0')
			if digits == 0 {
				seg[i] = int(c - '0')
			}
			digits++
			n++
			continue
		}
		if i < 2 && c == '-' {
			if !segOK(i, digits) {
				return 0, false
			}
			i++
			digits = 0
			n++
			continue
		}
		if i == 2 && (c == ' ' || c == 'T') {
			break
		}
		return 0, false
	}
	if !segOK(i, digits) {
		return 0, false
	}
	y, m, d := sign*seg[0], seg[1], seg[2]
	if m < 1 || m > 12 || d < 1 || d > daysInMonth(y, m) {
		return 0, false
	}
	return row.DaysFromCivil(y, m, d), true
}

func boolInt(b bool, t, f int) int {
	if b {
		return t
	}
	return f
}

func segOK(i, digits int) bool {
	if i == 0 {
		return digits >= 4 && digits <= 7
	}
	return digits >= 1 && digits <= 2
}

func daysInMonth(y, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// localTime returns us as a time in loc.
func localTime(us int64, loc *time.Location) time.Time {
	return time.UnixMicro(us).In(loc)
}

// microsToDays is the date of us in loc.
func microsToDays(us int64, loc *time.Location) int64 {
	t := localTime(us, loc)
	return row.DaysFromCivil(t.Year(), int(t.Month()), t.Day())
}

// dateToMicros is midnight of the date in loc (the first instant of the
// day when a gap skips midnight, as java.time does).
func dateToMicros(days int64, loc *time.Location) int64 {
	y, m, d := civilFromDays(days)
	return time.Date(y, time.Month(m), d, 0, 0, 0, 0, loc).UnixMicro()
}

// civilFromDays is the inverse of row.DaysFromCivil.
func civilFromDays(z int64) (int, int, int) {
	z += 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if m > 12 {
		m -= 12
	}
	if m <= 2 {
		y++
	}
	return int(y), int(m), int(d)
}

// toText is a value as CAST(v AS STRING) writes it.
func toText(v row.Value, loc *time.Location) string {
	switch v.Kind {
	case row.String:
		return v.S
	case row.Long, row.Int:
		return strconv.FormatInt(v.I, 10)
	case row.Double:
		return string(row.AppendJavaDouble(nil, v.F))
	case row.Bool:
		if v.I != 0 {
			return "true"
		}
		return "false"
	case row.Decimal:
		return row.FormatDecimal(v)
	case row.Date:
		y, m, d := civilFromDays(v.I)
		return formatYMD(y, m, d)
	case row.Timestamp:
		return formatTimestampText(v.I, loc)
	}
	return v.String()
}

func formatYMD(y, m, d int) string {
	var b []byte
	if y < 0 {
		b = append(b, '-')
		y = -y
	}
	b = appendPadded(b, y, 4)
	b = append(b, '-')
	b = appendPadded(b, m, 2)
	b = append(b, '-')
	return string(appendPadded(b, d, 2))
}

func appendPadded(b []byte, n, width int) []byte {
	s := strconv.Itoa(n)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// formatTimestampText is Spark's timestamp to string: yyyy-MM-dd
// HH:mm:ss with the microseconds' fraction, trailing zeros dropped.
func formatTimestampText(us int64, loc *time.Location) string {
	t := localTime(us, loc)
	b := []byte(formatYMD(t.Year(), int(t.Month()), t.Day()))
	b = append(b, ' ')
	b = appendPadded(b, t.Hour(), 2)
	b = append(b, ':')
	b = appendPadded(b, t.Minute(), 2)
	b = append(b, ':')
	b = appendPadded(b, t.Second(), 2)
	if frac := t.Nanosecond() / 1000; frac != 0 {
		f := []byte(strconv.Itoa(1000000 + frac))[1:]
		for len(f) > 0 && f[len(f)-1] == '0' {
			f = f[:len(f)-1]
		}
		b = append(b, '.')
		b = append(b, f...)
	}
	return string(b)
}

type (
	locationT = time.Location
	timeT     = time.Time
)

func dateIn(y, m, d, h, min int, loc *time.Location) time.Time {
	return time.Date(y, time.Month(m), d, h, min, 0, 0, loc)
}
