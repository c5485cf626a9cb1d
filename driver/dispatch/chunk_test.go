package dispatch

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/wire/rpcauth"
)

// Rows larger than one gRPC message (each over MaxMessageBytes) go
// through the shuffle between two executors over real gRPC (pushed in
// pieces the owner joins) and back to the driver's sink (cut into pieces
// the driver joins), and arrive whole.
func TestRowsLargerThanOneMessageCrossTheClusterInPieces(t *testing.T) {
	base := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	var events []tiletest.Event
	want := map[string]string{}
	for i := range 6 {
		lesson := strings.Repeat(string(rune('a'+i)), rpcauth.MaxMessageBytes+1000*i)
		e := tiletest.Event{ID: fmt.Sprintf("e%d", i), Course: fmt.Sprintf("c%d", i), Lesson: lesson, Time: base.Add(time.Duration(i) * time.Second)}
		events = append(events, e)
		want[e.ID] = lesson
	}
	in := filepath.Join(t.TempDir(), "in")
	if err := tiletest.WriteFiles(in, events, 3); err != nil {
		t.Fatal(err)
	}
	c := newTestCluster(t, 2, "tok")
	dir := t.TempDir()
	spec := tiletest.Spec(in, "", filepath.Join(dir, "cp"))
	spec.Aggregate, spec.Watermark = nil, nil
	spec.ShufflePartitions = 4 // each executor owns two: a map task pushes to the other one
	spec.Sink = query.Sink{JSONBatches: &query.JSONBatchesSink{Path: filepath.Join(dir, "out")}}
	c.runOn(spec, nil)
	got := map[string]string{}
	filepath.Walk(filepath.Join(dir, "out"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || !strings.HasSuffix(p, ".jsonl") {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 4*rpcauth.MaxMessageBytes)
		for sc.Scan() {
			var r struct {
				EventID  string `json:"event_id"`
				LessonID string `json:"lesson_id"`
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			got[r.EventID] = r.LessonID
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		return nil
	})
	if len(got) != len(want) {
		t.Fatalf("the sink got %d rows, want %d", len(got), len(want))
	}
	for id, l := range want {
		if got[id] != l {
			t.Errorf("row %s: lesson_id of %d bytes, want %d bytes of %q", id, len(got[id]), len(l), l[:1])
		}
	}
}
