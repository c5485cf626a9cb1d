package agg

import (
	"fmt"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/expr"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// Bound says which event-time value, if any, a group key starts with.
type Bound uint8

const (
	// NoBound: the grouping has no event-time column; the watermark neither
	// drops rows nor evicts groups.
	NoBound Bound = iota
	// WindowBound: keys start with the window start; the bound compared
	// with the watermark is the window's end.
	WindowBound
	// TimeBound: the groupBy holds the watermarked event-time column raw;
	// keys start with that time and the bound is the time itself.
	TimeBound
	// SessionBound: a session window on the watermarked column, in append
	// mode; the bound is a session's end (session.go: the state's index
	// keys start with it).
	SessionBound
)

// Measure is one compiled measure.
type Measure struct {
	Fn   string
	Col  int      // input column index; -1 for count(*)
	Kind row.Kind // input column kind
	// Out is the result type: for a decimal sum decimal(p+10, s) and a
	// decimal average decimal(p+4, s+4) (Spark's Sum and Average), whose
	// results are null when they do not fit it.
	Out expr.Type
	// Arg is the argument's type.
	Arg expr.Type
	// op is Fn as a number: the accumulators switch on it for every
	// group and row, where comparing Fn's string cost a tenth of a
	// merge.
	op fnOp
}

// fnOp numbers the measure functions.
type fnOp uint8

const (
	opCount fnOp = iota + 1
	opSum
	opAvg
	opMin
	opMax
	opApproxCountDistinct
)

func opOf(fn string) fnOp {
	switch fn {
	case query.FnCount:
		return opCount
	case query.FnSum:
		return opSum
	case query.FnAvg:
		return opAvg
	case query.FnMin:
		return opMin
	case query.FnMax:
		return opMax
	case query.FnApproxCountDistinct:
		return opApproxCountDistinct
	}
	return 0
}

// Layout is a compiled aggregation: which input columns feed the key and
// the measures, and how the watermark applies to it.
type Layout struct {
	Mode      query.OutputMode
	Window    eventtime.Spec
	WindowCol int // input column index of the window's time column, or -1
	// TimeCol is the watermarked event-time column (-1 without a
	// watermark); its max drives the watermark.
	TimeCol int
	Bound   Bound
	// BoundGroup is the index in GroupCols of the raw event-time column
	// when Bound is TimeBound.
	BoundGroup int
	GroupCols  []int
	GroupKinds []row.Kind
	Measures   []Measure
	Output     []query.Column
	// Session is set for a session window (session.go): SessionCol is its
	// time column and Gap its constant gap in microseconds (0: the caller
	// gives each row's gap to AddSession). SessionLate is set when the
	// watermark is on the session column: a row whose own session ends at
	// or before the previous watermark is dropped, in every output mode,
	// as Spark's SessionWindowStateStoreRestoreExec drops it.
	Session     bool
	SessionCol  int
	Gap         int64
	SessionLate bool
}

// Compile builds the Layout of a validated spec with an aggregate:
// CompilePlan over its plan.
func Compile(s *query.Spec) (*Layout, error) {
	p, err := s.Plan()
	if err != nil {
		return nil, fmt.Errorf("compile aggregate: %w", err)
	}
	if p.Aggregate == nil {
		return nil, fmt.Errorf("compile aggregate: query %s has no aggregate", s.Name)
	}
	return CompilePlan(p, s.OutputMode)
}

// CompilePlan builds the Layout of a plan's aggregate, in output mode
// mode. Its column indices are the map row's (query.Plan.MapRow: the
// source, the join's columns, then the computed ones), which a map task
// folds with Table.Add.
func CompilePlan(p *query.Plan, mode query.OutputMode) (*Layout, error) {
	a := p.Aggregate
	if a == nil {
		return nil, fmt.Errorf("compile aggregate: the plan has no aggregate")
	}
	cols := p.MapRow()
	col := func(i int, what string) error {
		if i < 0 || i >= len(cols) {
			return fmt.Errorf("compile aggregate: %s reads column %d of a map row of %d", what, i, len(cols))
		}
		return nil
	}
	l := &Layout{Mode: mode, WindowCol: -1, TimeCol: p.EventTime, BoundGroup: -1, SessionCol: -1, Output: query.Columns(a.Output)}
	if w := a.Window; w != nil {
		if err := col(w.Column, "the window"); err != nil {
			return nil, err
		}
		l.WindowCol = w.Column
		l.Window = eventtime.Spec{Size: w.Size, Slide: w.Slide, StartTime: w.StartTime}
		if w.Column == p.EventTime {
			l.Bound = WindowBound
		}
	} else if sw := a.Session; sw != nil {
		if err := col(sw.Column, "the session window"); err != nil {
			return nil, err
		}
		l.Session, l.SessionCol, l.Gap = true, sw.Column, sw.Gap
		if sw.Column == p.EventTime {
			l.Bound, l.SessionLate = SessionBound, true
		}
	}
	for gi, g := range a.GroupBy {
		if err := col(g, "the grouping"); err != nil {
			return nil, err
		}
		l.GroupCols = append(l.GroupCols, g)
		l.GroupKinds = append(l.GroupKinds, cols[g].Type.Kind)
		if l.Bound == NoBound && a.Window == nil && !l.Session && p.EventTime >= 0 && g == p.EventTime {
			l.Bound = TimeBound
			l.BoundGroup = gi
		}
	}
	for _, m := range a.Measures {
		cm := Measure{Fn: m.Fn, Col: -1, op: opOf(m.Fn), Out: m.Type}
		if cm.op == 0 {
			return nil, fmt.Errorf("compile aggregate: unknown function %s", m.Fn)
		}
		if m.Arg >= 0 {
			if err := col(m.Arg, m.Fn); err != nil {
				return nil, err
			}
			cm.Col = m.Arg
			cm.Kind = cols[m.Arg].Type.Kind
			cm.Arg = cols[m.Arg].Type
		}
		l.Measures = append(l.Measures, cm)
	}
	if l.Mode == query.Complete {
		// Complete mode keeps every group: no late drop, no eviction
		// (a session window still drops late rows: SessionLate).
		l.Bound = NoBound
	}
	return l, nil
}

// boundEnd returns the event-time bound compared with watermarks for a key
// (window end, or raw time), and false when the layout has no bound.
func (l *Layout) boundEnd(key []byte) (int64, bool) {
	switch l.Bound {
	case WindowBound:
		return readInt64(key) + l.Window.Size, true
	case TimeBound, SessionBound:
		return readInt64(key), true
	}
	return 0, false
}
