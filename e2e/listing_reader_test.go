package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/sink/parquet"
)

// listingReader polls a Parquet sink the way a directory reader does,
// DuckDB's read_parquet('DIR/**/*.parquet') in particular: it lists the
// directory itself (the real filesystem for a local sink, LIST for S3),
// takes every name ending in ".parquet" (DuckDB's glob reads names that
// start with '_' or '.' too), and reads each with parquet-go. It never
// looks at the sink log. Each poll is one snapshot; check compares every
// snapshot with the oracle once it is known.
//
// DuckDB itself (github.com/duckdb/duckdb-go/v2) needs cgo and a ~575 MB
// first build; this reader applies the same file selection without it.
type listingReader struct {
	t    *testing.T
	list func(ctx context.Context) (map[string][]byte, error)

	stop chan struct{}
	done chan struct{}

	mu        sync.Mutex
	snapshots []listingSnapshot
}

type listingSnapshot struct {
	at      time.Time
	files   int
	windows []tiletest.Window
	err     error
}

// startListingReader polls p's sink every few milliseconds until stopped.
func startListingReader(t *testing.T, p place) *listingReader {
	r := &listingReader{t: t, stop: make(chan struct{}), done: make(chan struct{})}
	if p.Name == "local" {
		root := p.Sink
		r.list = func(ctx context.Context) (map[string][]byte, error) {
			out := map[string][]byte{}
			err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					if os.IsNotExist(err) {
						return nil
					}
					return err
				}
				if d.IsDir() || !strings.HasSuffix(d.Name(), ".parquet") {
					return nil
				}
				data, err := os.ReadFile(path)
				if err != nil {
					return fmt.Errorf("listed %s, then could not read it: %w", path, err)
				}
				out[path] = data
				return nil
			})
			return out, err
		}
	} else {
		store := p.sink(t)
		r.list = func(ctx context.Context) (map[string][]byte, error) {
			keys, err := store.List(ctx, "")
			if err != nil {
				return nil, err
			}
			out := map[string][]byte{}
			for _, k := range keys {
				if !strings.HasSuffix(k, ".parquet") {
					continue
				}
				data, err := store.Get(ctx, k)
				if err != nil {
					return nil, fmt.Errorf("listed %s, then could not read it: %w", k, err)
				}
				out[k] = data
			}
			return out, nil
		}
	}
	go r.run()
	t.Cleanup(r.Stop)
	return r
}

func (r *listingReader) run() {
	defer close(r.done)
	for {
		select {
		case <-r.stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		snap := listingSnapshot{at: time.Now()}
		files, err := r.list(context.Background())
		snap.files, snap.err = len(files), err
		for name, data := range files {
			if snap.err != nil {
				break
			}
			cols, rows, err := parquet.ReadFile(data)
			if err != nil {
				snap.err = fmt.Errorf("%s: %w", name, err)
				break
			}
			ws, err := tiletest.FromRows(cols, rows)
			if err != nil {
				snap.err = fmt.Errorf("%s: %w", name, err)
				break
			}
			snap.windows = append(snap.windows, ws...)
		}
		r.mu.Lock()
		r.snapshots = append(r.snapshots, snap)
		r.mu.Unlock()
	}
}

// Stop ends the polling; idempotent.
func (r *listingReader) Stop() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
}

// check stops the reader and requires every snapshot to hold only windows
// of the oracle (append mode emits final windows only), each at most once,
// and the last one to be the whole oracle. It returns the number of
// snapshots taken.
func (r *listingReader) check(want []tiletest.Window) int {
	t := r.t
	t.Helper()
	r.Stop()
	wantBy := map[string]tiletest.Window{}
	for _, w := range want {
		wantBy[w.Start.UTC().Format(time.RFC3339)+" "+w.Course] = w
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	bad := 0
	for i, s := range r.snapshots {
		if s.err != nil {
			t.Errorf("listing snapshot %d at %s: %v", i, s.at.Format(time.StampMilli), s.err)
			bad++
			continue
		}
		seen := map[string]bool{}
		for _, w := range s.windows {
			k := w.Start.UTC().Format(time.RFC3339) + " " + w.Course
			switch o, ok := wantBy[k]; {
			case seen[k]:
				t.Errorf("listing snapshot %d at %s (%d files): window %s twice", i, s.at.Format(time.StampMilli), s.files, k)
				bad++
			case !ok || o.Count != w.Count:
				t.Errorf("listing snapshot %d at %s (%d files): window %s is not the oracle's (%v)", i, s.at.Format(time.StampMilli), s.files, w, o)
				bad++
			}
			seen[k] = true
		}
		if bad > 20 {
			t.Fatalf("listing reader: too many violations")
		}
	}
	if len(r.snapshots) == 0 {
		t.Fatal("the listing reader took no snapshot")
	}
	// A final snapshot after everything committed.
	files, err := r.list(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []tiletest.Window
	for name, data := range files {
		cols, rows, err := parquet.ReadFile(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ws, err := tiletest.FromRows(cols, rows)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ws...)
	}
	if d := tiletest.Diff(want, got); d != "" {
		t.Fatalf("the listing reader's final snapshot differs from the oracle:\n%s", d)
	}
	return len(r.snapshots)
}
