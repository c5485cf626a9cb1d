package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/objstore"
)

// TestRangedReadsMatchTheObjectOnEveryBackend reads ranges, tails and
// past-the-end ranges of one object through GetRange and OpenReaderAt and
// compares them with slices of the bytes written.
func TestRangedReadsMatchTheObjectOnEveryBackend(t *testing.T) {
	ctx := context.Background()
	stores := map[string]func(t *testing.T) objstore.Store{
		"fs": func(t *testing.T) objstore.Store {
			s, err := objstore.NewFS(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return objstore.Prefixed(s, "p/")
		},
		"mem":      func(t *testing.T) objstore.Store { return objstore.NewCounting(objstore.NewMem()) },
		"fallback": func(t *testing.T) objstore.Store { return getOnly{objstore.NewMem()} },
	}
	if s3test.Available(t) {
		srv := s3test.Start(t)
		stores["s3"] = func(t *testing.T) objstore.Store { return srv.Store(t, "ranged", "run/") }
	}
	data := make([]byte, 100_000)
	for i := range data {
		data[i] = byte(i*7 + i/251)
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			if err := st.Put(ctx, "obj", data); err != nil {
				t.Fatal(err)
			}
			if rr, ok := st.(objstore.RangeReader); ok {
				for _, c := range []struct{ off, n, from, to int64 }{
					{0, 10, 0, 10}, {99_990, 100, 99_990, 100_000}, {-1, 1000, 99_000, 100_000},
					{-1, 1 << 20, 0, 100_000}, {100_000, 5, 100_000, 100_000}, {200_000, 5, 100_000, 100_000},
				} {
					b, size, err := rr.GetRange(ctx, "obj", c.off, c.n)
					if err != nil {
						t.Fatalf("GetRange(%d, %d): %v", c.off, c.n, err)
					}
					if size != int64(len(data)) || !bytes.Equal(b, data[c.from:c.to]) {
						t.Fatalf("GetRange(%d, %d) = %d bytes, size %d; want bytes %d-%d of %d", c.off, c.n, len(b), size, c.from, c.to, len(data))
					}
				}
				if _, _, err := rr.GetRange(ctx, "absent", 0, 10); !errors.Is(err, objstore.ErrNotExist) {
					t.Fatalf("GetRange of an absent key: %v, want ErrNotExist", err)
				}
			}
			r, err := objstore.OpenReaderAt(ctx, st, "obj", 4096)
			if err != nil {
				t.Fatal(err)
			}
			if r.Size() != int64(len(data)) {
				t.Fatalf("size %d, want %d", r.Size(), len(data))
			}
			got, err := io.ReadAll(io.NewSectionReader(r, 0, r.Size()))
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read through ReaderAt: %d bytes, %v", len(got), err)
			}
			p := make([]byte, 100)
			if n, err := r.ReadAt(p, 99_950); n != 50 || err != io.EOF || !bytes.Equal(p[:n], data[99_950:]) {
				t.Fatalf("ReadAt across the end: %d, %v", n, err)
			}
			if _, err := objstore.OpenReaderAt(ctx, st, "absent", 4096); !errors.Is(err, objstore.ErrNotExist) {
				t.Fatalf("open absent: %v, want ErrNotExist", err)
			}
		})
	}
}

// getOnly hides every optional capability.
type getOnly struct{ objstore.Store }

func (g getOnly) String() string { return "getOnly" }
