package registry

import (
	"context"
	"errors"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/objstore"
)

func backends(t *testing.T) map[string]func(t *testing.T) objstore.Store {
	return map[string]func(t *testing.T) objstore.Store{
		"fs": func(t *testing.T) objstore.Store {
			st, err := objstore.NewFS(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		"s3": func(t *testing.T) objstore.Store {
			srv := s3test.Start(t)
			return srv.Store(t, "reg", "sluice/registry/")
		},
	}
}

func TestRegistry(t *testing.T) {
	for name, newStore := range backends(t) {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			t.Run("SubmitGetUpdateHistory", func(t *testing.T) { testLifecycle(t, st) })
			t.Run("ConcurrentSubmitHasOneWinner", func(t *testing.T) { testRace(t, st) })
			t.Run("StaleWriterLosesAfterPruning", func(t *testing.T) { testStale(t, st) })
			t.Run("Lease", func(t *testing.T) { testLeaseOnStore(t, st) })
		})
	}
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func testLifecycle(t *testing.T, st objstore.Store) {
	ctx := context.Background()
	r := New(st, Options{Keep: 3})
	if _, err := r.Get(ctx, "tile"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of an unknown query: %v, want ErrNotFound", err)
	}
	first, err := r.Write(ctx, nil, Record{Name: "tile", Desired: Running, Spec: "name: tile", Change: "submit", ChangedBy: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if !uuidV4.MatchString(first.ID) || first.Generation != 1 || first.ChangedAt.IsZero() {
		t.Fatalf("first record: %+v", first)
	}
	cur := first
	for i := 0; i < 5; i++ {
		d := Stopped
		if i%2 == 1 {
			d = Running
		}
		next, err := r.Write(ctx, &cur, Record{Name: "tile", Desired: d, Spec: cur.Spec, Change: "stop", ChangedBy: "bob"})
		if err != nil {
			t.Fatal(err)
		}
		if next.ID != first.ID || next.Generation != cur.Generation+1 {
			t.Fatalf("generation %d: %+v (first id %s)", i, next, first.ID)
		}
		cur = next
	}
	got, err := r.Get(ctx, "tile")
	if err != nil || got.Generation != 6 || got.Desired != Stopped || got.ChangedBy != "bob" || got.ID != first.ID {
		t.Fatalf("Get: %+v, %v", got, err)
	}
	hist, err := r.History(ctx, "tile")
	if err != nil {
		t.Fatal(err)
	}
	// The last 3 generations are retained with their spec; the audit
	// trail keeps the pruned ones, without.
	if len(hist) != 6 {
		t.Fatalf("history has %d generations, want 6: %+v", len(hist), hist)
	}
	for i, h := range hist {
		pruned := i < 3
		if h.Generation != int64(i+1) || h.Pruned != pruned || (h.Spec == "") != pruned || h.ID != first.ID {
			t.Fatalf("history[%d] = %+v, want generation %d pruned %v", i, h, i+1, pruned)
		}
	}
	if hist[0].ChangedBy != "alice" || hist[0].Change != "submit" || hist[5].ChangedBy != "bob" {
		t.Fatalf("the audit trail lost who changed what: %+v", hist)
	}
	audit, err := r.Audit(ctx, "tile")
	if err != nil || len(audit) != 6 {
		t.Fatalf("Audit: %d entries, %v", len(audit), err)
	}
	if _, err := r.Write(ctx, nil, Record{Name: "other", Desired: Running, Spec: "x"}); err != nil {
		t.Fatal(err)
	}
	all, err := r.List(ctx)
	if err != nil || len(all) != 2 || all[0].Name != "other" || all[1].Name != "tile" || all[1].Generation != 6 {
		t.Fatalf("List: %+v, %v", all, err)
	}
	// Writing after an old generation is a conflict, and changes nothing.
	if _, err := r.Write(ctx, &first, Record{Name: "tile", Desired: Stopped}); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale write: %v, want ErrConflict", err)
	}
	if _, err := r.Write(ctx, nil, Record{Name: "Bad/Name", Desired: Running}); err == nil {
		t.Fatal("a name with a slash was accepted")
	}
}

func testRace(t *testing.T, st objstore.Store) {
	ctx := context.Background()
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	recs := make([]Record, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			r := New(st, Options{})
			<-start
			recs[i], errs[i] = r.Write(ctx, nil, Record{Name: "race", Desired: Running, Spec: "spec", ChangedBy: string(rune('a' + i))})
		})
	}
	close(start)
	wg.Wait()
	winners := 0
	var won Record
	for i, err := range errs {
		switch {
		case err == nil:
			winners++
			won = recs[i]
		case errors.Is(err, ErrConflict):
		default:
			t.Fatalf("submitter %d: %v", i, err)
		}
	}
	if winners != 1 {
		t.Fatalf("%d submitters won, want exactly 1 (errors %v)", winners, errs)
	}
	got, err := New(st, Options{}).Get(ctx, "race")
	if err != nil || got.ID != won.ID || got.ChangedBy != won.ChangedBy {
		t.Fatalf("registry holds %+v (%v), the winner wrote %+v", got, err, won)
	}
}

func testStale(t *testing.T, st objstore.Store) {
	ctx := context.Background()
	r := New(st, Options{Keep: 2})
	first, err := r.Write(ctx, nil, Record{Name: "stale", Desired: Running})
	if err != nil {
		t.Fatal(err)
	}
	cur := first
	for range 4 {
		if cur, err = r.Write(ctx, &cur, Record{Name: "stale", Desired: Running}); err != nil {
			t.Fatal(err)
		}
	}
	// Generation 2 was pruned, so creating it succeeds at the store; the
	// registry still reports the conflict and the latest is unchanged.
	if _, err := r.Write(ctx, &first, Record{Name: "stale", Desired: Stopped}); !errors.Is(err, ErrConflict) {
		t.Fatalf("writer from generation 1 after pruning: %v, want ErrConflict", err)
	}
	if got, _ := r.Get(ctx, "stale"); got.Generation != 5 || got.Desired != Running {
		t.Fatalf("latest after a stale write: %+v", got)
	}
}

// testLeaseOnStore runs two participants against one store with a
// hand-driven clock: one holds, the other waits, takes over only once the
// holder stops renewing for a TTL, and at once after a release.
func testLeaseOnStore(t *testing.T, st objstore.Store) {
	ctx := context.Background()
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { return now }
	cfg := func(h string) LeaseConfig {
		return LeaseConfig{Holder: h, TTL: 9 * time.Second, Renew: 3 * time.Second}
	}
	a := NewLease(st, cfg("a"), clock, nil)
	b := NewLease(st, cfg("b"), clock, nil)
	tick := func(l *Lease) bool {
		t.Helper()
		held, _, err := l.Tick(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return held
	}
	if !tick(a) {
		t.Fatal("a did not acquire a free lease")
	}
	if tick(b) {
		t.Fatal("b acquired a held lease")
	}
	// a renews every 3s for a minute: b never gets it.
	for range 20 {
		now = now.Add(3 * time.Second)
		if !tick(a) || tick(b) {
			t.Fatalf("at %v: a holds %v, b holds %v", now, a.Holds(), b.Holds())
		}
	}
	// a stops renewing (it hangs): b waits a TTL from when it saw a's last
	// renewal, then takes over; a, waking, learns it lost.
	now = now.Add(6 * time.Second)
	if tick(b) {
		t.Fatal("b took over before the TTL")
	}
	now = now.Add(3 * time.Second)
	if !tick(b) {
		t.Fatal("b did not take over after the TTL")
	}
	held, lost, err := a.Tick(ctx)
	if err != nil || held || !lost {
		t.Fatalf("a after the takeover: held %v lost %v err %v", held, lost, err)
	}
	// b releases: a acquires at once.
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if b.Holds() || !tick(a) {
		t.Fatalf("after b's release: b holds %v, a holds %v", b.Holds(), a.Holds())
	}
	// Lease objects are pruned: the listing stays bounded.
	for range 40 {
		now = now.Add(3 * time.Second)
		tick(a)
	}
	keys, err := st.List(ctx, "lease/")
	if err != nil || len(keys) > 12 {
		t.Fatalf("lease objects: %d (%v)", len(keys), err)
	}
}
