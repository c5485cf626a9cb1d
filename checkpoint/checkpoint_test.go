package checkpoint

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
)

func TestDecideAppliesRestartRule(t *testing.T) {
	off := func(id ids.BatchID, wm eventtime.Watermark) *OffsetEntry {
		return &OffsetEntry{BatchID: id, BatchWatermark: wm}
	}
	com := func(id ids.BatchID, next eventtime.Watermark) *CommitEntry {
		return &CommitEntry{BatchID: id, NextBatchWatermark: next}
	}
	cases := []struct {
		name    string
		o       *OffsetEntry
		c       *CommitEntry
		rerun   ids.BatchID // -1: none
		next    ids.BatchID
		wm, lwm eventtime.Watermark
		bad     bool
	}{
		{name: "fresh", rerun: -1, next: 0},
		{name: "batch 0 uncommitted", o: off(0, 0), rerun: 0},
		{name: "committed: next batch, watermark is the max", o: off(4, 100), c: com(4, 250), rerun: -1, next: 5, wm: 250, lwm: 100},
		{name: "commit watermark lower than logged", o: off(4, 300), c: com(4, 250), rerun: -1, next: 5, wm: 300, lwm: 300},
		{name: "offsets ahead of commit by one: re-run", o: off(5, 250), c: com(4, 250), rerun: 5},
		{name: "offsets two ahead: refused", o: off(6, 0), c: com(4, 0), bad: true},
		{name: "commit without offsets: refused", c: com(0, 0), bad: true},
		{name: "commit ahead of offsets: refused", o: off(3, 0), c: com(4, 0), bad: true},
	}
	for _, c := range cases {
		r, err := Decide(c.o, c.c)
		if c.bad {
			if !errors.Is(err, ErrIncompatibleCheckpoint) {
				t.Errorf("%s: want ErrIncompatibleCheckpoint, got %v", c.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.rerun >= 0 {
			if r.Rerun == nil || r.Rerun.BatchID != c.rerun {
				t.Errorf("%s: want re-run of %d, got %+v", c.name, c.rerun, r)
			}
			continue
		}
		if r.Rerun != nil || r.NextBatch != c.next || r.Watermark != c.wm || r.LateWatermark != c.lwm {
			t.Errorf("%s: got %+v, want next %d watermark %d late %d", c.name, r, c.next, c.wm, c.lwm)
		}
	}
}

// Of many writers creating one log entry, exactly one wins; the others get
// a FencedError naming the batch and object.
func TestConcurrentLogWritesFenceAllButOne(t *testing.T) {
	store, err := objstore.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, fenced := 0, 0
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := New(store).WriteCommit(context.Background(), &CommitEntry{BatchID: 7})
			mu.Lock()
			defer mu.Unlock()
			var fe *FencedError
			switch {
			case err == nil:
				wins++
			case errors.As(err, &fe) && errors.Is(err, ErrFenced) && fe.Batch == 7 && fe.Object == "commits/7":
				fenced++
			default:
				t.Errorf("unexpected error %v", err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || fenced != 15 {
		t.Fatalf("%d writers won and %d were fenced, want 1 and 15", wins, fenced)
	}
}

func TestLatestReadsNumericallyNewestAndCleanupKeepsRecent(t *testing.T) {
	ctx := context.Background()
	store, _ := objstore.NewFS(t.TempDir())
	l := New(store)
	for i := ids.BatchID(0); i < 12; i++ {
		if err := l.WriteOffsets(ctx, &OffsetEntry{BatchID: i}); err != nil {
			t.Fatal(err)
		}
		if err := l.WriteCommit(ctx, &CommitEntry{BatchID: i}); err != nil {
			t.Fatal(err)
		}
	}
	o, c, err := l.Latest(ctx)
	if err != nil || o.BatchID != 11 || c.BatchID != 11 {
		t.Fatalf("latest = %v %v %v, want batch 11 (numeric, not lexical, order)", o, c, err)
	}
	if n, err := l.Cleanup(ctx, 9); err != nil || n != 18 {
		t.Fatalf("cleanup keeping 9.. deleted %d, %v; want 18 (offsets and commits 0..8)", n, err)
	}
	oids, _ := l.OffsetIDs(ctx)
	cids, _ := l.CommitIDs(ctx)
	if len(oids) != 3 || oids[0] != 9 || len(cids) != 3 {
		t.Fatalf("after cleanup keeping 9.. offsets %v commits %v", oids, cids)
	}
}

// Metadata written before approvals were recorded reads as before, with
// none; approvals written round-trip.
func TestMetadataApprovalsOldAndNew(t *testing.T) {
	ctx := context.Background()
	old := objstore.NewMem()
	if err := old.PutIfAbsent(ctx, "metadata", []byte(`{"version":1,"id":"q-1","name":"tile","stateStore":"memory","shufflePartitions":4,"createdAt":"2026-01-01T00:00:00Z"}`+"\n")); err != nil {
		t.Fatal(err)
	}
	m, err := New(old).ReadMetadata(ctx)
	if err != nil || m.QueryID != "q-1" || m.Approvals != nil {
		t.Fatalf("old metadata: %+v, %v", m, err)
	}
	st := objstore.NewMem()
	a := Approval{Kind: ApprovalReplay, Ticket: "INC-7", By: "alice@ops", At: "2026-12-01T01:00:00Z"}
	if err := New(st).CreateMetadata(ctx, &Metadata{QueryID: "q-2", Approvals: []Approval{a}}); err != nil {
		t.Fatal(err)
	}
	m, err = New(st).ReadMetadata(ctx)
	if err != nil || len(m.Approvals) != 1 || m.Approvals[0] != a {
		t.Fatalf("approvals read back: %+v, %v", m, err)
	}
	if s := a.String(); s != "replay INC-7 by alice@ops at 2026-12-01T01:00:00Z" {
		t.Fatalf("String() = %q", s)
	}
}

// A new driver's start reads a bounded number of objects however long the
// query has run: with retention, two listings of at most retain (+ the
// cleaner's lag) entries each and the newest entry of each log.
func TestStartReadsABoundedNumberOfObjects(t *testing.T) {
	ctx := context.Background()
	for _, batches := range []ids.BatchID{150, 3000} {
		mem := objstore.NewMem()
		l := New(mem)
		const retain = 100
		for i := range batches {
			if err := l.WriteOffsets(ctx, &OffsetEntry{BatchID: i}); err != nil {
				t.Fatal(err)
			}
			if err := l.WriteCommit(ctx, &CommitEntry{BatchID: i}); err != nil {
				t.Fatal(err)
			}
			if keep := RetainFrom(i, retain); keep > 0 && i%10 == 0 {
				if _, err := l.Cleanup(ctx, keep); err != nil {
					t.Fatal(err)
				}
			}
		}
		c := objstore.NewCounting(mem)
		c.StartTrace()
		o, cm, err := New(c).Latest(ctx)
		if err != nil || o.BatchID != batches-1 || cm.BatchID != batches-1 {
			t.Fatalf("after %d batches: latest %v %v %v", batches, o, cm, err)
		}
		var got []string
		for _, e := range c.Trace() {
			got = append(got, e.Op+" "+e.Key)
		}
		want := []string{"list offsets/", "list commits/", "get offsets/" + (batches - 1).String(), "get commits/" + (batches - 1).String()}
		if !slices.Equal(got, want) {
			t.Fatalf("after %d batches, start read %q, want %q", batches, got, want)
		}
		for _, dir := range []string{"offsets/", "commits/"} {
			keys, _ := mem.List(ctx, dir)
			if len(keys) > retain+10 {
				t.Fatalf("after %d batches %s holds %d entries, want at most %d", batches, dir, len(keys), retain+10)
			}
		}
	}
}

func TestRetainFromKeepsWhatTheNextBatchNeeds(t *testing.T) {
	for _, tc := range []struct {
		committed ids.BatchID
		retain    int64
		want      ids.BatchID
	}{
		{-1, 100, -1}, {0, 100, -1}, {98, 100, -1}, {99, 100, 0}, {150, 100, 51},
		{5, 1, 5}, {5, 0, 5}, // at least the last batch
	} {
		got := RetainFrom(tc.committed, tc.retain)
		if got != tc.want {
			t.Errorf("RetainFrom(%d, %d) = %d, want %d", tc.committed, tc.retain, got, tc.want)
		}
		// The next batch's offsets, the last commit and state version
		// committed+1 are never before it.
		if tc.committed >= 0 && got > tc.committed {
			t.Errorf("RetainFrom(%d, %d) = %d drops the last commit", tc.committed, tc.retain, got)
		}
	}
}
