package statestore

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
)

// maintain runs one maintenance pass of prov and returns the snapshots it
// wrote.
func maintain(t *testing.T, prov Provider) int {
	t.Helper()
	n, err := prov.(Maintainer).Maintain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// recordAndMaintain writes the commit record a driver writes after batch v
// changed partition p (commits/v: version v+1 made by a delta of attempt
// "", when it wrote one), then runs a maintenance pass, as an executor does in the background.
func recordAndMaintain(t *testing.T, cp objstore.Store, prov Provider, p ids.PartitionID, v Version) {
	t.Helper()
	rec := CommitRecord{Deltas: []ids.PartitionID{}}
	if _, err := cp.Get(context.Background(), deltaKey(0, p, v+1, "")); err == nil {
		rec.Deltas = []ids.PartitionID{p} // else the batch left the partition unchanged
	}
	writeRecord(t, cp, int64(v), rec)
	maintain(t, prov)
}

// An executor whose cached version was made by an abandoned attempt writes
// no snapshot for it, nor for a version not yet committed; a snapshot file
// named for an attempt the record does not name (a stray) is never loaded,
// whatever it holds, and cleanup deletes it. Every provider.
func TestMaintenanceSnapshotsOnlyWhatTheRecordNames(t *testing.T) {
	ctx := context.Background()
	for name := range providers(t, objstore.NewMem()) {
		t.Run(name, func(t *testing.T) {
			cp := objstore.NewMem()
			newProv := providers(t, cp)[name]
			w := newProv()
			defer w.Close()
			for v := Version(0); v < 9; v++ {
				commitAs(t, w, 0, v, model{"a": fmt.Sprint(v), "k": "x"}, fmt.Sprintf("a%d", v))
				writeRecord(t, cp, int64(v), attemptRecord(fmt.Sprintf("a%d", v)))
			}
			// Version 10 by attempt "lost", which another executor's
			// attempt "won" committed instead.
			commitAs(t, w, 0, 9, model{"a": "lost"}, "lost")
			if n := maintain(t, w); n != 0 {
				t.Fatalf("uncommitted version: maintenance wrote %d snapshots", n)
			}
			writeRecord(t, cp, 9, attemptRecord("won"))
			if n := maintain(t, w); n != 0 {
				t.Fatalf("version of an abandoned attempt: maintenance wrote %d snapshots", n)
			}
			// The committed version 10, by attempt "won", on a fresh
			// executor (which reads the deltas) that then snapshots it.
			commitAs(t, newProv(), 0, 9, model{"a": "won", "k": "x"}, "won")
			fresh := newProv()
			defer fresh.Close()
			st, err := fresh.Open(ctx, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			st.Abort()
			if n := maintain(t, fresh); n != 1 {
				t.Fatalf("committed version 10: maintenance wrote %d snapshots, want 1", n)
			}
			if _, err := cp.Get(ctx, snapKey(0, 0, 10, "won")); err != nil {
				t.Fatalf("snapshot named for the recorded attempt: %v", err)
			}
			// A stray snapshot, named for version 10 by "lost", holding
			// garbage: never loaded.
			if err := cp.Put(ctx, snapKey(0, 0, 10, "lost"), []byte("not a state file")); err != nil {
				t.Fatal(err)
			}
			reader := newProv()
			defer reader.Close()
			st, err = reader.Open(ctx, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			checkStore(t, "version 10 from its recorded snapshot", st, model{"a": "won", "k": "x"})
			st.Abort()
			if _, err := reader.Cleanup(ctx, 0, 10); err != nil {
				t.Fatal(err)
			}
			keys, _ := cp.List(ctx, "state/")
			// Everything at or below the base goes, its own delta and the
			// strays included; the base alone makes version 10.
			if want := []string{snapKey(0, 0, 10, "won")}; !slices.Equal(keys, want) {
				t.Fatalf("after cleanup to 10: %q, want %q", keys, want)
			}
			again := newProv()
			defer again.Close()
			if st, err = again.Open(ctx, 0, 10); err != nil {
				t.Fatal(err)
			}
			checkStore(t, "version 10 from the snapshot alone", st, model{"a": "won", "k": "x"})
			st.Abort()
		})
	}
}

// Maintenance runs beside batches (go test -race): snapshots copy a
// consistent committed version while the next batch changes the partition,
// and every version loads equal to the oracle on a fresh executor.
func TestMaintenanceBesideBatches(t *testing.T) {
	ctx := context.Background()
	for name := range providers(t, objstore.NewMem()) {
		t.Run(name, func(t *testing.T) {
			cp := objstore.NewMem()
			prov := providers(t, cp)[name]()
			defer prov.Close()
			mctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			var passes atomic.Int64
			go func() {
				defer close(done)
				RunMaintenance(mctx, prov.(Maintainer), MaintenanceOptions{Interval: time.Millisecond, Done: func(n int, err error) {
					if err != nil {
						t.Error(err)
					}
					passes.Add(int64(n))
				}})
			}()
			rng := rand.New(rand.NewPCG(9, 9))
			h := []model{{}}
			for v := Version(0); v < 60; v++ {
				st, err := prov.Open(ctx, 0, v)
				if err != nil {
					t.Fatal(err)
				}
				m := maps.Clone(h[v])
				randomBatch(t, rng, 100, []Store{st}, m)
				if _, err := st.Commit(ctx, ""); err != nil {
					t.Fatal(err)
				}
				h = append(h, m)
				rec := CommitRecord{Deltas: []ids.PartitionID{}}
				if _, err := cp.Get(ctx, deltaKey(0, 0, v+1, "")); err == nil {
					rec.Deltas = []ids.PartitionID{0}
				}
				writeRecord(t, cp, int64(v), rec)
			}
			for passes.Load() == 0 { // the last versions' snapshots, at least one
				time.Sleep(time.Millisecond)
			}
			cancel()
			<-done
			keys, _ := cp.List(ctx, "state/")
			for _, k := range keys {
				if !strings.HasSuffix(k, ".snapshot") {
					continue
				}
				v, _, _ := parseName(k[strings.LastIndexByte(k, '/')+1:], snapSuffix)
				fresh := providers(t, cp)[name]()
				st, err := fresh.Open(ctx, 0, v)
				if err != nil {
					t.Fatal(err)
				}
				checkStore(t, fmt.Sprintf("%s: version %d", k, v), st, h[v])
				st.Abort()
				fresh.Close()
			}
		})
	}
}

// On a loaded machine small batches commit faster than a maintenance pass
// runs: every pass looks at a version whose commit record the driver has
// not written yet, and by the next pass a newer version is the newest.
// Snapshots are still written (the memory provider keeps the copy it took
// until the record comes; pebble's snapshot waits a little for it), so the
// state files stay bounded. Before, no snapshot was ever written: a 10,000
// batch run on a loaded machine grew its state files without bound.
func TestMaintenanceSnapshotsWhenEveryPassPrecedesItsRecord(t *testing.T) {
	ctx := context.Background()
	for name := range providers(t, objstore.NewMem()) {
		t.Run(name, func(t *testing.T) {
			cp := objstore.NewMem()
			w := providers(t, cp)[name]()
			defer w.Close()
			written := 0
			for v := Version(0); v < 35; v++ {
				attempt := fmt.Sprintf("a%d", v)
				commitAs(t, w, 0, v, model{"a": fmt.Sprint(v), "k": "x"}, attempt)
				// The driver writes batch v's record 50 ms after the
				// pass starts.
				done := make(chan struct{})
				go func() {
					defer close(done)
					time.Sleep(50 * time.Millisecond)
					writeRecord(t, cp, int64(v), attemptRecord(attempt))
				}()
				written += maintain(t, w)
				<-done
			}
			if written < 3 {
				t.Fatalf("%d snapshots over 35 versions with SnapshotInterval 10, want at least 3", written)
			}
			keys, err := cp.List(ctx, "state/0/0/")
			if err != nil {
				t.Fatal(err)
			}
			snaps := 0
			for _, k := range keys {
				if strings.HasSuffix(k, ".snapshot") {
					snaps++
				}
			}
			if snaps != written {
				t.Fatalf("%d snapshot files, %d written", snaps, written)
			}
			// The newest snapshot loads on a fresh executor.
			fresh := providers(t, cp)[name]()
			defer fresh.Close()
			st, err := fresh.Open(ctx, 0, 35)
			if err != nil {
				t.Fatal(err)
			}
			st.Abort()
			t.Logf("%d snapshots over 35 versions", written)
		})
	}
}
