package microbatch_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/progress"
	"github.com/sluicehq/sluice/query"
)

// With trigger.noDataBatchesAtOnce, the no-data batch that a batch's
// watermark made due runs at once: under an hour's processingTime the
// closed window is in the sink while the next trigger is still an hour
// away, and the no-data batch is planned within the data batch's trigger.
// Without the option (Spark's rule) it would wait for that trigger.
func TestNoDataBatchAtOnceClosesTheWindowBeforeTheNextTrigger(t *testing.T) {
	dir := t.TempDir()
	in, out, cp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "cp")
	writeLines(t, filepath.Join(in, "001.jsonl"),
		ev("e1", "c1", "2026-03-02T09:01:00Z"), ev("e2", "c1", "2026-03-02T09:03:30Z"), ev("e3", "c1", "2026-03-02T09:31:00Z"))
	spec := tiletest.Spec(in, out, cp)
	spec.Trigger = query.Trigger{ProcessingTime: query.Duration(time.Hour), NoDataBatchesAtOnce: true}
	var mu sync.Mutex
	var reports []*progress.Report
	job, err := microbatch.Build(context.Background(), spec, microbatch.Options{Observer: progress.Committed(func(p *progress.Report) {
		mu.Lock()
		reports = append(reports, p)
		mu.Unlock()
	})})
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx, nil) }()
	defer func() {
		cancel()
		<-done
	}()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		n := len(reports)
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d batches in 60s; want the data batch and the no-data batch, well before the hour's trigger", n)
		}
	}
	mu.Lock()
	data, nodata := reports[0], reports[1]
	mu.Unlock()
	if data.NoData || !nodata.NoData || nodata.BatchID != 1 {
		t.Fatalf("batches: %+v then %+v; want data batch 0 then no-data batch 1", data, nodata)
	}
	got := sinkWindows(t, out, true)
	want := []tiletest.Window{{Start: at("2026-03-02T09:00:00Z"), Course: "c1", Count: 2}}
	if d := tiletest.Diff(want, got); d != "" {
		t.Fatalf("sink after the no-data batch:\n%s", d)
	}
	if nodata.LateWatermarkMs != data.BatchWatermarkMs || nodata.BatchWatermarkMs <= data.BatchWatermarkMs {
		t.Fatalf("no-data batch watermarks late=%d evict=%d; want late = batch 0's %d and a higher evict", nodata.LateWatermarkMs, nodata.BatchWatermarkMs, data.BatchWatermarkMs)
	}
}
