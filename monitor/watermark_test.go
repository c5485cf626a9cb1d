package monitor

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/progress"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// batch is a progress at t0+sec with the given watermark (ms), input rows
// and total lag (-1: the source reports none).
func batch(sec int, wm, rows, lag int64) *progress.Report {
	p := &progress.Report{Timestamp: t0.Add(time.Duration(sec) * time.Second).Format(time.RFC3339Nano), BatchWatermarkMs: wm, NumInputRows: rows}
	src := progress.Source{}
	if lag >= 0 {
		src.Metrics = map[string]int64{"totalLag": lag, "lag.t-0": lag}
	}
	p.Sources = []progress.Source{src}
	return p
}

func TestClassifyWatermark(t *testing.T) {
	const stall = time.Minute
	for _, c := range []struct {
		name  string
		ps    []*progress.Report
		now   int // seconds after t0
		want  Verdict
		since int // seconds after t0 of Since, when stalled
	}{
		{"no progress", nil, 0, NoWatermark, 0},
		{"no watermark yet", []*progress.Report{batch(0, 0, 5, 0)}, 600, NoWatermark, 0},
		{"moved recently", []*progress.Report{batch(0, 1000, 5, 0), batch(50, 2000, 5, 0)}, 100, Advancing, 0},
		{"same value but younger than the threshold", []*progress.Report{batch(0, 1000, 5, 0), batch(30, 1000, 5, 0)}, 59, Advancing, 0},
		{"stalled, lag grows: incident",
			[]*progress.Report{batch(0, 1000, 5, 0), batch(10, 2000, 5, 10), batch(40, 2000, 5, 50), batch(80, 2000, 5, 400)}, 100, Incident, 10},
		{"stalled, backlog waits and nothing read: incident",
			[]*progress.Report{batch(0, 2000, 5, 300)}, 600, Incident, 0},
		{"stalled, no input, no lag: idle (kafka)",
			[]*progress.Report{batch(0, 1000, 5, 0), batch(10, 2000, 5, 0)}, 600, Idle, 10},
		{"stalled, no input, no-data batches only: idle",
			[]*progress.Report{batch(10, 2000, 5, 0), batch(20, 2000, 0, 0), batch(30, 2000, 0, 0)}, 600, Idle, 10},
		{"stalled, no input, source without lag (files): idle",
			[]*progress.Report{batch(0, 1000, 5, -1), batch(10, 2000, 5, -1)}, 600, Idle, 10},
		{"stalled, rows arrive, lag shrinks: old events",
			[]*progress.Report{batch(0, 2000, 5, 90), batch(30, 2000, 50, 40), batch(70, 2000, 40, 0)}, 100, StalledWithInput, 0},
		{"stalled, rows arrive, source without lag",
			[]*progress.Report{batch(0, 2000, 5, -1), batch(70, 2000, 40, -1)}, 100, StalledWithInput, 0},
		{"lag grows but the watermark moves: fine",
			[]*progress.Report{batch(0, 1000, 5, 10), batch(50, 2000, 5, 900)}, 100, Advancing, 0},
		{"bad timestamp: no stall claimed",
			[]*progress.Report{{Timestamp: "x", BatchWatermarkMs: 5}}, 600, Advancing, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			now := t0.Add(time.Duration(c.now) * time.Second)
			got := ClassifyWatermark(c.ps, now, stall)
			if got.Verdict != c.want {
				t.Fatalf("verdict %q, want %q (%+v)", got.Verdict, c.want, got)
			}
			stalled := c.want == Incident || c.want == Idle || c.want == StalledWithInput
			if stalled {
				since := t0.Add(time.Duration(c.since) * time.Second)
				if !got.Since.Equal(since) || got.StalledFor != now.Sub(since) {
					t.Fatalf("since %v stalled for %v, want %v and %v", got.Since, got.StalledFor, since, now.Sub(since))
				}
			} else if got.StalledFor != 0 {
				t.Fatalf("not stalled but StalledFor = %v", got.StalledFor)
			}
			if got.Verdict.Describe() == "" {
				t.Fatal("no description")
			}
		})
	}
}

func TestListenSeesEveryProgressInOrder(t *testing.T) {
	tr := New(Options{Keep: 2})
	var got []ids.BatchID
	stop := tr.Listen(func(p *progress.Report) { got = append(got, p.BatchID) })
	for i := ids.BatchID(0); i < 5; i++ {
		tr.Observe(&progress.Report{Name: "q", BatchID: i})
	}
	stop()
	tr.Observe(&progress.Report{Name: "q", BatchID: 5})
	if len(got) != 5 || got[0] != 0 || got[4] != 4 {
		t.Fatalf("listener saw %v, want 0..4 (none after stop)", got)
	}
}

func TestStoreStatsSumEveryCountedStoreOfARole(t *testing.T) {
	tr := New(Options{})
	if _, known := tr.Executors(); known {
		t.Fatal("executors known before anyone said")
	}
	tr.SetExecutors(3)
	if n, known := tr.Executors(); n != 3 || !known {
		t.Fatalf("executors %d %v", n, known)
	}
	a, b := objstore.NewCounting(objstore.NewMem()), objstore.NewCounting(objstore.NewMem())
	tr.CountStore("checkpoint", a)
	tr.CountStore("checkpoint", b)
	ctx := context.Background()
	_ = a.Put(ctx, "k", []byte("abc"))
	_ = b.Put(ctx, "k", []byte("de"))
	_, _ = b.Get(ctx, "missing")
	s := tr.StoreStats()["checkpoint"]
	if s[objstore.OpPut].Requests != 2 || s[objstore.OpPut].Bytes != 5 || s[objstore.OpGet].Errors != 1 {
		t.Fatalf("stats %+v", s)
	}
}
