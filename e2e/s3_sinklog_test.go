package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink/parquet"
)

// The tile on S3 with compactInterval 10 and minBatchesToRetain 5 runs 36
// batches; the driver is SIGKILLed after the sink commit of batch 29 (a
// compacted entry) and restarted elsewhere: it re-runs batch 29 without
// writing it again, and the log ends with compacted entries and the
// entries after the newest one old enough, nothing older; both readers
// equal the oracle.
func TestS3SinkLogCompactsAndARestartResumesFromIt(t *testing.T) {
	srv := s3test.Start(t)
	events := tiletest.Events(72, 3500, 200*time.Millisecond, 2*time.Minute, 4)
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	in := filepath.Join(t.TempDir(), "in")
	if err := tiletest.WriteFiles(in, events, 100); err != nil { // 35 files
		t.Fatal(err)
	}
	spec := tiletest.Spec(in, srv.URI("tile", "warehouse/tile/"), srv.URI("tile", "checkpoints/tile/"))
	spec.Source.File.MaxFilesPerTrigger = 1
	spec.Sink.Parquet.CompactInterval = 10
	spec.MinBatchesToRetain = 5
	specPath := writeSpec(t, spec)

	first := NewProc(t, "driver", bins.driver, "run", "-f", specPath).Env(srv.Env()...).Env("SLUICE_FAULT=after-sink-commit:29")
	first.Start()
	if err := first.Wait(3 * time.Minute); !killedBySignal(err) {
		t.Fatalf("driver not killed after the sink commit of batch 29: %v\n%s", err, first.Logs())
	}
	progress := filepath.Join(t.TempDir(), "progress.jsonl")
	second := NewProc(t, "driver", bins.driver, "run", "-f", specPath, "--progress-json", progress).Env(srv.Env()...)
	second.Start()
	if err := second.Wait(3 * time.Minute); err != nil {
		t.Fatalf("restart failed: %v\n%s", err, second.Logs())
	}
	p := readProgress(t, progress)
	if len(p) == 0 || !p[0].Rerun || p[0].BatchID != 29 {
		t.Fatalf("restart did not re-run batch 29 first: %+v", p[:min(1, len(p))])
	}
	last := p[len(p)-1].BatchID
	if last < 34 {
		t.Fatalf("the query ended at batch %d, want at least 34", last)
	}

	store := srv.Store(t, "tile", "warehouse/tile/")
	ctx := context.Background()
	keys, err := store.List(ctx, parquet.LogDir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		keys[i] = strings.TrimPrefix(keys[i], parquet.LogDir)
	}
	// The newest compacted entry at or before last-5+1 is the floor;
	// nothing older is left, everything after it is.
	newestCompact := (last+1)/10*10 - 1
	floor := (newestCompact-3)/10*10 - 1 // the compacted entry at or before newestCompact-5+1
	for n := floor; n <= last; n++ {
		k := itoa(n)
		if (n+1)%10 == 0 {
			k += ".compact"
		}
		if !slices.Contains(keys, k) {
			t.Fatalf("the log lacks %s: %v", k, keys)
		}
	}
	if len(keys) != int(last-floor+1) || !slices.Contains(keys, itoa(newestCompact)+".compact") {
		t.Fatalf("after batch %d the log holds %v; want %d..%d only", last, keys, floor, last)
	}
	for _, read := range []func(context.Context, objstore.Store) ([]query.Column, []row.Row, error){parquet.ReadAllFiles, parquet.ReadCommitted} {
		cols, rows, err := read(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tiletest.FromRows(cols, rows)
		if err != nil {
			t.Fatal(err)
		}
		if d := tiletest.Diff(want, got); d != "" {
			t.Fatalf("S3 sink differs from the oracle:\n%s", d)
		}
	}
}

func itoa(n ids.BatchID) string { return n.String() }
