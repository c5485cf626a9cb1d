package parquet

import (
	"fmt"
	"math/big"
	"reflect"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/format"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// leafNode returns the optional parquet leaf for a column, as Spark writes
// its type: int as INT32, date as INT32 DATE, decimal(p,s) as DECIMAL(p,s)
// on INT32 (p <= 9), INT64 (p <= 18) or a FIXED_LEN_BYTE_ARRAY of the
// fewest bytes that hold p digits (Spark's
// ParquetWriteSupport with writeLegacyFormat false, its default).
func leafNode(c query.Column) (pq.Node, error) {
	var n pq.Node
	switch c.Kind {
	case row.String:
		n = pq.String()
	case row.Long:
		n = pq.Int(64)
	case row.Int:
		n = pq.Int(32)
	case row.Date:
		n = pq.Date()
	case row.Decimal:
		p, s := int(c.Precision), int(c.Scale)
		if p < 1 || p > 38 || s > p {
			return nil, fmt.Errorf("decimal(%d,%d) is not a decimal type (precision 1 to 38, scale at most the precision)", p, s)
		}
		switch {
		case p <= 9:
			n = pq.Decimal(s, p, pq.Int32Type)
		case p <= 18:
			n = pq.Decimal(s, p, pq.Int64Type)
		default:
			n = pq.Decimal(s, p, pq.FixedLenByteArrayType(decimalBytes(p)))
		}
	case row.Double:
		n = pq.Leaf(pq.DoubleType)
	case row.Bool:
		n = pq.Leaf(pq.BooleanType)
	case row.Timestamp:
		n = pq.Timestamp(pq.Microsecond) // isAdjustedToUTC=true
	default:
		return nil, fmt.Errorf("column kind %s has no parquet type (want string, long, int, double, decimal, boolean, date or timestamp)", c.Kind)
	}
	return pq.Optional(n), nil
}

// decimalBytes is Spark's Decimal.minBytesForPrecision: the fewest bytes
// of a two's-complement integer that hold every value of p digits.
func decimalBytes(p int) int {
	limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(p)), nil)
	for n := 1; ; n++ {
		if new(big.Int).Lsh(big.NewInt(1), uint(8*n-1)).Cmp(limit) >= 0 {
			return n
		}
	}
}

// buildSchema returns the parquet schema for the output columns, keeping
// their order (parquet.Group would sort fields by name).
func buildSchema(cols []query.Column) (*pq.Schema, error) {
	if len(cols) == 0 {
		return nil, fmt.Errorf("build parquet schema: no columns")
	}
	seen := make(map[string]bool, len(cols))
	g := &orderedGroup{}
	for _, c := range cols {
		if c.Name == "" {
			return nil, fmt.Errorf("build parquet schema: a column has an empty name")
		}
		if seen[c.Name] {
			return nil, fmt.Errorf("build parquet schema: column %s appears twice", c.Name)
		}
		seen[c.Name] = true
		n, err := leafNode(c)
		if err != nil {
			return nil, fmt.Errorf("build parquet schema: column %s: %w", c.Name, err)
		}
		g.fields = append(g.fields, &orderedField{Node: n, name: c.Name})
	}
	return pq.NewSchema("sluice", g), nil
}

// orderedGroup is a parquet group node whose fields keep the order they were
// given in, so the file's columns appear in the query's output order.
type orderedGroup struct {
	fields []pq.Field
}

func (g *orderedGroup) ID() int                     { return 0 }
func (g *orderedGroup) String() string              { return fmt.Sprintf("group(%d fields)", len(g.fields)) }
func (g *orderedGroup) Type() pq.Type               { return pq.Group{}.Type() }
func (g *orderedGroup) Optional() bool              { return false }
func (g *orderedGroup) Repeated() bool              { return false }
func (g *orderedGroup) Required() bool              { return true }
func (g *orderedGroup) Leaf() bool                  { return false }
func (g *orderedGroup) Fields() []pq.Field          { return g.fields }
func (g *orderedGroup) Encoding() encoding.Encoding { return nil }
func (g *orderedGroup) Compression() compress.Codec { return nil }
func (g *orderedGroup) GoType() reflect.Type        { return reflect.TypeFor[map[string]any]() }

type orderedField struct {
	pq.Node
	name string
}

func (f *orderedField) Name() string { return f.name }

// Value is only used when writing Go values by reflection, which this
// package never does (it writes parquet.Row values).
func (f *orderedField) Value(base reflect.Value) reflect.Value {
	if base.Kind() == reflect.Map {
		return base.MapIndex(reflect.ValueOf(f.name))
	}
	return reflect.Value{}
}

// columnOf maps a parquet leaf column back to an output column (its name,
// row kind, and a decimal's precision and scale). It accepts what this
// package writes, plus the close relatives other writers use (int32
// without annotation, float, timestamps in other units, plain binary).
func columnOf(c *pq.Column) (query.Column, error) {
	col := query.Column{Name: c.Name()}
	t := c.Type()
	lt := t.LogicalType()
	if lt != nil && lt.Value != nil {
		switch l := lt.Value.(type) {
		case *format.TimestampType:
			col.Kind = row.Timestamp
			return col, nil
		case *format.StringType, *format.EnumType, *format.JsonType:
			col.Kind = row.String
			return col, nil
		case *format.DateType:
			col.Kind = row.Date
			return col, nil
		case *format.DecimalType:
			col.Kind, col.Precision, col.Scale = row.Decimal, uint8(l.Precision), uint8(l.Scale)
			return col, nil
		case *format.IntType:
			col.Kind = row.Long
			if l.BitWidth <= 32 {
				col.Kind = row.Int
			}
			return col, nil
		}
	}
	switch t.Kind() {
	case pq.Boolean:
		col.Kind = row.Bool
	case pq.Int32:
		col.Kind = row.Int
	case pq.Int64:
		col.Kind = row.Long
	case pq.Float, pq.Double:
		col.Kind = row.Double
	case pq.ByteArray:
		col.Kind = row.String
	default:
		return col, fmt.Errorf("column %s: parquet type %s has no row kind", c.Name(), t)
	}
	return col, nil
}

// timestampScale returns the factor that turns a timestamp column's values
// into microseconds: a multiplier (>0) or a divisor (<0).
func timestampScale(c *pq.Column) int64 {
	lt := c.Type().LogicalType()
	if lt == nil {
		return 1
	}
	ts, ok := lt.Value.(*format.TimestampType)
	if !ok {
		return 1
	}
	switch ts.Unit.Value.(type) {
	case *format.MilliSeconds:
		return 1000
	case *format.NanoSeconds:
		return -1000
	}
	return 1
}
