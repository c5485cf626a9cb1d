package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// writeProfile writes a CPU profile whose samples are stacks (innermost
// first) with the given nanoseconds.
func writeProfile(t *testing.T, file string, stacks map[string]int64) {
	t.Helper()
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10_000_000,
	}
	fns := map[string]*profile.Function{}
	var id uint64
	for stack, ns := range stacks {
		s := &profile.Sample{Value: []int64{ns / 10_000_000, ns}}
		for _, name := range strings.Split(stack, ";") {
			fn := fns[name]
			if fn == nil {
				id++
				fn = &profile.Function{ID: id, Name: name}
				fns[name] = fn
				p.Function = append(p.Function, fn)
			}
			loc := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: fn}}}
			p.Location = append(p.Location, loc)
			s.Location = append(s.Location, loc)
		}
		p.Sample = append(p.Sample, s)
	}
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
}

func TestCostBreakdownAttributesByInnermostNamedFrame(t *testing.T) {
	dir := t.TempDir()
	eng, ref := filepath.Join(dir, "engine.pprof"), filepath.Join(dir, "reference.pprof")
	writeProfile(t, eng, map[string]int64{
		// decode's allocation is decode's; the state store's fsync is the
		// state store's, not the object store's caller further out.
		"runtime.mallocgc;github.com/sluicehq/sluice/row.(*Decoder).Decode;github.com/sluicehq/sluice/task.RunMap":           400_000_000,
		"syscall.Syscall;github.com/sluicehq/sluice/statestore.(*memStore).Commit;github.com/sluicehq/sluice/task.RunReduce": 300_000_000,
		"runtime.gcBgMarkWorker": 100_000_000,
		// The broker's encoding is franz-go's kmsg: still the broker's.
		"github.com/twmb/franz-go/pkg/kmsg.(*FetchResponse).AppendTo;github.com/twmb/franz-go/pkg/kfake.(*Cluster).handleFetch": 900_000_000,
	})
	writeProfile(t, ref, map[string]int64{
		"github.com/sluicehq/sluice/row.(*Decoder).Decode;main.(*tileCounter).add;main.refFiles.func1": 400_000_000,
		"runtime.mapassign_faststr;main.(*tileCounter).add;main.refFiles.func1":                        100_000_000,
		"indexbytebody;main.refFiles.func1":                                                            100_000_000,
	})
	c := compareCosts(eng, ref, 1_000_000)
	if c == nil {
		t.Fatal("no comparison")
	}
	want := map[string]float64{"decode": 400, "state store": 300, "GC (background)": 100, partBroker: 900}
	for part, ns := range want {
		if got := c.Engine.NsPerEvent[part]; got != ns {
			t.Errorf("engine %s: %.0f ns/event, want %.0f (all: %v)", part, got, ns, c.Engine.NsPerEvent)
		}
	}
	if c.Engine.Total != 800 {
		t.Errorf("engine total %.0f ns/event, want 800 (the broker left out)", c.Engine.Total)
	}
	wantRef := map[string]float64{"decode": 400, "aggregate": 100, "source read": 100}
	for part, ns := range wantRef {
		if got := c.Reference.NsPerEvent[part]; got != ns {
			t.Errorf("reference %s: %.0f ns/event, want %.0f (all: %v)", part, got, ns, c.Reference.NsPerEvent)
		}
	}
	why := c.Why(1.5, 2)
	for _, s := range []string{"the engine spent 800 CPU ns/event and the reference 600", "state store +300", "GC (background) +100", "less on source read -100, aggregate -100", "1.50 of 2 cores busy: 25 %", "What would close it: state store ("} {
		if !strings.Contains(why, s) {
			t.Errorf("Why lacks %q:\n%s", s, why)
		}
	}
	if strings.Contains(why, "decode +") || strings.Contains(why, "broker") {
		t.Errorf("Why counts an equal part or the broker:\n%s", why)
	}
	// A side of several processes sums their profiles.
	two := compareCostFiles([]string{eng, eng}, []string{ref}, 1_000_000, [2]string{"the cluster", "one process"})
	if two == nil || two.Engine.Total != 1600 || two.Engine.NsPerEvent["state store"] != 600 {
		t.Fatalf("two profiles of one side: %+v", two)
	}
	if w := two.Why(0, 0); !strings.Contains(w, "the cluster spent 1600 CPU ns/event and one process 600") || !strings.Contains(w, "`engine.pprof` + `engine.pprof`") {
		t.Errorf("named sides' Why:\n%s", w)
	}
}

// The side-by-side table has a row per part and a column per profile,
// with each one's total.
func TestBreakdownTableSideBySide(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.pprof"), filepath.Join(dir, "b.pprof")
	writeProfile(t, a, map[string]int64{"github.com/sluicehq/sluice/row.(*Decoder).Decode;main.x": 600, "github.com/sluicehq/sluice/agg.(*Table).Add": 400})
	writeProfile(t, b, map[string]int64{"github.com/sluicehq/sluice/row.(*Decoder).Decode": 200})
	table, err := breakdownTable([]string{"before=" + a, "after=" + b}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| part (CPU ns/event) | before | after |", "| decode | 300 | 100 |", "| aggregate | 200 | 0 |", "| **total** (broker excluded) | **500** | **100** |"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}
