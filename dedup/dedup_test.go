package dedup_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/sluicehq/sluice/dedup"
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/statestore"
	"github.com/sluicehq/sluice/statestore/statetest"
)

// The rows of the tests: t timestamp, id string, v long.
var schema = []query.Field{{Name: "t", Type: "timestamp"}, {Name: "id", Type: "string"}, {Name: "v", Type: "long"}}

// sim runs dedup the way the engine runs a batch: map tasks (contiguous
// chunks of the batch's rows, as splits are) each through a Table, then a
// reduce per state partition over the maps' rows in map order, on a real
// state provider; batch N uses the previous batch's watermark for late
// rows and its own for eviction, and a no-data batch follows a batch that
// raised the watermark (docs/semantics.md, "Late rows", "No-data batches").
type sim struct {
	h             *statetest.Harness
	l             *dedup.Layout
	noData        bool
	usedPrev, cur eventtime.Watermark
	batch         int64
	attempt       int
	last          *ran
}

// ran is one batch as it ran: what a re-run must reproduce.
type ran struct {
	id    int64
	wm    eventtime.Batch
	byMap [][][]row.Row // [partition][map]
	out   []row.Row
	state []map[string]string
}

func newSim(t testing.TB, provider string, keys []string, delay time.Duration, partitions int) (*sim, error) {
	spec := query.Spec{
		Name:      "t",
		Source:    query.Source{Schema: schema},
		Watermark: &query.Watermark{Column: "t", Delay: query.Duration(delay)},
		Dedup:     &query.Dedup{Keys: keys},
	}
	l, err := dedup.Compile(&spec)
	if err != nil {
		return nil, err
	}
	h := statetest.New(t, provider, statetest.Options{Partitions: partitions, Operator: 1, BoundPrefix: true})
	return &sim{h: h, l: l, noData: true}, nil
}

// stats of one batch, summed over its tasks.
type batchStats struct {
	late, dups int64
	dedup.Stats
}

// run runs one batch of rows cut into maps map tasks and returns the kept
// rows. It updates the watermark and runs the no-data batch that follows
// (its output appended to noData).
func (s *sim) run(t testing.TB, rows []row.Row, maps int) ([]row.Row, batchStats, error) {
	wm := eventtime.Batch{Late: s.usedPrev, Evict: s.cur}
	n := s.h.Partitions()
	byMap := make([][][]row.Row, n)
	var st batchStats
	if maps < 1 {
		maps = 1
	}
	for m := range maps {
		tbl := dedup.NewTable(s.l, n)
		for _, r := range rows[m*len(rows)/maps : (m+1)*len(rows)/maps] {
			tbl.Add(r, wm.Late)
		}
		st.late += tbl.Late
		st.dups += tbl.Duplicates
		for p, rs := range tbl.Rows() {
			byMap[p] = append(byMap[p], rs)
		}
	}
	s.attempt++
	out, rst, err := s.reduce(s.batch, fmt.Sprintf("a%d", s.attempt), wm, byMap)
	if err != nil {
		return nil, st, err
	}
	st.Stats = rst
	s.last = &ran{id: s.batch, wm: wm, byMap: byMap, out: out, state: s.h.State(s.batch + 1)}
	var maxT int64
	seen := false
	for _, r := range rows {
		if v := r[0]; v.Kind != row.Null && (!seen || v.I > maxT) {
			maxT, seen = v.I, true
		}
	}
	next := eventtime.Advance(s.cur, maxT, seen, s.l.Delay)
	s.usedPrev, s.cur = s.cur, next
	s.batch++
	return out, st, nil
}

func (s *sim) reduce(id int64, attempt string, wm eventtime.Batch, byMap [][][]row.Row) ([]row.Row, dedup.Stats, error) {
	var out []row.Row
	var total dedup.Stats
	err := s.h.Batch(id, attempt, func(p ids.PartitionID, st statestore.Store) error {
		kept, stats, err := s.l.Reduce(st, byMap[p], wm)
		out = append(out, kept...)
		total.Updated += stats.Updated
		total.Removed += stats.Removed
		total.Duplicates += stats.Duplicates
		total.Late += stats.Late
		return err
	})
	return out, total, err
}

// rerun runs the last batch again under a new attempt, from the state
// committed before it, and reports whether its rows and state are the
// first attempt's.
func (s *sim) rerun() (bool, string) {
	r := s.last
	s.attempt++
	out, _, err := s.reduce(r.id, fmt.Sprintf("a%d", s.attempt), r.wm, r.byMap)
	if err != nil {
		return false, err.Error()
	}
	if a, b := fmtRows(r.out), fmtRows(out); a != b {
		return false, fmt.Sprintf("rows differ:\n%s\nagainst\n%s", a, b)
	}
	if ok, diff := statetest.Equal(r.state, s.h.State(r.id+1)); !ok {
		return false, "state differs: " + diff
	}
	return true, ""
}

func (s *sim) stateKeys() int {
	n := 0
	for _, m := range s.h.State(s.batch) {
		for k := range m {
			if strings.HasPrefix(k, "\xff\xff\xff\xff\xff\xff\xff\xff") {
				n++
			}
		}
	}
	return n
}

func parseVTime(s string) (int64, error) {
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

func fmtVTime(us int64) string {
	d := time.Duration(us) * time.Microsecond
	s := fmt.Sprintf("%02d:%02d:%02d", int64(d/time.Hour), int64(d/time.Minute)%60, int64(d/time.Second)%60)
	if frac := d % time.Second; frac != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%06d", int64(frac/time.Microsecond)), "0")
	}
	return s
}

func fmtRow(r row.Row) string {
	var cells []string
	for i, f := range schema {
		v := r[i]
		s := v.String()
		switch {
		case v.Kind == row.Null:
			s = "null"
		case v.Kind == row.Timestamp:
			s = fmtVTime(v.I)
		}
		cells = append(cells, f.Name+"="+s)
	}
	return strings.Join(cells, " ")
}

func fmtRows(rs []row.Row) string {
	lines := make([]string, len(rs))
	for i, r := range rs {
		lines[i] = fmtRow(r)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func parseRows(input string) ([]row.Row, error) {
	var rows []row.Row
	for _, line := range strings.Split(input, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		r := make(row.Row, len(schema))
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			if v == "null" {
				continue
			}
			switch k {
			case "t":
				us, err := parseVTime(v)
				if err != nil {
					return nil, err
				}
				r[0] = row.TimestampValue(us)
			case "id":
				r[1] = row.StringValue(v)
			case "v":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, err
				}
				r[2] = row.LongValue(n)
			default:
				return nil, fmt.Errorf("unknown column %s", k)
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// TestSemantics runs testdata/*.txt on each state provider. Commands:
//
//	query delay=D [keys=id,v] [partitions=N] [nodata=false]
//	batch [maps=N]        rows, one per line: t=hh:mm:ss id=x v=n (null allowed)
//	restart               a new provider over the same checkpoint
//	rerun                 the last batch again under a new attempt
//
// A batch prints its watermarks, the rows kept (sorted), the counts, the
// keys in state and the next watermark, then the no-data batch if one
// follows.
func TestSemantics(t *testing.T) {
	for _, provider := range statetest.Providers {
		t.Run(provider, func(t *testing.T) {
			datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
				var s *sim
				datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
					switch td.Cmd {
					case "query":
						keys, delay, parts := []string{"id"}, time.Duration(0), 2
						for _, a := range td.CmdArgs {
							switch a.Key {
							case "keys":
								keys = a.Vals
							case "delay":
								d, err := query.ParseDuration(a.Vals[0])
								if err != nil {
									return "error: " + err.Error() + "\n"
								}
								delay = d
							case "partitions":
								parts, _ = strconv.Atoi(a.Vals[0])
							case "nodata":
							default:
								t.Fatalf("%s: unknown argument %s", td.Pos, a.Key)
							}
						}
						var err error
						if s, err = newSim(t, provider, keys, delay, parts); err != nil {
							return "error: " + err.Error() + "\n"
						}
						s.noData = !td.HasArg("nodata")
						return "ok\n"
					case "batch":
						rows, err := parseRows(td.Input)
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

func (s *sim) print(t *testing.T, b *strings.Builder, prefix string, rows []row.Row, maps int) {
	wm := eventtime.Batch{Late: s.usedPrev, Evict: s.cur}
	id := s.batch
	out, st, err := s.run(t, rows, maps)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(b, "%sbatch %d: late=%s evict=%s input=%d\n", prefix, id, fmtVTime(int64(wm.Late)), fmtVTime(int64(wm.Evict)), len(rows))
	for _, line := range strings.Split(fmtRows(out), "\n") {
		if line != "" {
			fmt.Fprintf(b, "  keep %s\n", line)
		}
	}
	fmt.Fprintf(b, "  dropped late=%d duplicates=%d (in a task %d); stored=%d evicted=%d\n",
		st.late+st.Late, st.dups+st.Duplicates, st.dups, st.Updated, st.Removed)
	fmt.Fprintf(b, "  state keys=%d next-watermark=%s\n", s.stateKeys(), fmtVTime(int64(s.cur)))
	if eventtime.NeedsNoDataBatch(s.l.EvictsByWatermark(), s.noData, wm.Evict, s.cur) {
		s.print(t, b, "no-data ", nil, 1)
	}
}
