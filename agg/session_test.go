package agg_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/sluicehq/sluice/agg"
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/statestore"
	"github.com/sluicehq/sluice/statestore/statetest"
)

// The rows of the session tests: t timestamp, key string, v long, d double.
var sessSchema = []query.Field{{Name: "t", Type: "timestamp"}, {Name: "key", Type: "string"}, {Name: "v", Type: "long"}, {Name: "d", Type: "double"}}

// sessSim runs a session-window aggregation the way the engine runs a
// batch: map tasks (contiguous chunks of the batch's rows, as splits are)
// each fold their rows into an agg.Table and Partition it; each state
// partition's reduce gets the maps' partials in map order, on a real
// state provider; batch N drops late rows with the previous batch's
// watermark and evicts with its own, and a no-data batch follows a batch
// that raised the watermark when the layout evicts.
type sessSim struct {
	h             *statetest.Harness
	spec          query.Spec
	l             *agg.Layout
	noData        bool
	usedPrev, cur eventtime.Watermark
	batch         int64
	attempt       int
	last          *sessRan
}

type sessRan struct {
	id       int64
	wm       eventtime.Batch
	partials [][][]agg.Entry // [partition][map]
	out      []row.Row
	state    []map[string]string
}

func newSessSim(t testing.TB, provider string, mode query.OutputMode, gap, delay time.Duration, watermark bool, groupBy, measures []string, partitions int) (*sessSim, error) {
	spec := query.Spec{
		Name:       "t",
		OutputMode: mode,
		Source:     query.Source{Schema: sessSchema},
		Aggregate: &query.Aggregate{
			SessionWindow: &query.SessionWindow{Column: "t", Gap: query.Duration(gap)},
			GroupBy:       groupBy,
		},
	}
	if watermark {
		spec.Watermark = &query.Watermark{Column: "t", Delay: query.Duration(delay)}
	}
	for _, m := range measures {
		fn, col, _ := strings.Cut(m, ":")
		name := fn
		if col != "" {
			name = fn + "_" + col
		}
		spec.Aggregate.Measures = append(spec.Aggregate.Measures, query.Measure{Name: name, Fn: fn, Column: col})
	}
	l, err := agg.Compile(&spec)
	if err != nil {
		return nil, err
	}
	h := statetest.New(t, provider, statetest.Options{Partitions: partitions, BoundPrefix: l.BoundPrefix()})
	return &sessSim{h: h, spec: spec, l: l, noData: true}, nil
}

// run runs one batch of rows cut into maps map tasks and returns the rows
// emitted and how many rows the map side dropped as late.
func (s *sessSim) run(rows []row.Row, maps int) ([]row.Row, int, error) {
	wm := eventtime.Batch{Late: s.usedPrev, Evict: s.cur}
	n := s.h.Partitions()
	partials := make([][][]agg.Entry, n)
	dropped := 0
	maps = max(maps, 1)
	for m := range maps {
		tbl := agg.NewTable(s.l)
		for _, r := range rows[m*len(rows)/maps : (m+1)*len(rows)/maps] {
			dropped += tbl.Add(r, wm.Late)
		}
		for p, es := range tbl.Partition(n) {
			partials[p] = append(partials[p], es)
		}
	}
	s.attempt++
	out, err := s.reduce(s.batch, fmt.Sprintf("a%d", s.attempt), wm, partials)
	if err != nil {
		return nil, 0, err
	}
	s.last = &sessRan{id: s.batch, wm: wm, partials: partials, out: out, state: s.h.State(s.batch + 1)}
	next := s.cur
	if w := s.spec.Watermark; w != nil {
		var maxT int64
		seen := false
		for _, r := range rows {
			if v := r[0]; v.Kind != row.Null && (!seen || v.I > maxT) {
				maxT, seen = v.I, true
			}
		}
		next = eventtime.Advance(s.cur, maxT, seen, w.Delay.Micros())
	}
	s.usedPrev, s.cur = s.cur, next
	s.batch++
	return out, dropped, nil
}

func (s *sessSim) reduce(id int64, attempt string, wm eventtime.Batch, partials [][][]agg.Entry) ([]row.Row, error) {
	var out []row.Row
	err := s.h.Batch(id, attempt, func(p ids.PartitionID, st statestore.Store) error {
		rows, _, err := s.l.Reduce(st, partials[p], wm)
		out = append(out, rows...)
		return err
	})
	return out, err
}

func (s *sessSim) rerun() (bool, string) {
	r := s.last
	s.attempt++
	out, err := s.reduce(r.id, fmt.Sprintf("a%d", s.attempt), r.wm, r.partials)
	if err != nil {
		return false, err.Error()
	}
	if a, b := s.fmtRows(r.out), s.fmtRows(out); a != b {
		return false, fmt.Sprintf("rows differ:\n%s\nagainst\n%s", a, b)
	}
	if ok, diff := statetest.Equal(r.state, s.h.State(r.id+1)); !ok {
		return false, "state differs: " + diff
	}
	return true, ""
}

// needsNoData says whether a no-data batch follows the batch that used
// watermark used, as the scheduler decides it (the layout evicts).
func (s *sessSim) needsNoData(used eventtime.Watermark) bool {
	return eventtime.NeedsNoDataBatch(s.l.Bound != agg.NoBound, s.noData, used, s.cur)
}

func (s *sessSim) fmtRows(rs []row.Row) string {
	lines := make([]string, len(rs))
	for i, r := range rs {
		var cells []string
		for j, c := range s.l.Output {
			v := r[j]
			str := v.String()
			switch {
			case v.Kind == row.Null:
				str = "null"
			case v.Kind == row.Timestamp:
				str = fmtSessTime(v.I)
			}
			cells = append(cells, c.Name+"="+str)
		}
		lines[i] = strings.Join(cells, " ")
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func parseSessTime(s string) (int64, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return 0, fmt.Errorf("bad time %q (want hh:mm:ss)", s)
	}
	var d time.Duration
	for i, unit := range []time.Duration{time.Hour, time.Minute, time.Second} {
		f, err := strconv.ParseFloat(parts[i], 64)
		if err != nil {
			return 0, fmt.Errorf("bad time %q", s)
		}
		d += time.Duration(f * float64(unit))
	}
	return d.Microseconds(), nil
}

func fmtSessTime(us int64) string {
	d := time.Duration(us) * time.Microsecond
	s := fmt.Sprintf("%02d:%02d:%02d", int64(d/time.Hour), int64(d/time.Minute)%60, int64(d/time.Second)%60)
	if frac := d % time.Second; frac != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%06d", int64(frac/time.Microsecond)), "0")
	}
	return s
}

func parseSessRows(input string) ([]row.Row, error) {
	var rows []row.Row
	for _, line := range strings.Split(input, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		r := make(row.Row, len(sessSchema))
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			if v == "null" {
				continue
			}
			switch k {
			case "t":
				us, err := parseSessTime(v)
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
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return nil, err
				}
				r[3] = row.DoubleValue(x)
			default:
				return nil, fmt.Errorf("unknown column %s", k)
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// stateCounts counts a partition set's primary rows (keys) and index rows
// (open sessions, in append mode).
func stateCounts(state []map[string]string) (keys, index int) {
	for _, m := range state {
		for k := range m {
			if strings.HasPrefix(k, "\xff\xff\xff\xff\xff\xff\xff\xff") {
				keys++
			} else {
				index++
			}
		}
	}
	return keys, index
}

// TestSessionSemantics runs testdata/session/*.txt on each state
// provider. Commands:
//
//	query mode=M gap=D [delay=D | nowatermark] [groupBy=a,b] [measures=count,sum:v,...] [partitions=N] [nodata=false]
//	batch [maps=N]        rows, one per line: t=hh:mm:ss key=x v=n d=x (null allowed)
//	restart               a new provider over the same checkpoint
//	rerun                 the last batch again under a new attempt
func TestSessionSemantics(t *testing.T) {
	for _, provider := range statetest.Providers {
		t.Run(provider, func(t *testing.T) {
			datadriven.Walk(t, "testdata/session", func(t *testing.T, path string) {
				var s *sessSim
				datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
					switch td.Cmd {
					case "query":
						mode, gap, delay, wm := query.Append, time.Duration(0), time.Duration(0), true
						groupBy, measures, parts := []string{"key"}, []string{"count"}, 2
						noData := true
						for _, a := range td.CmdArgs {
							var err error
							switch a.Key {
							case "mode":
								mode = query.OutputMode(a.Vals[0])
							case "gap":
								gap, err = query.ParseDuration(a.Vals[0])
							case "delay":
								delay, err = query.ParseDuration(a.Vals[0])
							case "nowatermark":
								wm = false
							case "groupBy":
								groupBy = a.Vals
							case "measures":
								measures = a.Vals
							case "partitions":
								parts, err = strconv.Atoi(a.Vals[0])
							case "nodata":
								noData = a.Vals[0] != "false"
							default:
								t.Fatalf("%s: unknown argument %s", td.Pos, a.Key)
							}
							if err != nil {
								t.Fatalf("%s: %v", td.Pos, err)
							}
						}
						var err error
						if s, err = newSessSim(t, provider, mode, gap, delay, wm, groupBy, measures, parts); err != nil {
							return "error: " + err.Error() + "\n"
						}
						s.noData = noData
						return "ok\n"
					case "batch":
						rows, err := parseSessRows(td.Input)
						if err != nil {
							t.Fatalf("%s: %v", td.Pos, err)
						}
						maps := 1
						if td.HasArg("maps") {
							td.ScanArgs(t, "maps", &maps)
						}
						var b strings.Builder
						s.print(t, &b, "", rows, maps)
						return b.String()
					case "restart":
						s.h.Restart()
						return "ok\n"
					case "rerun":
						if ok, diff := s.rerun(); !ok {
							t.Fatalf("%s: re-run of batch %d: %s", td.Pos, s.last.id, diff)
						}
						return fmt.Sprintf("batch %d again: same rows and state\n", s.last.id)
					}
					t.Fatalf("%s: unknown command %s", td.Pos, td.Cmd)
					return ""
				})
			})
		})
	}
}

func (s *sessSim) print(t *testing.T, b *strings.Builder, prefix string, rows []row.Row, maps int) {
	wm := eventtime.Batch{Late: s.usedPrev, Evict: s.cur}
	id := s.batch
	out, dropped, err := s.run(rows, maps)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(b, "%sbatch %d: late=%s evict=%s input=%d dropped=%d\n", prefix, id, fmtSessTime(int64(wm.Late)), fmtSessTime(int64(wm.Evict)), len(rows), dropped)
	for _, line := range strings.Split(s.fmtRows(out), "\n") {
		if line != "" {
			fmt.Fprintf(b, "  emit %s\n", line)
		}
	}
	keys, index := stateCounts(s.last.state)
	fmt.Fprintf(b, "  state keys=%d index=%d next-watermark=%s\n", keys, index, fmtSessTime(int64(s.cur)))
	if s.needsNoData(wm.Evict) {
		s.print(t, b, "no-data ", nil, 1)
	}
}

// Spark's dynamic gap (an expression per row) is AddSession's gap: a row
// with a gap <= 0 is dropped, as Spark's filter on session_window drops
// it, and each row's session is [t, t+its gap).
func TestDynamicGapPerRow(t *testing.T) {
	s, err := newSessSim(t, "memory", query.Complete, time.Minute, 0, false, []string{"key"}, []string{"count", "sum:v"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	min := func(n int64) int64 { return n * int64(time.Minute/time.Microsecond) }
	rows := []struct {
		t, gap int64
		v      int64
	}{
		{min(0), min(5), 1},    // [0, 5)
		{min(5), min(1), 2},    // [5, 6): starts at 5, joins
		{min(7), 0, 4},         // no session
		{min(8), -min(1), 8},   // no session
		{min(20), min(30), 16}, // [20, 50)
		{min(40), min(2), 32},  // inside [20, 50)
	}
	tbl := agg.NewTable(s.l)
	for _, r := range rows {
		tbl.AddSession(row.Row{row.TimestampValue(r.t), row.StringValue("a"), row.LongValue(r.v), {}}, r.gap, 0)
	}
	out, err := s.reduce(0, "a", eventtime.Batch{}, [][][]agg.Entry{{tbl.Partition(1)[0]}})
	if err != nil {
		t.Fatal(err)
	}
	want := "session_window_start=00:00:00 session_window_end=00:06:00 key=a count=2 sum_v=3\n" +
		"session_window_start=00:20:00 session_window_end=00:50:00 key=a count=2 sum_v=48"
	if got := s.fmtRows(out); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
