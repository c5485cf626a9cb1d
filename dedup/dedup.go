package dedup

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/agg"
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// Layout is a compiled dedup: which input columns make the key, which one
// is the watermarked event time, and the watermark delay.
type Layout struct {
	KeyCols  []int
	KeyKinds []row.Kind
	// TimeCol is the input index of the watermarked event-time column.
	TimeCol int
	// Delay is the watermark delay in microseconds.
	Delay int64
}

// Compile builds the Layout of a validated spec with a dedup. The
// columns are indexes into the source schema (dedup runs on the source
// rows, before the join).
func Compile(s *query.Spec) (*Layout, error) {
	if s.Dedup == nil {
		return nil, fmt.Errorf("compile dedup: query %s has no dedup", s.Name)
	}
	if s.Watermark == nil {
		return nil, fmt.Errorf("compile dedup: query %s has no watermark", s.Name)
	}
	index := func(name string) (int, row.Kind, error) {
		for i, f := range s.Source.Schema {
			if f.Name == name {
				k, _ := row.ParseKind(f.Type)
				return i, k, nil
			}
		}
		return -1, row.Null, fmt.Errorf("compile dedup: column %q is not in the source schema", name)
	}
	l := &Layout{Delay: s.Watermark.Delay.Micros()}
	var err error
	if l.TimeCol, _, err = index(s.Watermark.Column); err != nil {
		return nil, err
	}
	for _, k := range s.Dedup.Keys {
		i, kind, err := index(k)
		if err != nil {
			return nil, err
		}
		l.KeyCols = append(l.KeyCols, i)
		l.KeyKinds = append(l.KeyKinds, kind)
	}
	return l, nil
}

// CompilePlan builds the Layout of a plan's dedup (query.Plan.Dedup: key
// indices into the source row) with the watermark delay in microseconds.
func CompilePlan(p *query.Plan, delay int64) (*Layout, error) {
	d := p.Dedup
	if d == nil {
		return nil, fmt.Errorf("compile dedup: the plan has no dedup")
	}
	if p.EventTime < 0 {
		return nil, fmt.Errorf("compile dedup: the plan has no watermark")
	}
	l := &Layout{TimeCol: p.EventTime, Delay: delay}
	for _, k := range d.Keys {
		if k < 0 || k >= len(p.Source) {
			return nil, fmt.Errorf("compile dedup: key column %d of a source row of %d", k, len(p.Source))
		}
		l.KeyCols = append(l.KeyCols, k)
		l.KeyKinds = append(l.KeyKinds, p.Source[k].Type.Kind)
	}
	return l, nil
}

// EvictsByWatermark reports that dedup's state is evicted by the
// watermark, so a batch that raised it is followed by a no-data batch
// (eventtime.NeedsNoDataBatch), in every output mode.
func (l *Layout) EvictsByWatermark() bool { return true }

// AppendKey appends the encoding of r's dedup key.
func (l *Layout) AppendKey(b []byte, r row.Row) []byte { return agg.AppendKey(b, r, l.KeyCols) }

// Late reports whether r is dropped as late against wLate: its event time
// is at or before it. A null time is never late.
func (l *Layout) Late(r row.Row, wLate eventtime.Watermark) bool {
	v := r[l.TimeCol]
	return v.Kind != row.Null && eventtime.Late(v.I, wLate)
}

// expiresAt is when r's key leaves the state: its event time (0 when
// null, as Spark reads it) plus the delay, kept below math.MaxInt64.
func (l *Layout) expiresAt(r row.Row) int64 {
	var t int64
	if v := r[l.TimeCol]; v.Kind != row.Null {
		t = v.I
	}
	if t > math.MaxInt64-1-l.Delay {
		return math.MaxInt64 - 1
	}
	return t + l.Delay
}

// Table is a map task's side of dedup: it drops late rows and a key's
// later rows within the task, and puts the rest by state partition in
// read order. It is not safe for concurrent use.
type Table struct {
	l     *Layout
	parts [][]row.Row
	seen  map[string]struct{}
	key   []byte
	// Late counts the rows dropped as late; Duplicates the rows dropped
	// because an earlier row of the task had their key.
	Late, Duplicates int64
}

// NewTable returns an empty table for n state partitions.
func NewTable(l *Layout, n int) *Table {
	return &Table{l: l, parts: make([][]row.Row, n), seen: map[string]struct{}{}}
}

// Add takes one row, in the task's read order, and reports whether it was
// dropped as late. A kept row is copied (the caller may reuse r).
func (t *Table) Add(r row.Row, wLate eventtime.Watermark) (late bool) {
	if t.l.Late(r, wLate) {
		t.Late++
		return true
	}
	t.key = t.l.AppendKey(t.key[:0], r)
	if _, dup := t.seen[string(t.key)]; dup {
		t.Duplicates++
		return false
	}
	t.seen[string(t.key)] = struct{}{}
	p := agg.PartitionOf(t.key, len(t.parts))
	t.parts[p] = append(t.parts[p], append(row.Row(nil), r...))
	return false
}

// Rows returns the kept rows by state partition, each in read order.
func (t *Table) Rows() [][]row.Row { return t.parts }
