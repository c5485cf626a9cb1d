package microbatch_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"testing"
	"time"

	pq "github.com/parquet-go/parquet-go"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/driver/microbatch"
	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink/parquet"
)

type lessonRow struct {
	LessonID string `parquet:"lesson_id"`
	Module   string `parquet:"module"`
	Minutes  int64  `parquet:"minutes"`
}

func putParquet(t *testing.T, st objstore.Store, key string, rows []lessonRow) {
	t.Helper()
	var b bytes.Buffer
	if err := pq.Write(&b, rows); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(context.Background(), key, b.Bytes()); err != nil {
		t.Fatal(err)
	}
}

var hexID = regexp.MustCompile(`^[0-9a-f]{16}$`)

// The tile grouped by the lesson's module, with a Parquet manifest on the
// S3-compatible server and the checkpoint there too: the committed windows
// equal an oracle computed from the events and the manifest, each row
// carries the content-hash manifest id offsets/N records, and the events
// of an unknown lesson count under a null module (left join).
func TestJoinParquetManifestOnS3GroupsByModule(t *testing.T) {
	srv := s3test.Start(t)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	events := tiletest.Events(7, 1200, 2*time.Second, time.Minute, 3)
	lessons := []string{"l1", "l2", "l3", "l4"} // l4 is not in the manifest
	for i := range events {
		events[i].Lesson = lessons[i%len(lessons)]
	}
	if err := tiletest.WriteFiles(in, events, 200); err != nil {
		t.Fatal(err)
	}
	modules := map[string]string{"l1": "intro", "l2": "joins", "l3": "intro"}
	dim := srv.Store(t, "lake", "manifest/")
	putParquet(t, dim, "part-0.parquet", []lessonRow{{"l1", "intro", 10}, {"l2", "joins", 20}})
	putParquet(t, dim, "date=2026-03-02/part-1.parquet", []lessonRow{{"l3", "intro", 30}, {"l9", "unused", 40}})
	putParquet(t, dim, "_tmp/part-9.parquet", []lessonRow{{"l4", "half-written", 0}})

	spec := tiletest.Spec(in, out, srv.URI("lake", "cp/"))
	spec.Source.File.MaxFilesPerTrigger = 2
	spec.Join = &query.Join{Path: srv.URI("lake", "manifest/"), Keys: []string{"lesson_id"},
		Columns: []query.JoinColumn{{Name: "module", Type: "string"}}, WithManifestID: true}
	spec.Aggregate.GroupBy = []string{"course_id", "module", "manifest_id"}
	spec.Sink.Parquet.PartitionBy = ""
	opts := microbatch.Options{Store: objstore.Options{S3: srv.Options("lake")}}
	progress := run(t, spec, opts)

	log := checkpoint.New(srv.Store(t, "lake", "cp/"))
	e, err := log.Offsets(context.Background(), progress[0].BatchID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Manifest == nil || !hexID.MatchString(e.Manifest.ID) {
		t.Fatalf("offsets/0 records manifest %+v, want a 16-hex-digit content id", e.Manifest)
	}
	mid := e.Manifest.ID

	// The oracle: the tile's windows by (course, module), from the events.
	closed := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	open := map[time.Time]bool{}
	for _, w := range closed {
		open[w.Start] = true
	}
	counts := map[string]int64{}
	for _, ev := range events {
		start := ev.Time.Truncate(5 * time.Minute)
		if !open[start] {
			continue // a window the watermark has not closed (or a late row)
		}
		module := "null"
		if m, ok := modules[ev.Lesson]; ok {
			module = m
		}
		counts[fmt.Sprintf("%s %s %s %s", start.UTC().Format(time.RFC3339), ev.Course, module, mid)]++
	}
	var want []string
	for k, n := range counts {
		want = append(want, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(want)

	store, _ := objstore.NewFS(out)
	cols, rows, err := parquet.ReadCommitted(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	idx := map[string]int{}
	for i, c := range cols {
		idx[c.Name] = i
	}
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s %s %s %s %d", row.FormatTimestamp(r[idx["window_start"]].I), r[idx["course_id"]].String(),
			r[idx["module"]].String(), r[idx["manifest_id"]].String(), r[idx["event_count"]].I))
	}
	sort.Strings(got)
	if len(want) == 0 {
		t.Fatal("the events close no window: the test needs more")
	}
	if d := diffLines(want, got); d != "" {
		t.Fatalf("committed windows differ from the oracle:\n%s", d)
	}
}
