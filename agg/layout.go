package agg

import (
	"fmt"

	"github.com/sluicehq/sluice/eventtime"
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

// Compile builds the Layout of a validated spec with an aggregate.
func Compile(s *query.Spec) (*Layout, error) {
	if s.Aggregate == nil {
		return nil, fmt.Errorf("compile aggregate: query %s has no aggregate", s.Name)
	}
	in := s.InputSchema()
	index := func(name string) (int, error) {
		for i, c := range in {
			if c.Name == name {
				return i, nil
			}
		}
		return -1, fmt.Errorf("compile aggregate: column %q is not in the schema", name)
	}
	l := &Layout{Mode: s.OutputMode, WindowCol: -1, TimeCol: -1, BoundGroup: -1, SessionCol: -1, Output: s.OutputSchema()}
	wmCol := ""
	if s.Watermark != nil {
		wmCol = s.Watermark.Column
		i, err := index(wmCol)
		if err != nil {
			return nil, err
		}
		l.TimeCol = i
	}
	a := s.Aggregate
	if a.Window != nil {
		i, err := index(a.Window.Column)
		if err != nil {
			return nil, err
		}
		l.WindowCol = i
		l.Window = eventtime.Spec{Size: a.Window.Size.Micros(), Slide: a.Window.SlideOrSize().Micros(), StartTime: a.Window.StartTime.Micros()}
		if a.Window.Column == wmCol {
			l.Bound = WindowBound
		}
	} else if sw := a.SessionWindow; sw != nil {
		i, err := index(sw.Column)
		if err != nil {
			return nil, err
		}
		l.Session, l.SessionCol, l.Gap = true, i, sw.Gap.Micros()
		if sw.Column == wmCol {
			l.Bound, l.SessionLate = SessionBound, true
		}
	}
	for gi, g := range a.GroupBy {
		i, err := index(g)
		if err != nil {
			return nil, err
		}
		l.GroupCols = append(l.GroupCols, i)
		l.GroupKinds = append(l.GroupKinds, in[i].Kind)
		if l.Bound == NoBound && a.Window == nil && !l.Session && g == wmCol {
			l.Bound = TimeBound
			l.BoundGroup = gi
		}
	}
	for _, m := range a.Measures {
		cm := Measure{Fn: m.Fn, Col: -1, op: opOf(m.Fn)}
		if m.Column != "" {
			i, err := index(m.Column)
			if err != nil {
				return nil, err
			}
			cm.Col = i
			cm.Kind = in[i].Kind
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
