package microbatch_test

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/sink/parquet"
)

// onDisk lists what a directory reader finds under dir: the names ending
// in ".parquet" (DuckDB's glob reads '_' and '.' names too), the staged
// parts (".inprogress") and the pending-upload records.
func onDisk(t *testing.T, dir string) (parquetFiles, staged, pending []string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case strings.HasSuffix(d.Name(), ".parquet"):
			parquetFiles = append(parquetFiles, rel)
		case strings.HasSuffix(d.Name(), ".inprogress"):
			staged = append(staged, rel)
		case strings.HasPrefix(filepath.ToSlash(rel), parquet.PendingDir):
			pending = append(pending, rel)
		}
		return nil
	})
	return
}

// A batch re-run that reads different data: the driver dies after batch
// 1's files are uploaded (staged, with no pending-upload record: the
// restart finds them by listing) and before its commit; the records under batch 1
// are deleted on the broker; the restart (failOnDataLoss: false) re-runs
// batch 1 on what is left. No file of the first attempt was ever visible
// to a directory reader, none is left behind, and the directory holds
// exactly the output of the data actually read.
func TestReRunThatReadsDifferentDataLeavesOnlyItsOwnFiles(t *testing.T) {
	c := kafkatest.Start(t)
	c.CreateTopic(topic, 1)
	events := tiletest.Events(61, 1500, 2*time.Second, time.Minute, 3)
	produce(c, events, 1)
	dir := t.TempDir()
	spec := kafkaSpec(c, dir)
	fail := false
	spec.Source.Kafka.FailOnDataLoss = &fail
	spec.Source.Kafka.MaxOffsetsPerTrigger = 500
	out := filepath.Join(dir, "out")

	// Batch 1 ([500, 1000)) emits the windows batch 0 closed.
	runUntilCrash(t, spec, "before-sink-commit", 1)
	visible, staged, pending := onDisk(t, out)
	if len(visible) != 0 {
		t.Fatalf("files visible before batch 1 committed: %v", visible)
	}
	if len(staged) == 0 {
		t.Fatalf("batch 1 staged nothing: the crash came too early to test anything")
	}
	if len(pending) != 0 {
		// The filesystem lists its staged parts: the restart finds them
		// by listing, and no record is written first.
		t.Fatalf("pending-upload records written on a filesystem sink: %v", pending)
	}

	c.DeleteRecords(topic, 0, 800) // batch 1 now reads [800, 1000)
	progress := run(t, spec, microbatch.Options{})
	if !progress[0].Rerun || progress[0].BatchID != 1 {
		t.Fatalf("the restart should re-run batch 1 first: %s", progress[0].Line())
	}
	visible, staged, pending = onDisk(t, out)
	if len(staged) != 0 || len(pending) != 0 {
		t.Fatalf("left behind: staged %v, pending records %v", staged, pending)
	}
	read := append(append([]tiletest.Event(nil), events[:500]...), events[800:]...)
	want := tiletest.Oracle(read, 5*time.Minute, 10*time.Minute)
	if d := tiletest.Diff(want, sinkWindows(t, out, false)); d != "" {
		t.Fatalf("the directory (%d files) differs from the output of the data read:\n%s", len(visible), d)
	}
	if d := tiletest.Diff(want, sinkWindows(t, out, true)); d != "" {
		t.Fatalf("the sink log differs from the output of the data read:\n%s", d)
	}
}
