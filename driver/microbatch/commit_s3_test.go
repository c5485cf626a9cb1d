package microbatch_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink/parquet"
	"github.com/sluicehq/sluice/task"
)

// On S3 the logged attempt's pending records are deleted while its uploads
// are completed. When the completion fails (the first one of each run
// here, the driver dying there in production), the batch is not committed
// and its re-run completes the uploads from the log entry: the output is
// exact, by the log and by listing, and no record or upload is left.
func TestACompletionCutShortAfterTheRecordsWentIsFinishedByTheReRunOnS3(t *testing.T) {
	srv := s3test.Start(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	events := tiletest.Events(33, 2000, 500*time.Millisecond, time.Minute, 5)
	if err := tiletest.WriteFiles(in, events, 400); err != nil {
		t.Fatal(err)
	}
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	spec := tiletest.Spec(in, srv.URI("cut", "out/"), srv.URI("cut", "cp/"))
	spec.Source.File.MaxFilesPerTrigger = 1
	var faults []*objstore.Faulty
	opts := microbatch.Options{
		Store: objstore.Options{S3: srv.Options("cut")},
		WrapStore: func(role string, s objstore.Store) objstore.Store {
			if role != task.RoleSink {
				return s
			}
			f := objstore.NewFaulty(s, objstore.FaultRule{Op: objstore.OpCompleteMultipart, Limit: 1})
			faults = append(faults, f)
			return f
		},
	}
	progress := run(t, spec, opts)
	injected, retried := 0, false
	for _, f := range faults {
		injected += f.Injected()
	}
	for _, p := range progress {
		retried = retried || p.Attempts > 1
	}
	if injected == 0 || !retried {
		t.Fatalf("no completion failed (%d injected) or no batch was retried (%v): the test tested nothing", injected, retried)
	}
	out := srv.Store(t, "cut", "out/")
	for _, read := range []func(context.Context, objstore.Store) ([]query.Column, []row.Row, error){parquet.ReadAllFiles, parquet.ReadCommitted} {
		cols, rows, err := read(context.Background(), out)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tiletest.FromRows(cols, rows)
		if err != nil {
			t.Fatal(err)
		}
		if d := tiletest.Diff(want, got); d != "" {
			t.Fatalf("output differs from the oracle:\n%s", d)
		}
	}
	if recs, err := out.List(context.Background(), parquet.PendingDir); err != nil || len(recs) != 0 {
		t.Fatalf("pending records left: %v, %v", recs, err)
	}
}
