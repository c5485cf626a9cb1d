package join

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	pq "github.com/parquet-go/parquet-go"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/query"
)

func readSpec(format string) *query.Spec {
	return &query.Spec{
		Name:   "q",
		Source: query.Source{Schema: []query.Field{{Name: "lesson_id", Type: "string"}}},
		Join: &query.Join{Path: "mem://dim", Format: format, Keys: []string{"lesson_id"},
			Columns: []query.JoinColumn{{Name: "module", Type: "string"}}, ManifestIDColumn: "mid"},
	}
}

func put(t *testing.T, st objstore.Store, key, data string) {
	t.Helper()
	if err := st.Put(context.Background(), key, []byte(data)); err != nil {
		t.Fatal(err)
	}
}

func TestReadJSONLinesSkipsHiddenAndOtherFiles(t *testing.T) {
	st := objstore.NewMem()
	put(t, st, "a.jsonl", `{"lesson_id":"l1","module":"intro","mid":"m1","extra":true}`+"\n\n")
	put(t, st, "sub/b.json", `{"lesson_id":"l2","mid":"m1"}`)
	put(t, st, "_tmp/c.jsonl", `{"lesson_id":"l3","module":"x","mid":"OTHER"}`)
	put(t, st, ".d.jsonl", `not json`)
	put(t, st, "notes.txt", `not json`)
	s, err := Read(context.Background(), st, readSpec(query.JoinJSON))
	if err != nil {
		t.Fatal(err)
	}
	if s.Ref.ID != "m1" || len(s.Rows) != 2 || !s.Rows[1][1].IsNull() {
		t.Fatalf("snapshot %+v rows %v", s.Ref, s.Rows)
	}
}

func TestReadErrorsNameTheFileAndTheProblem(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	if _, err := Read(ctx, st, readSpec(query.JoinJSON)); !errors.Is(err, ErrNoManifest) {
		t.Fatalf("an empty path: err %v, want ErrNoManifest", err)
	}
	put(t, st, "a.jsonl", `{"lesson_id":"l1","module":"intro","mid":"m1"}`+"\n"+`{"lesson_id":nan,"mid":"m1"}`) // a number token Spark does not read
	if _, err := Read(ctx, st, readSpec(query.JoinJSON)); err == nil || !strings.Contains(err.Error(), "a.jsonl: line 2") || !strings.Contains(err.Error(), "lesson_id") {
		t.Fatalf("a malformed line: err %v", err)
	}

	type wrong struct {
		LessonID int64  `parquet:"lesson_id"`
		Module   string `parquet:"module"`
		Mid      int64  `parquet:"mid"`
	}
	var b bytes.Buffer
	if err := pq.Write(&b, []wrong{{1, "intro", 5}}); err != nil {
		t.Fatal(err)
	}
	pst := objstore.NewMem()
	put(t, pst, "p.parquet", b.String())
	if _, err := Read(ctx, pst, readSpec(query.JoinParquet)); err == nil || !strings.Contains(err.Error(), "p.parquet: column lesson_id is long in the file, the query reads it as string") {
		t.Fatalf("a Parquet key of the wrong type: err %v", err)
	}
}

// Take stores the snapshot once under its hash; taking the same content
// again changes nothing, and a Cache loads it from the checkpoint.
func TestTakeStoresOnceAndCacheLoadsByRef(t *testing.T) {
	ctx := context.Background()
	dim, cp := objstore.NewMem(), objstore.NewMem()
	put(t, dim, "a.jsonl", `{"lesson_id":"l1","module":"intro","mid":"m1"}`)
	spec := readSpec(query.JoinJSON)
	tk := &Taker{Spec: spec, Dim: dim, Checkpoint: cp}
	ref, err := tk.Take(ctx, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	again, err := tk.Take(ctx, time.Unix(60, 0))
	if err != nil || again != ref {
		t.Fatalf("the same content again: %+v, %v", again, err)
	}
	keys, _ := cp.List(ctx, "manifests/")
	if len(keys) != 1 || keys[0] != ObjectKey(ref.Hash) {
		t.Fatalf("checkpoint holds %v", keys)
	}
	// The dimension changes: the cache still serves the logged snapshot.
	put(t, dim, "a.jsonl", `{"lesson_id":"l1","module":"changed","mid":"m2"}`)
	c := NewCache(spec, cp)
	for range 2 {
		tab, err := c.Table(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		out := apply(t, tab, ev0("l1"))
		if len(out) != 1 || !strings.Contains(out[0], "intro") {
			t.Fatalf("joined %v, want the logged module intro", out)
		}
	}
	if c.Loads() != 1 {
		t.Fatalf("%d loads from the checkpoint, want 1 (cached)", c.Loads())
	}
	if _, err := c.Table(ctx, Ref{ID: "x", Hash: "00"}); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("a snapshot not in the checkpoint: err %v", err)
	}
}
