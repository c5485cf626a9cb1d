package query

import (
	"fmt"

	"github.com/sluicehq/sluice/row"
)

// Column is one output column. A decimal column carries its precision and
// scale (Spark's decimal(p, s)); they are zero for every other kind.
type Column struct {
	Name      string
	Kind      row.Kind
	Precision uint8
	Scale     uint8
}

// String is {name kind}, or {name decimal(p,s)}.
func (c Column) String() string {
	if c.Kind == row.Decimal {
		return fmt.Sprintf("{%s decimal(%d,%d)}", c.Name, c.Precision, c.Scale)
	}
	return fmt.Sprintf("{%s %s}", c.Name, c.Kind)
}

// TypeName is the column's type as Spark names it in a schema: string,
// bigint, int, double, boolean, timestamp, date, decimal(p,s).
func (c Column) TypeName() string {
	switch c.Kind {
	case row.Long:
		return "bigint"
	case row.Decimal:
		return fmt.Sprintf("decimal(%d,%d)", c.Precision, c.Scale)
	}
	return c.Kind.String()
}

// Output column names for a window.
const (
	WindowStart = "window_start"
	WindowEnd   = "window_end"
)

// Output column names for a session window: Spark's struct column
// session_window (start, end), flattened as window is.
const (
	SessionWindowStart = "session_window_start"
	SessionWindowEnd   = "session_window_end"
)

// InputSchema returns the columns of an event row as the aggregation (or
// the sink, without one) sees it: the declared source columns with their
// kinds, then the columns a join adds (JoinColumns).
func (s *Spec) InputSchema() []Column {
	cols := make([]Column, 0, len(s.Source.Schema))
	for _, f := range s.Source.Schema {
		k, _ := row.ParseKind(f.Type)
		cols = append(cols, Column{Name: f.Name, Kind: k})
	}
	return append(cols, s.JoinColumns()...)
}

// OutputSchema returns the columns of the query's output rows: for an
// aggregation, window_start and window_end (if windowed) or
// session_window_start and session_window_end (with a session window), the
// groupBy columns, then the measures; without one, the input columns
// (dedup keeps them); with sql:, its plan's output. It assumes a validated
// spec.
func (s *Spec) OutputSchema() []Column {
	in := s.InputSchema()
	kindOf := func(name string) row.Kind {
		for _, c := range in {
			if c.Name == name {
				return c.Kind
			}
		}
		return row.Null
	}
	if s.SQL != "" {
		if p, err := s.Plan(); err == nil {
			return p.OutputColumns()
		}
		return nil
	}
	if s.Aggregate == nil {
		return in
	}
	var out []Column
	if s.Aggregate.Window != nil {
		out = append(out, Column{Name: WindowStart, Kind: row.Timestamp}, Column{Name: WindowEnd, Kind: row.Timestamp})
	} else if s.Aggregate.SessionWindow != nil {
		out = append(out, Column{Name: SessionWindowStart, Kind: row.Timestamp}, Column{Name: SessionWindowEnd, Kind: row.Timestamp})
	}
	for _, g := range s.Aggregate.GroupBy {
		out = append(out, Column{Name: g, Kind: kindOf(g)})
	}
	for _, m := range s.Aggregate.Measures {
		out = append(out, Column{Name: m.Name, Kind: MeasureKind(m.Fn, kindOf(m.Column))})
	}
	return out
}

// MeasureKind is the output kind of a measure function over a column kind.
func MeasureKind(fn string, col row.Kind) row.Kind {
	switch fn {
	case FnCount, FnApproxCountDistinct:
		return row.Long
	case FnAvg:
		return row.Double
	case FnSum:
		if col == row.Double {
			return row.Double
		}
		return row.Long
	default: // min, max
		return col
	}
}
