package statestore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/objstore"
)

// Past the per-process limit a batch fails with an error that says to
// switch to pebble, instead of growing until the process is killed; the
// checkpoint keeps the last good version, and releasing or closing
// providers gives their share of the budget back.
func TestMemoryLimitFailsTheBatchWithAdviceToSwitchToPebble(t *testing.T) {
	ctx := context.Background()
	cp, _ := objstore.NewFS(t.TempDir())
	limit := NewMemoryLimit(64 << 10)
	a := NewMemory(cp, MemoryOptions{Limit: limit})
	b := NewMemory(objstore.Prefixed(cp, "other/"), MemoryOptions{Limit: limit})

	fill := func(prov *Memory, p ids.PartitionID, v Version, n int) error {
		st, err := prov.Open(ctx, p, v)
		if err != nil {
			return err
		}
		for i := range n {
			if err := st.Put(fmt.Appendf(nil, "key-%d-%06d", p, i), make([]byte, 100)); err != nil {
				st.Abort()
				return err
			}
		}
		_, err = st.Commit(ctx, "")
		return err
	}
	// 112 bytes of key and value per row, plus the tables' slots and
	// entries: 200 and 150 rows fit.
	if err := fill(a, 0, 0, 200); err != nil {
		t.Fatal(err)
	}
	if err := fill(b, 0, 0, 150); err != nil {
		t.Fatal(err)
	}
	used := limit.Used()
	if used < 350*(112+24) || used > limit.Limit() {
		t.Fatalf("used %d after 350 rows, want at least their keys, values and entries (%d) and under %d", used, 350*(112+24), limit.Limit())
	}
	if held := a.Held()[0] + b.Held()[0]; held != used {
		t.Fatalf("the providers hold %d, the budget says %d", held, used)
	}
	err := fill(a, 1, 0, 200)
	if !errors.Is(err, ErrMemoryLimit) {
		t.Fatalf("a batch past the shared limit: %v, want ErrMemoryLimit", err)
	}
	var le *MemoryLimitError
	if !errors.As(err, &le) || le.Partition != 1 || le.Limit != 64<<10 {
		t.Fatalf("error detail %+v", le)
	}
	for _, w := range []string{"stateStore: pebble", "--state-memory-limit", "limit of 64.0 KiB (65536 bytes)"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if limit.Used() != used {
		t.Fatalf("a failed batch changed the budget: %d, was %d", limit.Used(), used)
	}
	// Releasing a partition and closing a provider give memory back; a
	// fresh provider sharing the budget reloads a committed version that
	// fits.
	if ok, _ := a.Release(0); !ok {
		t.Fatal("release")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if limit.Used() != 0 {
		t.Fatalf("budget after release and close: %d, want 0", limit.Used())
	}
	c := NewMemory(cp, MemoryOptions{Limit: limit})
	if got := contents(t, c, 0, 1); len(got) != 200 {
		t.Fatalf("reloaded partition has %d rows, want 200", len(got))
	}
	// Loading more than the limit from the checkpoint is refused too.
	small := NewMemoryLimit(1 << 10)
	d := NewMemory(cp, MemoryOptions{Limit: small})
	if _, err := d.Open(ctx, 0, 1); !errors.Is(err, ErrMemoryLimit) {
		t.Fatalf("loading 200 rows under a 1 KiB limit: %v", err)
	}
	if small.Used() != 0 {
		t.Fatalf("a refused load kept %d bytes in the budget", small.Used())
	}
}
