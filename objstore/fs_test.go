package objstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/objstore/storetest"
)

func TestFSSatisfiesStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store {
		s, err := objstore.NewFS(filepath.Join(t.TempDir(), "store"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestMemSatisfiesStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store { return objstore.NewMem() })
}

func TestPrefixedFSSatisfiesStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store {
		s, err := objstore.NewFS(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return objstore.Prefixed(s, "tenant/a")
	})
}

func TestDecoratorsSatisfyStoreContract(t *testing.T) {
	t.Run("Counting", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) objstore.Store { return objstore.NewCounting(objstore.NewMem()) })
	})
	t.Run("FaultyWithoutRules", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) objstore.Store { return objstore.NewFaulty(objstore.NewMem()) })
	})
}

func TestBackendsAndDecoratorsSatisfyMultipartContract(t *testing.T) {
	t.Run("FS", func(t *testing.T) {
		storetest.RunMultipart(t, func(t *testing.T) objstore.Store {
			s, err := objstore.NewFS(filepath.Join(t.TempDir(), "store"))
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
	t.Run("Mem", func(t *testing.T) {
		storetest.RunMultipart(t, func(t *testing.T) objstore.Store { return objstore.NewMem() })
	})
	t.Run("PrefixedCountingFaultyFS", func(t *testing.T) {
		storetest.RunMultipart(t, func(t *testing.T) objstore.Store {
			s, err := objstore.NewFS(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return objstore.NewCounting(objstore.NewFaulty(objstore.Prefixed(s, "tenant/a")))
		})
	})
}

func TestFSAndDecoratorsOverItListTheirStagedUploads(t *testing.T) {
	newFS := func(t *testing.T) *objstore.FS {
		s, err := objstore.NewFS(filepath.Join(t.TempDir(), "store"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Run("FS", func(t *testing.T) {
		storetest.RunStagedLister(t, func(t *testing.T) objstore.Store { return newFS(t) })
	})
	t.Run("PrefixedCountingFaultyFS", func(t *testing.T) {
		storetest.RunStagedLister(t, func(t *testing.T) objstore.Store {
			return objstore.NewCounting(objstore.NewFaulty(objstore.Prefixed(newFS(t), "tenant/a")))
		})
	})
}

// A decorator has ListStaged whatever it wraps; over a store that cannot
// list its staged uploads (memory here, S3 in production) it says so, and
// callers that look it up with StagedListerOf write their records instead.
func TestDecoratorsOverAStoreWithoutStagedListingDoNotClaimIt(t *testing.T) {
	for name, s := range map[string]objstore.Store{
		"Mem":                 objstore.NewMem(),
		"CountingMem":         objstore.NewCounting(objstore.NewMem()),
		"FaultyPrefixedMem":   objstore.NewFaulty(objstore.Prefixed(objstore.NewMem(), "p")),
		"CountingFaultyMem":   objstore.NewCounting(objstore.NewFaulty(objstore.NewMem())),
		"PrefixedCountingMem": objstore.Prefixed(objstore.NewCounting(objstore.NewMem()), "p"),
	} {
		if _, ok := objstore.StagedListerOf(s); ok {
			t.Errorf("%s: StagedListerOf says it lists staged uploads", name)
		}
		if l, ok := s.(objstore.StagedLister); ok {
			if _, err := l.ListStaged(context.Background(), ""); !errors.Is(err, objstore.ErrStagedListUnsupported) {
				t.Errorf("%s: ListStaged = %v, want ErrStagedListUnsupported", name, err)
			}
		}
	}
}

// TestFSStagesUnderAHiddenNameThatNoParquetGlobMatches checks the names on
// disk: a reader that lists the directory itself (DuckDB's glob on
// *.parquet, Spark skipping _ and . names) must not see a staged part.
func TestFSStagesUnderAHiddenNameThatNoParquetGlobMatches(t *testing.T) {
	dir := t.TempDir()
	s, err := objstore.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := s.CreateMultipart(ctx, "w/part-1.parquet")
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.UploadPart(ctx, "w/part-1.parquet", id, 1, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "w", "*"))
	if len(names) != 1 {
		t.Fatalf("files on disk = %q, want one staged part", names)
	}
	base := filepath.Base(names[0])
	if base[0] != '_' || filepath.Ext(base) == ".parquet" {
		t.Fatalf("staged name %q: want a leading _ and a suffix other than .parquet", base)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "**", "*.parquet")); len(m) != 0 {
		t.Fatalf("*.parquet glob matches %q before Complete", m)
	}
	if err := s.CompleteMultipart(ctx, "w/part-1.parquet", id, []objstore.Part{p}); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "w", "*")); len(m) != 1 || filepath.Base(m[0]) != "part-1.parquet" {
		t.Fatalf("files after Complete = %q", m)
	}
}

func TestFSRejectsKeysThatEscapeOrNameDirectories(t *testing.T) {
	s, err := objstore.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, key := range []string{"", "/abs", "../up", "a/../../up", "a//b", "a/./b", "dir/", `a\b`, ".."} {
		if err := s.Put(ctx, key, []byte("x")); err == nil {
			t.Errorf("Put(%q) succeeded, want an invalid key error", key)
		}
		if _, err := s.Get(ctx, key); err == nil || errors.Is(err, objstore.ErrNotExist) {
			t.Errorf("Get(%q) = %v, want an invalid key error", key, err)
		}
	}
	// Dots inside a name are fine.
	if err := s.Put(ctx, "a..b/c.d", []byte("x")); err != nil {
		t.Errorf("Put(a..b/c.d): %v", err)
	}
	for _, prefix := range []string{"../", "a/../../", "/etc/"} {
		if _, err := s.List(ctx, prefix); err == nil {
			t.Errorf("List(%q) succeeded, want an invalid prefix error", prefix)
		}
	}
}

func TestFSListHidesTemporaryFilesAndToleratesFilePrefixes(t *testing.T) {
	dir := t.TempDir()
	s, err := objstore.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Put(ctx, "a/k", []byte("x")); err != nil {
		t.Fatal(err)
	}
	// A crashed writer's leftover temporary file.
	if err := os.WriteFile(filepath.Join(dir, "a", ".k2.tmp-1-1"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	keys, err := s.List(ctx, "a/")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a/k"}; !slices.Equal(keys, want) {
		t.Fatalf("List(a/) = %q, want %q", keys, want)
	}
	// "a/k" is a file, so nothing can live under "a/k/".
	keys, err = s.List(ctx, "a/k/x/")
	if err != nil || len(keys) != 0 {
		t.Fatalf("List(a/k/x/) = %q, %v; want no keys and no error", keys, err)
	}
}

func TestFSDeleteRemovesEmptiedDirectoriesButNotTheRoot(t *testing.T) {
	dir := t.TempDir()
	s, err := objstore.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range []string{"a/b/c", "a/d"} {
		if err := s.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "a/b/c"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a", "b")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory a/b still there after its last key went: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a", "d")); err != nil {
		t.Errorf("a/d gone: %v", err)
	}
	if err := s.Delete(ctx, "a/d"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("store root removed: %v", err)
	}
}
