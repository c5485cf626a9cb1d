package query

import "github.com/sluicehq/sluice/row"

// Column is one output column.
type Column struct {
	Name string
	Kind row.Kind
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
		out = append(out, Column{WindowStart, row.Timestamp}, Column{WindowEnd, row.Timestamp})
	} else if s.Aggregate.SessionWindow != nil {
		out = append(out, Column{SessionWindowStart, row.Timestamp}, Column{SessionWindowEnd, row.Timestamp})
	}
	for _, g := range s.Aggregate.GroupBy {
		out = append(out, Column{g, kindOf(g)})
	}
	for _, m := range s.Aggregate.Measures {
		out = append(out, Column{m.Name, MeasureKind(m.Fn, kindOf(m.Column))})
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
