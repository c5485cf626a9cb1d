package objstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/objstore"
)

// DeleteMany on the S3 test server deletes every key named, over more than
// one request, leaves the others, and takes absent keys.
func TestS3DeleteManyDeletesInBatches(t *testing.T) {
	srv := s3test.Start(t)
	st := srv.Store(t, "many", "p/")
	ctx := context.Background()
	var doomed []string
	for i := 0; i < 1203; i++ {
		k := fmt.Sprintf("d/%04d", i)
		if err := st.Put(ctx, k, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		doomed = append(doomed, k)
	}
	if err := st.Put(ctx, "keep", []byte("x")); err != nil {
		t.Fatal(err)
	}
	var bd objstore.BatchDeleter = st
	if err := bd.DeleteMany(ctx, append(doomed, "d/absent")); err != nil {
		t.Fatal(err)
	}
	keys, err := st.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"keep"}) {
		t.Fatalf("after DeleteMany: %d keys left (%v...)", len(keys), keys[:min(3, len(keys))])
	}
}
