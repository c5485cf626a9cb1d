package row

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Kind is the type of a Value. The zero Kind is Null.
type Kind uint8

// The kinds a value can have; they match the schema types of a query.
const (
	Null Kind = iota
	String
	Long
	Double
	Bool
	Timestamp
	// Int, Date and Decimal come only from expressions (a source schema
	// declares the five kinds above): Spark's IntegerType (I holds the
	// int32), DateType (I holds days since 1970-01-01) and
	// DecimalType(p, s) (the unscaled value in I, or in S as decimal
	// digits when it does not fit an int64; Scale holds s).
	Int
	Date
	Decimal
)

func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case String:
		return "string"
	case Long:
		return "long"
	case Double:
		return "double"
	case Bool:
		return "boolean"
	case Timestamp:
		return "timestamp"
	case Int:
		return "int"
	case Date:
		return "date"
	case Decimal:
		return "decimal"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind maps a schema type name to a Kind.
func ParseKind(s string) (Kind, bool) {
	switch s {
	case "string":
		return String, true
	case "long":
		return Long, true
	case "double":
		return Double, true
	case "boolean":
		return Bool, true
	case "timestamp":
		return Timestamp, true
	}
	return Null, false
}

// Value is one typed cell. I holds longs, booleans (0 or 1) and timestamps
// (microseconds since the epoch); F holds doubles; S holds strings.
// Values are small and passed by value; a zero Value is null.
type Value struct {
	Kind Kind
	// Scale is a Decimal's scale (digits after the point); 0 otherwise.
	Scale uint8
	I     int64
	F     float64
	S     string
}

// Row is one record: values in schema order.
type Row []Value

// Constructors.
func StringValue(s string) Value    { return Value{Kind: String, S: s} }
func LongValue(i int64) Value       { return Value{Kind: Long, I: i} }
func DoubleValue(f float64) Value   { return Value{Kind: Double, F: f} }
func TimestampValue(us int64) Value { return Value{Kind: Timestamp, I: us} }
func TimeValue(t time.Time) Value   { return Value{Kind: Timestamp, I: t.UnixMicro()} }
func BoolValue(b bool) Value {
	if b {
		return Value{Kind: Bool, I: 1}
	}
	return Value{Kind: Bool}
}

// IsNull reports whether v is null.
func (v Value) IsNull() bool { return v.Kind == Null }

// Time returns a timestamp value as a UTC time.
func (v Value) Time() time.Time { return time.UnixMicro(v.I).UTC() }

// Float returns a numeric value as a float64.
func (v Value) Float() float64 {
	if v.Kind == Double {
		return v.F
	}
	return float64(v.I)
}

// Compare orders two values of the same kind; null sorts first. Values of
// different kinds order by kind.
func Compare(a, b Value) int {
	if a.Kind != b.Kind {
		if a.Kind < b.Kind {
			return -1
		}
		return 1
	}
	switch a.Kind {
	case Null:
		return 0
	case String:
		switch {
		case a.S < b.S:
			return -1
		case a.S > b.S:
			return 1
		}
		return 0
	case Double:
		switch {
		case a.F < b.F:
			return -1
		case a.F > b.F:
			return 1
		case math.IsNaN(a.F) && !math.IsNaN(b.F):
			return 1
		case !math.IsNaN(a.F) && math.IsNaN(b.F):
			return -1
		}
		return 0
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

// String renders a value for logs and the console sink.
func (v Value) String() string {
	switch v.Kind {
	case Null:
		return "null"
	case String:
		return v.S
	case Long:
		return strconv.FormatInt(v.I, 10)
	case Double:
		return strconv.FormatFloat(v.F, 'g', -1, 64)
	case Bool:
		return strconv.FormatBool(v.I != 0)
	case Timestamp:
		return FormatTimestamp(v.I)
	case Int:
		return strconv.FormatInt(v.I, 10)
	case Date:
		return time.UnixMicro(v.I * 86400e6).UTC().Format(time.DateOnly)
	case Decimal:
		return FormatDecimal(v)
	}
	return "?"
}

// FormatTimestamp renders microseconds since the epoch as RFC 3339 in UTC,
// with as many fraction digits as needed.
func FormatTimestamp(us int64) string {
	return time.UnixMicro(us).UTC().Format(time.RFC3339Nano)
}

// FormatDecimal renders a Decimal value in plain notation with its scale's
// digits after the point (Java's BigDecimal.toPlainString).
func FormatDecimal(v Value) string {
	digits := v.S
	if digits == "" {
		digits = strconv.FormatInt(v.I, 10)
	}
	neg := strings.HasPrefix(digits, "-")
	digits = strings.TrimPrefix(digits, "-")
	sc := int(v.Scale)
	if sc > 0 {
		if len(digits) <= sc {
			digits = strings.Repeat("0", sc-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-sc] + "." + digits[len(digits)-sc:]
	}
	if neg {
		return "-" + digits
	}
	return digits
}

// AppendJavaDouble appends f as java.lang.Double.toString writes it
// (Spark's CAST of a double to a string): see appendJavaDouble.
func AppendJavaDouble(dst []byte, f float64) []byte { return appendJavaDouble(dst, f) }
