package statestore

import (
	"bytes"
	"context"
	"io"
	"testing"
	"testing/iotest"

	"github.com/sluicehq/sluice/objstore"
)

// oneByteStore streams its objects one byte per Read.
type oneByteStore struct{ *objstore.Mem }

func (s oneByteStore) GetStream(ctx context.Context, key string) (io.ReadCloser, error) {
	b, err := s.Mem.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(iotest.OneByteReader(bytes.NewReader(b))), nil
}

func (s oneByteStore) PutStream(ctx context.Context, key string, r io.Reader) error {
	return objstore.PutReader(ctx, s.Mem, key, r)
}

func TestStreamSumIsTheTrailerWhateverTheReadSizes(t *testing.T) {
	ctx := context.Background()
	data := append(bytes.Repeat([]byte{7}, 200_000), 1, 2, 3, 4)
	for _, st := range []objstore.Store{objstore.NewMem(), oneByteStore{objstore.NewMem()}} {
		if err := st.Put(ctx, "d", data); err != nil {
			t.Fatal(err)
		}
		sum, ok, err := streamSum(ctx, st, "d")
		if err != nil || !ok || sum != fileSum(data) {
			t.Errorf("%T: streamSum = %x, %v, %v; want %x", st, sum, ok, err, fileSum(data))
		}
		st.Put(ctx, "short", []byte{1, 2})
		if _, ok, err := streamSum(ctx, st, "short"); ok || err != nil {
			t.Errorf("%T: a 2-byte file has a trailer (%v)", st, err)
		}
	}
}
