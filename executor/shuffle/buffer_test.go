package shuffle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ids"
)

var key1 = BatchKey{Query: "q", Run: "r", Batch: 7}

func tag(m int, attempt uint64) Tag { return Tag{BatchKey: key1, Map: m, Attempt: attempt} }

// put stores chunks for partition p as one finished attempt.
func put(t *testing.T, b *Buffer, tg Tag, p ids.PartitionID, chunks ...string) (stale bool) {
	t.Helper()
	w := b.NewWriter(tg)
	for _, c := range chunks {
		if err := w.Append(p, []byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	stale, err := w.Finish(p)
	if err != nil {
		t.Fatal(err)
	}
	return stale
}

func flat(byMap [][][]byte) []string {
	var out []string
	for _, cs := range byMap {
		var s strings.Builder
		for _, c := range cs {
			s.Write(c)
		}
		out = append(out, s.String())
	}
	return out
}

func waitNow(t *testing.T, b *Buffer, p ids.PartitionID, attempts ...uint64) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	got, err := b.Wait(ctx, key1, p, attempts)
	if err != nil {
		t.Fatal(err)
	}
	return flat(got)
}

func TestRetriedMapAttemptReplacesTheFirstNeverAdds(t *testing.T) {
	b := NewBuffer(BufferOptions{})
	put(t, b, tag(0, 1), 3, "a1-", "a1+")
	put(t, b, tag(1, 2), 3, "b2")
	put(t, b, tag(0, 5), 3, "a5") // map 0 retried
	if got := waitNow(t, b, 3, 5, 2); !reflect.DeepEqual(got, []string{"a5", "b2"}) {
		t.Fatalf("got %q, want the retry's data only, in map order", got)
	}
	// A slow push of the first attempt arriving after the retry is dropped.
	if stale := put(t, b, tag(0, 1), 3, "late"); !stale {
		t.Fatal("an older attempt arriving late was not reported stale")
	}
	if got := waitNow(t, b, 3, 5, 2); !reflect.DeepEqual(got, []string{"a5", "b2"}) {
		t.Fatalf("after a late older attempt got %q", got)
	}
	if mem, _ := b.Usage(); mem != int64(len("a5")+len("b2")) {
		t.Fatalf("memory held %d bytes, want only the kept attempts' %d", mem, len("a5b2"))
	}
}

func TestWaitReturnsOnlyWhenEveryAcceptedAttemptArrived(t *testing.T) {
	b := NewBuffer(BufferOptions{})
	put(t, b, tag(1, 4), 0, "m1")
	put(t, b, tag(0, 2), 0, "old") // the driver accepted attempt 3 of map 0
	done := make(chan []string)
	go func() {
		got, err := b.Wait(context.Background(), key1, 0, []uint64{3, 4})
		if err != nil {
			t.Error(err)
		}
		done <- flat(got)
	}()
	select {
	case got := <-done:
		t.Fatalf("Wait returned %q before map 0's accepted attempt arrived", got)
	case <-time.After(50 * time.Millisecond):
	}
	put(t, b, tag(0, 3), 0, "m0")
	select {
	case got := <-done:
		if !reflect.DeepEqual(got, []string{"m0", "m1"}) {
			t.Fatalf("got %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after the last map's data arrived")
	}
}

func TestWaitNamesMissingMapTasksWhenItGivesUp(t *testing.T) {
	b := NewBuffer(BufferOptions{})
	put(t, b, tag(1, 1), 2, "x")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := b.Wait(ctx, key1, 2, []uint64{1, 1, 1})
	var me *MissingError
	if !errors.As(err, &me) || !reflect.DeepEqual(me.Missing, []int{0, 2}) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a MissingError naming maps 0 and 2", err)
	}
}

func TestEmptyPartitionFromAMapTaskCountsAsArrived(t *testing.T) {
	b := NewBuffer(BufferOptions{})
	put(t, b, tag(0, 1), 1)
	if got := waitNow(t, b, 1, 1); !reflect.DeepEqual(got, []string{""}) {
		t.Fatalf("got %q", got)
	}
}

func TestUnfinishedDataIsInvisibleAndAbortFreesIt(t *testing.T) {
	b := NewBuffer(BufferOptions{})
	w := b.NewWriter(tag(0, 1))
	if err := w.Append(0, []byte("half")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := b.Wait(ctx, key1, 0, []uint64{1}); err == nil {
		t.Fatal("unfinished data was visible to Wait")
	}
	w.Abort()
	if mem, _ := b.Usage(); mem != 0 {
		t.Fatalf("abort left %d bytes held", mem)
	}
}

func TestNewerAttemptStoredThanAcceptedIsAnError(t *testing.T) {
	b := NewBuffer(BufferOptions{})
	put(t, b, tag(0, 9), 0, "x")
	if _, err := b.Wait(context.Background(), key1, 0, []uint64{8}); err == nil || !strings.Contains(err.Error(), "newer than the accepted attempt 8") {
		t.Fatalf("got %v", err)
	}
}

func TestOverTheMemoryLimitChunksSpillAndReadBackTheSame(t *testing.T) {
	dir := t.TempDir()
	b := NewBuffer(BufferOptions{MemoryLimit: 100, SpillDir: dir})
	var want []string
	for m := range 4 {
		var chunks []string
		var all string
		for i := range 5 {
			c := fmt.Sprintf("map%d-chunk%d-%s;", m, i, strings.Repeat("x", 10))
			chunks = append(chunks, c)
			all += c
		}
		put(t, b, tag(m, 1), 0, chunks...)
		want = append(want, all)
	}
	mem, spilled := b.Usage()
	if mem > 100 || spilled == 0 {
		t.Fatalf("memory %d (limit 100), spilled %d: want memory bounded and the rest spilled", mem, spilled)
	}
	if got := waitNow(t, b, 0, 1, 1, 1, 1); !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %q, want %q", got, want)
	}
	b.Release(key1)
	if mem, spilled := b.Usage(); mem != 0 || spilled != 0 {
		t.Fatalf("after release: memory %d, spilled %d", mem, spilled)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("spill files left after release: %v", ents)
	}
}

func TestWithoutSpillDirectoryAFullBufferRefusesData(t *testing.T) {
	b := NewBuffer(BufferOptions{MemoryLimit: 10})
	w := b.NewWriter(tag(0, 1))
	if err := w.Append(0, []byte("0123456789abc")); !errors.Is(err, ErrFull) {
		t.Fatalf("got %v, want ErrFull", err)
	}
}

func TestReleaseOlderKeepsOnlyTheCurrentRunFromABatchOn(t *testing.T) {
	b := NewBuffer(BufferOptions{})
	for _, k := range []BatchKey{{"q", "r", 6}, {"q", "r", 7}, {"q", "old", 9}, {"other", "r", 1}} {
		w := b.NewWriter(Tag{BatchKey: k, Map: 0, Attempt: 1})
		w.Append(0, []byte("x"))
		w.Finish(0)
	}
	b.ReleaseOlder("q", "r", 7)
	b.mu.Lock()
	var left []BatchKey
	for k := range b.batches {
		left = append(left, k)
	}
	b.mu.Unlock()
	if len(left) != 2 || b.batches[BatchKey{"q", "r", 7}] == nil || b.batches[BatchKey{"other", "r", 1}] == nil {
		t.Fatalf("left %v", left)
	}
}

func TestDataOfAReleasedBatchInFlightIsRefused(t *testing.T) {
	b := NewBuffer(BufferOptions{})
	w := b.NewWriter(tag(0, 1))
	w.Append(0, []byte("a"))
	b.Release(key1)
	if _, err := w.Finish(0); !errors.Is(err, ErrReleased) {
		t.Fatalf("got %v, want ErrReleased", err)
	}
	if mem, _ := b.Usage(); mem != 0 {
		t.Fatalf("%d bytes held", mem)
	}
}
