package jsonbatches

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/row"
)

func backends(t *testing.T) map[string]func(t *testing.T) objstore.Store {
	m := map[string]func(t *testing.T) objstore.Store{
		"fs":  func(t *testing.T) objstore.Store { return newStore(t) },
		"mem": func(t *testing.T) objstore.Store { return objstore.NewMem() },
	}
	if s3test.Available(t) {
		srv := s3test.Start(t)
		var n atomic.Int64
		m["s3"] = func(t *testing.T) objstore.Store {
			return srv.Store(t, "batches", fmt.Sprintf("run-%d/", n.Add(1)))
		}
	}
	return m
}

func staged(t *testing.T, st objstore.Store) []string {
	t.Helper()
	out, err := st.List(context.Background(), PendingDir)
	if err != nil {
		t.Fatal(err)
	}
	switch s := st.(type) {
	case *objstore.FS:
		filepath.WalkDir(s.Root(), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".inprogress") {
				out = append(out, p)
			}
			return nil
		})
	case *objstore.Mem:
		if n := s.PendingUploads(); n > 0 {
			out = append(out, fmt.Sprintf("%d pending uploads", n))
		}
	}
	return out
}

// An attempt that dies while staging leaves nothing visible; the next
// call aborts it and writes its own rows only. An attempt that dies after
// it was marked completing is finished by the next call, which then keeps
// it.
func TestBatchDirectoryAppearsWholeOrNotAtAll(t *testing.T) {
	for name, newSt := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			inner := newSt(t)
			a, b := tileRow("2024-03-01T10:00:00Z", "c1", 2), tileRow("2024-03-01T10:00:00Z", "c2", 1)

			// Dies while uploading part-1 (staging).
			dying := New(objstore.NewFaulty(inner, objstore.FaultRule{Op: objstore.OpUploadPart, Key: "batch_id=3/part-1.jsonl"}), tileSchema)
			if err := dying.WriteBatchParts(ctx, 3, [][]row.Row{{a}, {b}}); !errors.Is(err, objstore.ErrInjected) {
				t.Fatalf("err = %v, want the injected fault", err)
			}
			if got, _ := ReadAll(ctx, inner); len(got) != 0 {
				t.Fatalf("visible after a failed staging: %v", got)
			}
			w := New(inner, tileSchema)
			if err := w.WriteBatchParts(ctx, 3, [][]row.Row{{b}}); err != nil {
				t.Fatal(err)
			}
			got, _ := ReadAll(ctx, inner)
			if len(got) != 1 || len(got[3]) != 1 || got[3][0]["course_id"] != "c2" {
				t.Fatalf("batch 3 = %v, want only the second attempt's row", got)
			}

			// Dies while completing (after the record says completing).
			dying = New(objstore.NewFaulty(inner, objstore.FaultRule{Op: objstore.OpCompleteMultipart, Key: "batch_id=4/_SUCCESS"}), tileSchema)
			if err := dying.WriteBatchParts(ctx, 4, [][]row.Row{{a}, {b}}); !errors.Is(err, objstore.ErrInjected) {
				t.Fatalf("err = %v, want the injected fault", err)
			}
			if _, err := inner.Get(ctx, "batch_id=4/_SUCCESS"); !errors.Is(err, objstore.ErrNotExist) {
				t.Fatalf("_SUCCESS visible before completion: %v", err)
			}
			// The next call (a restarted driver re-running batch 4 with
			// other rows) finishes the first attempt and keeps it.
			if err := w.WriteBatchParts(ctx, 4, [][]row.Row{{a}}); err != nil {
				t.Fatal(err)
			}
			got, _ = ReadAll(ctx, inner)
			if len(got[4]) != 2 {
				t.Fatalf("batch 4 = %v, want the completing attempt's 2 rows", got[4])
			}
			if l := staged(t, inner); len(l) != 0 {
				t.Fatalf("left behind: %v", l)
			}
		})
	}
}
