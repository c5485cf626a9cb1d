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

// TestRangeStreamsMatchTheObjectOnEveryBackend reads ranges of one object
// through GetRangeReader (each backend's RangeStreamer, and the fallbacks
// of a store without it) and compares them with slices of the bytes
// written: from the start, in the middle, to the end, past the end, empty.
func TestRangeStreamsMatchTheObjectOnEveryBackend(t *testing.T) {
	ctx := context.Background()
	stores := map[string]func(t *testing.T) objstore.Store{
		"fs": func(t *testing.T) objstore.Store {
			s, err := objstore.NewFS(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return objstore.NewCounting(objstore.Prefixed(s, "p/"))
		},
		"mem":      func(t *testing.T) objstore.Store { return objstore.NewFaulty(objstore.NewMem()) },
		"fallback": func(t *testing.T) objstore.Store { return getOnly{objstore.NewMem()} },
		"ranged":   func(t *testing.T) objstore.Store { return rangedOnly{objstore.NewMem()} },
	}
	if s3test.Available(t) {
		srv := s3test.Start(t)
		stores["s3"] = func(t *testing.T) objstore.Store { return srv.Store(t, "rangestream", "run/") }
	}
	data := make([]byte, 300_000)
	for i := range data {
		data[i] = byte(i*7 + i/251)
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			if err := st.Put(ctx, "obj", data); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct{ off, n, from, to int64 }{
				{0, 10, 0, 10}, {0, -1, 0, 300_000}, {123_456, 100_000, 123_456, 223_456},
				{299_990, 100, 299_990, 300_000}, {299_990, -1, 299_990, 300_000},
				{300_000, 5, 300_000, 300_000}, {400_000, -1, 300_000, 300_000}, {7, 0, 7, 7},
			} {
				rc, err := objstore.GetRangeReader(ctx, st, "obj", c.off, c.n)
				if err != nil {
					t.Fatalf("GetRangeReader(%d, %d): %v", c.off, c.n, err)
				}
				got, err := io.ReadAll(rc)
				rc.Close()
				if err != nil || !bytes.Equal(got, data[c.from:c.to]) {
					t.Fatalf("GetRangeReader(%d, %d) = %d bytes (%v); want bytes %d-%d", c.off, c.n, len(got), err, c.from, c.to)
				}
			}
			if _, err := objstore.GetRangeReader(ctx, st, "absent", 0, 10); !errors.Is(err, objstore.ErrNotExist) {
				t.Fatalf("GetRangeReader of an absent key: %v, want ErrNotExist", err)
			}
		})
	}
}

// rangedOnly keeps RangeReader and hides the other capabilities.
type rangedOnly struct{ m *objstore.Mem }

func (r rangedOnly) Get(ctx context.Context, key string) ([]byte, error) { return r.m.Get(ctx, key) }
func (r rangedOnly) Put(ctx context.Context, key string, b []byte) error { return r.m.Put(ctx, key, b) }
func (r rangedOnly) PutIfAbsent(ctx context.Context, key string, b []byte) error {
	return r.m.PutIfAbsent(ctx, key, b)
}
func (r rangedOnly) List(ctx context.Context, prefix string) ([]string, error) {
	return r.m.List(ctx, prefix)
}
func (r rangedOnly) Delete(ctx context.Context, key string) error { return r.m.Delete(ctx, key) }
func (r rangedOnly) GetRange(ctx context.Context, key string, off, n int64) ([]byte, int64, error) {
	return r.m.GetRange(ctx, key, off, n)
}
