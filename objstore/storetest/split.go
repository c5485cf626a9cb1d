package storetest

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/objstore"
)

// SplitServed reads the 1,000 bytes at offset 900,000 of a 1 MiB object
// through wrap(meter), where meter counts what the backing store served,
// and returns how many bytes it served. A decorator that forwards ranged
// reads serves about 1,000; one that hides them serves everything before
// the offset too (a split of a large file costs O(n) instead of its own
// bytes). The error is a wrong read.
func SplitServed(wrap func(objstore.Store) objstore.Store) (served int64, err error) {
	ctx := context.Background()
	mem := objstore.NewMem()
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	if err := mem.Put(ctx, "in/big.jsonl", big); err != nil {
		return 0, err
	}
	meter := objstore.NewCounting(mem)
	const off, n = 900_000, 1000
	rc, err := objstore.GetRangeReader(ctx, wrap(meter), "in/big.jsonl", off, n)
	if err != nil {
		return 0, err
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return 0, err
	}
	if !bytes.Equal(got, big[off:off+n]) {
		return 0, fmt.Errorf("read %d bytes, want the %d at %d", len(got), n, off)
	}
	return meter.Stats()[objstore.OpGet].Bytes, nil
}

// SplitBytes is how many bytes SplitServed reads.
const SplitBytes = 1000
