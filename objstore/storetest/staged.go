package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/objstore"
)

// RunStagedLister runs the contract suite of the optional
// objstore.StagedLister capability. newStore must return an empty
// Multipart store that lists its staged uploads (StagedListerOf says so).
func RunStagedLister(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	t.Run("ListsEachUploadWithPartsUntilCompletedOrAborted", func(t *testing.T) {
		ctx := context.Background()
		s := newStore(t)
		l, ok := objstore.StagedListerOf(s)
		if !ok {
			t.Fatalf("%T does not list its staged uploads", s)
		}
		mp := s.(objstore.Multipart)
		a, aParts := stage(t, mp, "d/x.parquet", []byte("a1"), []byte("a2"))
		b, _ := stage(t, mp, "d/x.parquet", []byte("b"))
		c, cParts := stage(t, mp, "e/y.z.parquet", []byte("c"))
		if _, err := mp.CreateMultipart(ctx, "d/none.parquet"); err != nil { // no part: nothing to find
			t.Fatal(err)
		}
		mustPut(t, s, "d/visible.parquet", []byte("v"))
		list := func(prefix string) []objstore.StagedUpload {
			t.Helper()
			got, err := l.ListStaged(ctx, prefix)
			if err != nil {
				t.Fatalf("ListStaged(%q): %v", prefix, err)
			}
			return got
		}
		want := []objstore.StagedUpload{{Key: "d/x.parquet", UploadID: a}, {Key: "d/x.parquet", UploadID: b}, {Key: "e/y.z.parquet", UploadID: c}}
		slices.SortFunc(want[:2], func(x, y objstore.StagedUpload) int {
			if x.UploadID < y.UploadID {
				return -1
			}
			return 1
		})
		if got := list(""); !slices.Equal(got, want) {
			t.Fatalf("ListStaged(\"\") = %v, want %v (one entry per upload with parts, sorted)", got, want)
		}
		if got := list("e/"); !slices.Equal(got, want[2:]) {
			t.Fatalf("ListStaged(e/) = %v, want %v", got, want[2:])
		}
		if got := list("d/y"); len(got) != 0 {
			t.Fatalf("ListStaged(d/y) = %v, want none", got)
		}
		if err := mp.CompleteMultipart(ctx, "d/x.parquet", a, aParts); err != nil {
			t.Fatal(err)
		}
		if err := mp.AbortMultipart(ctx, "d/x.parquet", b); err != nil {
			t.Fatal(err)
		}
		if got := list(""); !slices.Equal(got, want[2:]) {
			t.Fatalf("after completing and aborting the uploads of d/x.parquet, ListStaged = %v, want %v", got, want[2:])
		}
		if err := mp.CompleteMultipart(ctx, "e/y.z.parquet", c, cParts); err != nil {
			t.Fatal(err)
		}
		if got := list(""); len(got) != 0 {
			t.Fatalf("with every upload completed, ListStaged = %v", got)
		}
	})
}
