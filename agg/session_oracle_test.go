package agg_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
)

// oracleSessions is docs/semantics.md's rule for session windows,
// recomputed from the raw rows after every run instead of merged
// incrementally: runs[j] are the rows of run j (none for a no-data run),
// late[j] and evict[j] its watermarks (hasWM false: no watermark). A row
// with a null time, or (with a watermark) whose [t, t+gap) ends at or
// before late[j], is dropped. The rows not yet written form each key's
// pool; a key's sessions are the connected groups of its pool's rows,
// two rows being connected when their closed intervals [t, t+gap] meet;
// a session is [first t, last t+gap). In append mode, a session whose end
// is at or before evict[j] is written and its rows leave the pool; in
// complete mode every session is written after every run. The result is
// each run's rows, formatted as the sim formats them.
func oracleSessions(mode query.OutputMode, runs [][]row.Row, late, evict []int64, hasWM bool, gap int64) [][]string {
	pool := map[string][]row.Row{}
	out := make([][]string, len(runs))
	for j, rows := range runs {
		for _, r := range rows {
			if r[0].Kind == row.Null || hasWM && r[0].I+gap <= late[j] {
				continue
			}
			k := "key=null"
			if r[1].Kind != row.Null {
				k = "key=" + r[1].S
			}
			pool[k] = append(pool[k], r)
		}
		for _, k := range slices.Sorted(maps.Keys(pool)) {
			rows := pool[k]
			// Connected groups by repeated joining, the slow way.
			group := make([]int, len(rows))
			for i := range group {
				group[i] = i
			}
			for changed := true; changed; {
				changed = false
				for a := range rows {
					for b := range rows {
						ta, tb := rows[a][0].I, rows[b][0].I
						if group[a] != group[b] && tb <= ta+gap && ta <= tb+gap {
							g := min(group[a], group[b])
							group[a], group[b] = g, g
							changed = true
						}
					}
				}
			}
			var keep []row.Row
			for g := range rows {
				var members []row.Row
				for i, r := range rows {
					if group[i] == g {
						members = append(members, r)
					}
				}
				if len(members) == 0 {
					continue
				}
				start, end := members[0][0].I, members[0][0].I+gap
				var n, sum, maxV int64
				var hasV bool
				var dsum float64
				var dn int64
				for _, m := range members {
					start, end = min(start, m[0].I), max(end, m[0].I+gap)
					n++
					if m[2].Kind != row.Null {
						sum += m[2].I
						if !hasV || m[2].I > maxV {
							maxV = m[2].I
						}
						hasV = true
					}
					if m[3].Kind != row.Null {
						dsum += m[3].F
						dn++
					}
				}
				closed := mode == query.Append && end <= evict[j]
				if closed || mode == query.Complete {
					sumS, maxS, avgS := "null", "null", "null"
					if hasV {
						sumS, maxS = fmt.Sprint(sum), fmt.Sprint(maxV)
					}
					if dn > 0 {
						avgS = row.DoubleValue(dsum / float64(dn)).String()
					}
					out[j] = append(out[j], fmt.Sprintf("session_window_start=%s session_window_end=%s %s count=%d sum_v=%s max_v=%s avg_d=%s",
						fmtSessTime(start), fmtSessTime(end), k, n, sumS, maxS, avgS))
				}
				if !closed {
					keep = append(keep, members...)
				}
			}
			pool[k] = keep
		}
		slices.Sort(out[j])
	}
	return out
}

// oracleRuns lays out the runs a query makes of its data batches: each
// uses the watermark the run before it evicted with for late rows and the
// latest for eviction; after a batch that raised it, a no-data run
// follows when evicts. The watermark is the max event time read (in ms)
// minus the delay, never lower than before nor than 0.
func oracleRuns(batches [][]row.Row, delay int64, hasWM, evicts bool) (runs [][]row.Row, late, evict []int64) {
	var prev, cur int64
	for _, rows := range batches {
		runs, late, evict = append(runs, rows), append(late, prev), append(evict, cur)
		next := cur
		for _, r := range rows {
			if hasWM && r[0].Kind != row.Null {
				next = max(next, r[0].I/1000*1000-delay)
			}
		}
		prev = cur
		if evicts && next > cur {
			runs, late, evict = append(runs, nil), append(late, cur), append(evict, next)
			prev = next
		}
		cur = next
	}
	return runs, late, evict
}

// The session window over random input in random batches, cut into
// random map tasks, with restarts and re-runs at random points, writes
// exactly the oracle's rows batch by batch, in append and complete mode,
// on both providers.
func TestSessionsMatchTheOracle(t *testing.T) {
	for _, provider := range []string{"memory", "pebble"} {
		for _, mode := range []query.OutputMode{query.Append, query.Complete} {
			t.Run(provider+"/"+string(mode), func(t *testing.T) {
				seeds := 40
				if provider == "pebble" {
					seeds = 3
				}
				if testing.Short() {
					seeds = 2
				}
				for seed := range seeds {
					testSessionsAgainstOracle(t, provider, mode, seed)
				}
			})
		}
	}
}

func testSessionsAgainstOracle(t *testing.T, provider string, mode query.OutputMode, seed int) {
	rng := rand.New(rand.NewPCG(uint64(seed), 77))
	minute := int64(time.Minute / time.Microsecond)
	gap := time.Duration(1+rng.IntN(15)) * time.Minute
	delay := time.Duration(rng.IntN(20)) * time.Minute
	hasWM := mode == query.Append || rng.IntN(3) > 0
	s, err := newSessSim(t, provider, mode, gap, delay, hasWM, []string{"key"}, []string{"count", "sum:v", "max:v", "avg:d"}, 1+rng.IntN(3))
	if err != nil {
		t.Fatal(err)
	}
	var batches [][]row.Row
	clock := int64(0)
	for range 5 + rng.IntN(10) {
		var rows []row.Row
		for range rng.IntN(10) {
			clock += int64(rng.IntN(5)) * minute
			ts := max(clock-int64(rng.IntN(30))*minute+int64(rng.IntN(3))*1500, 0)
			r := row.Row{row.TimestampValue(ts), row.StringValue(fmt.Sprintf("k%d", rng.IntN(3))), row.LongValue(int64(rng.IntN(10))), row.DoubleValue(float64(rng.IntN(8)) / 2)}
			switch rng.IntN(25) {
			case 0:
				r[0] = row.Value{}
			case 1:
				r[1] = row.Value{}
			case 2:
				r[2] = row.Value{}
			}
			rows = append(rows, r)
		}
		batches = append(batches, rows)
	}
	runs, late, evict := oracleRuns(batches, delay.Microseconds(), hasWM, mode == query.Append)
	want := oracleSessions(mode, runs, late, evict, hasWM, gap.Microseconds())

	run := 0
	check := func(got []row.Row) {
		t.Helper()
		if a, b := strings.Join(want[run], "\n"), s.fmtRows(got); a != b {
			t.Fatalf("seed %d (gap %s, delay %s) run %d (late %s, evict %s): wrote\n%s\nwant\n%s\ninput %v",
				seed, gap, delay, run, fmtSessTime(late[run]), fmtSessTime(evict[run]), b, a, runs[run])
		}
		run++
	}
	for _, rows := range batches {
		if rng.IntN(4) == 0 {
			s.h.Restart()
		}
		if eventtime.Watermark(late[run]) != s.usedPrev || eventtime.Watermark(evict[run]) != s.cur {
			t.Fatalf("seed %d run %d: the oracle's watermarks %d/%d, the run's %d/%d", seed, run, late[run], evict[run], s.usedPrev, s.cur)
		}
		used := s.cur
		got, _, err := s.run(rows, 1+rng.IntN(3))
		if err != nil {
			t.Fatal(err)
		}
		check(got)
		if rng.IntN(4) == 0 {
			if ok, diff := s.rerun(); !ok {
				t.Fatalf("seed %d: re-run of batch %d: %s", seed, s.last.id, diff)
			}
		}
		if s.needsNoData(used) {
			got, _, err := s.run(nil, 1)
			if err != nil {
				t.Fatal(err)
			}
			check(got)
		}
	}
	if run != len(runs) {
		t.Fatalf("seed %d: %d runs, the oracle has %d", seed, run, len(runs))
	}
}
