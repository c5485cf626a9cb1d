package dedup_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dedup"
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/row"
)

// oracleKept is docs/semantics.md's rule for deduplication within the
// watermark, written over the whole input at once rather than as a state
// machine: batches[j] are the rows of run j (a no-data run has none) and
// late[j] the watermark run j drops late rows with (the watermark the run
// before it evicted with). A row is kept when it is not late and no
// earlier kept row of its key is still remembered: one of the same run, or
// one whose expiry (its time, 0 if null, plus delay) is after late[j]
// (every eviction before run j used a watermark at or below late[j], and
// watermarks only rise).
func oracleKept(batches [][]row.Row, late []int64, delay int64, key func(row.Row) string) [][]row.Row {
	type kept struct {
		run     int
		expires int64
	}
	var history = map[string][]kept{}
	out := make([][]row.Row, len(batches))
	for j, rows := range batches {
		for _, r := range rows {
			var t int64
			if r[0].Kind != row.Null {
				t = r[0].I
				if t <= late[j] {
					continue
				}
			}
			k := key(r)
			remembered := false
			for _, h := range history[k] {
				if h.run == j || h.expires > late[j] {
					remembered = true
				}
			}
			if remembered {
				continue
			}
			history[k] = append(history[k], kept{run: j, expires: t + delay})
			out[j] = append(out[j], r)
		}
	}
	return out
}

// oracleRuns lays out the runs of a query fed batches of rows, as
// docs/semantics.md says a query runs them: each data batch uses the
// watermark computed before the previous one for late rows and the
// latest for eviction; after a batch that raised it, a no-data batch
// runs. The watermark is the max event time read (in ms) minus the
// delay, never lower than before nor than 0.
func oracleRuns(batches [][]row.Row, delay int64) (runs [][]row.Row, late, evict []int64) {
	var prev, cur int64
	for _, rows := range batches {
		runs, late, evict = append(runs, rows), append(late, prev), append(evict, cur)
		next := cur
		for _, r := range rows {
			if r[0].Kind != row.Null {
				next = max(next, r[0].I/1000*1000-delay)
			}
		}
		prev = cur
		if next > cur {
			runs, late, evict = append(runs, nil), append(late, cur), append(evict, next)
			prev = next
		}
		cur = next
	}
	return runs, late, evict
}

// Dedup over random input in random batches, cut into random map tasks,
// with restarts and re-runs at random points, keeps exactly the rows the
// oracle keeps, batch by batch, and its state holds exactly the keys the
// oracle still remembers, on both providers.
func TestDedupMatchesTheOracle(t *testing.T) {
	for _, provider := range []string{"memory", "pebble"} {
		t.Run(provider, func(t *testing.T) {
			// Pebble's commits sync to disk: fewer seeds there (the
			// operator's logic is the same; what pebble adds is loading and
			// re-running, which every seed does).
			seeds := 40
			if provider == "pebble" {
				seeds = 4
			}
			if testing.Short() {
				seeds = 2
			}
			for seed := range seeds {
				rng := rand.New(rand.NewPCG(uint64(seed), 31))
				delay := time.Duration(rng.IntN(20)) * time.Minute
				keys := []string{"id"}
				if rng.IntN(3) == 0 {
					keys = []string{"id", "v"}
				}
				s, err := newSim(t, provider, keys, delay, 1+rng.IntN(3))
				if err != nil {
					t.Fatal(err)
				}
				l := s.l
				var batches [][]row.Row
				clock := int64(0)
				for range 6 + rng.IntN(10) {
					var rows []row.Row
					for range rng.IntN(12) {
						clock += int64(rng.IntN(4)) * int64(time.Minute/time.Microsecond)
						t := clock - int64(rng.IntN(25))*int64(time.Minute/time.Microsecond) + int64(rng.IntN(3))*1500
						r := row.Row{row.TimestampValue(max(t, 0)), row.StringValue(fmt.Sprintf("k%d", rng.IntN(6))), row.LongValue(int64(rng.IntN(2)))}
						switch rng.IntN(20) {
						case 0:
							r[0] = row.Value{}
						case 1:
							r[1] = row.Value{}
						}
						rows = append(rows, r)
					}
					batches = append(batches, rows)
				}
				runs, late, evict := oracleRuns(batches, delay.Microseconds())
				want := oracleKept(runs, late, delay.Microseconds(), func(r row.Row) string { return string(l.AppendKey(nil, r)) })

				run := 0
				for _, rows := range batches {
					if rng.IntN(4) == 0 {
						s.h.Restart()
					}
					if wl, we := late[run], evict[run]; eventtime.Watermark(wl) != s.usedPrev || eventtime.Watermark(we) != s.cur {
						t.Fatalf("seed %d run %d: the oracle's watermarks %d/%d, the run's %d/%d", seed, run, wl, we, s.usedPrev, s.cur)
					}
					got, _, err := s.run(t, rows, 1+rng.IntN(3))
					if err != nil {
						t.Fatal(err)
					}
					if a, b := fmtRows(want[run]), fmtRows(got); a != b {
						t.Fatalf("seed %d run %d (late %d, evict %d): kept\n%s\nwant\n%s", seed, run, late[run], evict[run], b, a)
					}
					run++
					if rng.IntN(4) == 0 {
						if ok, diff := s.rerun(); !ok {
							t.Fatalf("seed %d: re-run of batch %d: %s", seed, s.last.id, diff)
						}
					}
					if eventtime.NeedsNoDataBatch(true, true, eventtime.Watermark(evict[run-1]), s.cur) {
						if got, _, err := s.run(t, nil, 1); err != nil || len(got) != 0 {
							t.Fatalf("seed %d: no-data batch kept %v (%v)", seed, got, err)
						}
						run++
					}
				}
				if run != len(runs) {
					t.Fatalf("seed %d: %d runs, the oracle has %d", seed, run, len(runs))
				}
				// The state: every key the oracle still remembers after the
				// last run, with its expiry.
				wantState := map[string]int64{}
				for _, rows := range want {
					for _, r := range rows {
						exp := delay.Microseconds()
						if r[0].Kind != row.Null {
							exp += r[0].I
						}
						if exp > evict[len(evict)-1] {
							wantState[string(l.AppendKey(nil, r))] = exp
						}
					}
				}
				gotState := map[string]int64{}
				for _, part := range s.h.State(s.batch) {
					for k, v := range part {
						if strings.HasPrefix(k, "\xff\xff\xff\xff\xff\xff\xff\xff") {
							exp, err := dedup.ExpiresAt([]byte(v))
							if err != nil {
								t.Fatal(err)
							}
							gotState[k[8:]] = exp
						}
					}
				}
				if fmt.Sprint(gotState) != fmt.Sprint(wantState) {
					t.Fatalf("seed %d: state %v, want %v", seed, gotState, wantState)
				}
			}
		})
	}
}
