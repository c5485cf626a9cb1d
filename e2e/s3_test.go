package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink/parquet"
)

// The tile with its checkpoint and Parquet sink on S3 (a real S3-compatible
// server on loopback): the driver is SIGKILLed mid-batch and restarted in a
// fresh working directory on "another node"; the output is exact.
func TestS3CheckpointDriverKilledMidBatchRestartsElsewhereExactly(t *testing.T) {
	srv := s3test.Start(t)
	events := tiletest.Events(71, 6000, 200*time.Millisecond, 4*time.Minute, 6)
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	for i, point := range []string{"state-commit", "before-sink-commit", "after-sink-commit"} {
		t.Run(point, func(t *testing.T) {
			in := filepath.Join(t.TempDir(), "in")
			if err := tiletest.WriteFiles(in, events, 500); err != nil {
				t.Fatal(err)
			}
			bucket := "tile" + string(rune('a'+i))
			spec := tiletest.Spec(in, srv.URI(bucket, "warehouse/tile/"), srv.URI(bucket, "checkpoints/tile/"))
			spec.Source.File.MaxFilesPerTrigger = 3
			specPath := writeSpec(t, spec)

			first := NewProc(t, "driver", bins.driver, "run", "-f", specPath).Env(srv.Env()...).Env("SLUICE_FAULT=" + point + ":2")
			first.Start()
			if err := first.Wait(90 * time.Second); !killedBySignal(err) {
				t.Fatalf("driver not killed at %s: %v\n%s", point, err, first.Logs())
			}
			progress := filepath.Join(t.TempDir(), "progress.jsonl")
			second := NewProc(t, "driver", bins.driver, "run", "-f", specPath, "--progress-json", progress).Env(srv.Env()...)
			second.Start()
			if err := second.Wait(90 * time.Second); err != nil {
				t.Fatalf("restart failed: %v\n%s", err, second.Logs())
			}
			if p := readProgress(t, progress); len(p) == 0 || !p[0].Rerun || p[0].BatchID != 2 {
				t.Fatalf("restart did not re-run batch 2 first")
			}
			store := srv.Store(t, bucket, "warehouse/tile/")
			for _, read := range []func(context.Context, objstore.Store) ([]query.Column, []row.Row, error){parquet.ReadAllFiles, parquet.ReadCommitted} {
				cols, rows, err := read(context.Background(), store)
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
		})
	}
}
