package agg

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// mapState is an in-memory State for logic tests.
type mapState map[string][]byte

func (m mapState) Get(k []byte) ([]byte, bool, error) { v, ok := m[string(k)]; return v, ok, nil }
func (m mapState) Put(k, v []byte) error              { m[string(k)] = append([]byte(nil), v...); return nil }
func (m mapState) Delete(k []byte) error              { delete(m, string(k)); return nil }
func (m mapState) Scan(fn func(k, v []byte) error) error {
	for k, v := range m {
		if err := fn([]byte(k), v); err != nil {
			return err
		}
	}
	return nil
}

// rangeState is a mapState with EvictBelow, as the state stores have it:
// Reduce evicts through it instead of scanning.
type rangeState struct{ mapState }

func (m rangeState) EvictBelow(upper []byte, fn func(k, v []byte) error) (int, error) {
	var below []string
	for k := range m.mapState {
		if k < string(upper) {
			below = append(below, k)
		}
	}
	sort.Strings(below)
	for _, k := range below {
		if fn != nil {
			if err := fn([]byte(k), m.mapState[k]); err != nil {
				return 0, err
			}
		}
		delete(m.mapState, k)
	}
	return len(below), nil
}

// sim runs the pure core the way the scheduler does: batch N uses the
// watermark computed after N-1 for eviction and N-1's own watermark for
// late rows, and a no-data batch follows a batch that raised the watermark.
type sim struct {
	spec       query.Spec
	layout     *Layout
	parts      []mapState
	usedPrev   eventtime.Watermark
	cur        eventtime.Watermark
	batch      int
	noData     bool
	partitions int
	// ranged gives Reduce states with EvictBelow.
	ranged bool
}

func parseVTime(s string) (int64, error) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	parts := strings.Split(s, ":")
	var d time.Duration
	units := []time.Duration{time.Hour, time.Minute, time.Second}
	if len(parts) > 3 {
		return 0, fmt.Errorf("bad time %q", s)
	}
	for i, p := range parts {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil {
			return 0, fmt.Errorf("bad time %q", s)
		}
		d += time.Duration(f * float64(units[i]))
	}
	if neg {
		d = -d
	}
	return d.Microseconds(), nil
}

func fmtVTime(us int64) string {
	neg := us < 0
	if neg {
		us = -us
	}
	d := time.Duration(us) * time.Microsecond
	h := int64(d / time.Hour)
	m := int64(d/time.Minute) % 60
	sec := d % time.Minute
	s := fmt.Sprintf("%02d:%02d:%02d", h, m, int64(sec/time.Second))
	if frac := sec % time.Second; frac != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%06d", int64(frac/time.Microsecond)), "0")
	}
	if neg {
		s = "-" + s
	}
	return s
}

func fmtValue(v row.Value) string {
	if v.Kind == row.Timestamp {
		return fmtVTime(v.I)
	}
	return v.String()
}

func (s *sim) setup(td *datadriven.TestData) error {
	spec := query.Spec{
		Name:       "t",
		OutputMode: query.Append,
		Source: query.Source{Schema: []query.Field{
			{Name: "t", Type: "timestamp"}, {Name: "key", Type: "string"}, {Name: "v", Type: "long"}, {Name: "d", Type: "double"},
		}},
		Aggregate: &query.Aggregate{},
	}
	s.partitions = 2
	s.noData = true
	measures := "count"
	groupBy := "key"
	for _, a := range td.CmdArgs {
		val := ""
		if len(a.Vals) > 0 {
			val = a.Vals[0]
		}
		dur := func() (query.Duration, error) {
			d, err := query.ParseDuration(val)
			return query.Duration(d), err
		}
		switch a.Key {
		case "mode":
			spec.OutputMode = query.OutputMode(val)
		case "window":
			d, err := dur()
			if err != nil {
				return err
			}
			if spec.Aggregate.Window == nil {
				spec.Aggregate.Window = &query.Window{Column: "t"}
			}
			spec.Aggregate.Window.Size = d
		case "slide", "start":
			d, err := dur()
			if err != nil {
				return err
			}
			if spec.Aggregate.Window == nil {
				spec.Aggregate.Window = &query.Window{Column: "t"}
			}
			if a.Key == "slide" {
				spec.Aggregate.Window.Slide = d
			} else {
				spec.Aggregate.Window.StartTime = d
			}
		case "delay":
			d, err := dur()
			if err != nil {
				return err
			}
			spec.Watermark = &query.Watermark{Column: "t", Delay: d}
		case "groupBy":
			groupBy = strings.Join(a.Vals, ",")
		case "measures":
			measures = strings.Join(a.Vals, ",")
		case "nodata":
			s.noData = val == "true"
		case "partitions":
			n, err := strconv.Atoi(val)
			if err != nil {
				return err
			}
			s.partitions = n
		default:
			return fmt.Errorf("unknown argument %s", a.Key)
		}
	}
	if groupBy != "" {
		spec.Aggregate.GroupBy = strings.Split(groupBy, ",")
	}
	for _, m := range strings.Split(measures, ",") {
		fn, col, _ := strings.Cut(m, ":")
		name := fn
		if col != "" {
			name = fn + "_" + col
		}
		spec.Aggregate.Measures = append(spec.Aggregate.Measures, query.Measure{Name: name, Fn: fn, Column: col})
	}
	l, err := Compile(&spec)
	if err != nil {
		return err
	}
	s.spec, s.layout = spec, l
	s.parts = make([]mapState, s.partitions)
	for i := range s.parts {
		s.parts[i] = mapState{}
	}
	s.usedPrev, s.cur, s.batch = 0, 0, 0
	return nil
}

func (s *sim) runBatch(b *strings.Builder, rows []row.Row) error {
	wm := eventtime.Batch{Late: s.usedPrev, Evict: s.cur}
	t := NewTable(s.layout)
	dropped := 0
	var maxT int64
	seen := false
	for _, r := range rows {
		dropped += t.Add(r, wm.Late)
		if r[0].Kind != row.Null && (!seen || r[0].I > maxT) {
			maxT, seen = r[0].I, true
		}
	}
	fmt.Fprintf(b, "batch %d: late=%s evict=%s input=%d dropped=%d\n", s.batch, fmtVTime(int64(wm.Late)), fmtVTime(int64(wm.Evict)), len(rows), dropped)
	parts := t.Partition(s.partitions)
	var emitted []string
	for p := range s.parts {
		var st State = s.parts[p]
		if s.ranged {
			st = rangeState{s.parts[p]}
		}
		out, _, err := s.layout.Reduce(st, [][]Entry{parts[p]}, wm)
		if err != nil {
			return err
		}
		for _, r := range out {
			var cells []string
			for i, c := range s.layout.Output {
				cells = append(cells, c.Name+"="+fmtValue(r[i]))
			}
			emitted = append(emitted, "  emit "+strings.Join(cells, " "))
		}
	}
	sort.Strings(emitted)
	for _, e := range emitted {
		b.WriteString(e + "\n")
	}
	stateRows := 0
	for _, p := range s.parts {
		stateRows += len(p)
	}
	delay := int64(0)
	if s.spec.Watermark != nil {
		delay = s.spec.Watermark.Delay.Micros()
	}
	next := s.cur
	if s.spec.Watermark != nil {
		next = eventtime.Advance(s.cur, maxT, seen, delay)
	}
	fmt.Fprintf(b, "  state=%d next-watermark=%s\n", stateRows, fmtVTime(int64(next)))
	used := s.cur
	s.usedPrev, s.cur = s.cur, next
	s.batch++
	if s.noData && eventtime.NeedsNoDataBatch(s.layout.Bound != NoBound, true, used, next) {
		b.WriteString("no-data ")
		return s.runBatch(b, nil)
	}
	return nil
}

func parseRows(input string) ([]row.Row, error) {
	var rows []row.Row
	for _, line := range strings.Split(input, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		r := make(row.Row, 4)
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "t":
				if v == "null" {
					continue
				}
				us, err := parseVTime(v)
				if err != nil {
					return nil, err
				}
				r[0] = row.TimestampValue(us)
			case "key":
				r[1] = row.StringValue(v)
			case "v":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, err
				}
				r[2] = row.LongValue(n)
			case "d":
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return nil, err
				}
				r[3] = row.DoubleValue(f)
			default:
				return nil, fmt.Errorf("unknown column %s", k)
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// TestSemantics runs the files twice: with states Reduce scans to evict,
// and with states it evicts from by range (EvictBelow); both must give
// every file's output.
func TestSemantics(t *testing.T) {
	for _, ranged := range []bool{false, true} {
		t.Run(map[bool]string{false: "scan", true: "range"}[ranged], func(t *testing.T) { testSemantics(t, ranged) })
	}
}

func testSemantics(t *testing.T, ranged bool) {
	// testdata/session/ holds session_test.go's files.
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/*.txt: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			s := &sim{ranged: ranged}
			datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
				switch td.Cmd {
				case "query":
					if err := s.setup(td); err != nil {
						return "error: " + err.Error() + "\n"
					}
					return "ok\n"
				case "batch":
					rows, err := parseRows(td.Input)
					if err != nil {
						return "error: " + err.Error() + "\n"
					}
					var b strings.Builder
					if err := s.runBatch(&b, rows); err != nil {
						return "error: " + err.Error() + "\n"
					}
					return b.String()
				}
				t.Fatalf("unknown command %s", td.Cmd)
				return ""
			})
		})
	}
}
