package parquet

import (
	"fmt"
	"reflect"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/format"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// leafNode returns the optional parquet leaf for a column kind.
func leafNode(k row.Kind) (pq.Node, error) {
	var n pq.Node
	switch k {
	case row.String:
		n = pq.String()
	case row.Long:
		n = pq.Int(64)
	case row.Double:
		n = pq.Leaf(pq.DoubleType)
	case row.Bool:
		n = pq.Leaf(pq.BooleanType)
	case row.Timestamp:
		n = pq.Timestamp(pq.Microsecond) // isAdjustedToUTC=true
	default:
		return nil, fmt.Errorf("column kind %s has no parquet type (want string, long, double, boolean or timestamp)", k)
	}
	return pq.Optional(n), nil
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
		n, err := leafNode(c.Kind)
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

// kindOfColumn maps a parquet leaf column back to a row kind. It accepts
// what this package writes, plus the close relatives other writers use
// (int32, float, timestamps in other units, plain binary).
func kindOfColumn(c *pq.Column) (row.Kind, error) {
	t := c.Type()
	lt := t.LogicalType()
	if lt != nil && lt.Value != nil {
		switch lt.Value.(type) {
		case *format.TimestampType:
			return row.Timestamp, nil
		case *format.StringType, *format.EnumType, *format.JsonType:
			return row.String, nil
		case *format.IntType:
			return row.Long, nil
		}
	}
	switch t.Kind() {
	case pq.Boolean:
		return row.Bool, nil
	case pq.Int32, pq.Int64:
		return row.Long, nil
	case pq.Float, pq.Double:
		return row.Double, nil
	case pq.ByteArray:
		return row.String, nil
	}
	return row.Null, fmt.Errorf("column %s: parquet type %s has no row kind", c.Name(), t)
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
