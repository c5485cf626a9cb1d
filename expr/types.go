package expr

import (
	"fmt"

	"github.com/sluicehq/sluice/row"
)

// Type is a Spark SQL data type: the kind of its values, and for a
// decimal its precision (total digits, 1 to 38) and scale (digits after
// the point). Array is only the result of split, which must be indexed.
type Type struct {
	Kind      row.Kind
	Precision uint8
	Scale     uint8
	// Array marks array<Kind> (split's result).
	Array bool
}

// MaxPrecision is Spark's DecimalType.MAX_PRECISION.
const MaxPrecision = 38

// The types.
var (
	NullType      = Type{Kind: row.Null}
	StringType    = Type{Kind: row.String}
	LongType      = Type{Kind: row.Long}
	IntType       = Type{Kind: row.Int}
	DoubleType    = Type{Kind: row.Double}
	BoolType      = Type{Kind: row.Bool}
	TimestampType = Type{Kind: row.Timestamp}
	DateType      = Type{Kind: row.Date}
)

// DecimalType returns decimal(p, s).
func DecimalType(p, s int) Type {
	return Type{Kind: row.Decimal, Precision: uint8(p), Scale: uint8(s)}
}

// boundedDecimal is Spark's DecimalType.bounded: precision and scale
// capped at 38.
func boundedDecimal(p, s int) Type {
	return DecimalType(min(p, MaxPrecision), min(s, MaxPrecision))
}

// adjustPrecisionScale is Spark's DecimalType.adjustPrecisionScale with
// spark.sql.decimalOperations.allowPrecisionLoss on (the default): a
// result wider than 38 digits keeps its integral digits and at least 6
// fraction digits (or its scale, if less).
func adjustPrecisionScale(p, s int) Type {
	if p <= MaxPrecision {
		return DecimalType(p, s)
	}
	if s < 0 {
		return DecimalType(MaxPrecision, s)
	}
	intDigits := p - s
	minScale := min(s, 6)
	adjusted := max(MaxPrecision-intDigits, minScale)
	return DecimalType(MaxPrecision, adjusted)
}

// String is the type's Spark SQL name: string, bigint, int, double,
// decimal(p,s), boolean, timestamp, date (and void for null).
func (t Type) String() string {
	if t.Array {
		e := t
		e.Array = false
		return "array<" + e.String() + ">"
	}
	switch t.Kind {
	case row.Null:
		return "void"
	case row.String:
		return "string"
	case row.Long:
		return "bigint"
	case row.Int:
		return "int"
	case row.Double:
		return "double"
	case row.Bool:
		return "boolean"
	case row.Timestamp:
		return "timestamp"
	case row.Date:
		return "date"
	case row.Decimal:
		return fmt.Sprintf("decimal(%d,%d)", t.Precision, t.Scale)
	}
	return t.Kind.String()
}

// IsNumeric reports int, bigint, double and decimal.
func (t Type) IsNumeric() bool {
	if t.Array {
		return false
	}
	switch t.Kind {
	case row.Int, row.Long, row.Double, row.Decimal:
		return true
	}
	return false
}

func (t Type) isIntegral() bool { return !t.Array && (t.Kind == row.Int || t.Kind == row.Long) }

// asDecimal is the decimal an integral type widens to (Spark's
// DecimalType.forType): int is decimal(10,0), bigint decimal(20,0).
func (t Type) asDecimal() Type {
	switch t.Kind {
	case row.Int:
		return DecimalType(10, 0)
	case row.Long:
		return DecimalType(20, 0)
	}
	return t
}

// SchemaType maps a spec schema type name (string, long, double, boolean,
// timestamp) to its Type.
func SchemaType(k row.Kind) Type { return Type{Kind: k} }

// numericRank orders the numeric types for widening: int < bigint <
// decimal < double.
func numericRank(t Type) int {
	switch t.Kind {
	case row.Int:
		return 1
	case row.Long:
		return 2
	case row.Decimal:
		return 3
	case row.Double:
		return 4
	}
	return 0
}

// widerDecimal is Spark's DecimalPrecision.widerDecimalType.
func widerDecimal(a, b Type) Type {
	scale := max(int(a.Scale), int(b.Scale))
	rng := max(int(a.Precision)-int(a.Scale), int(b.Precision)-int(b.Scale))
	return boundedDecimal(rng+scale, scale)
}

// tightestCommon is Spark's TypeCoercion.findTightestCommonType plus the
// numeric widening of findWiderTypeForTwo (decimals widen with integrals;
// any with double is double), and string with timestamp/date as its
// binary-comparison rule (the string is cast). It reports false when the
// two have no common type.
func tightestCommon(a, b Type) (Type, bool) {
	if a == b {
		return a, true
	}
	if a.Array || b.Array {
		return Type{}, false
	}
	if a.Kind == row.Null {
		return b, true
	}
	if b.Kind == row.Null {
		return a, true
	}
	if a.IsNumeric() && b.IsNumeric() {
		switch {
		case a.Kind == row.Double || b.Kind == row.Double:
			return DoubleType, true
		case a.Kind == row.Decimal || b.Kind == row.Decimal:
			return widerDecimal(a.asDecimal(), b.asDecimal()), true
		case a.Kind == row.Long || b.Kind == row.Long:
			return LongType, true
		}
		return IntType, true
	}
	if (a.Kind == row.Timestamp && b.Kind == row.Date) || (a.Kind == row.Date && b.Kind == row.Timestamp) {
		return TimestampType, true
	}
	return Type{}, false
}
