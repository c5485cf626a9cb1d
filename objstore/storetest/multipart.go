package storetest

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/objstore"
)

// RunMultipart runs the contract suite of the optional objstore.Multipart
// capability. newStore must return an empty store that implements it.
func RunMultipart(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s objstore.Store, mp objstore.Multipart)
	}{
		{"StagedObjectIsInvisibleUntilComplete", testMultipartInvisible},
		{"CompleteTwiceIsSuccess", testMultipartCompleteTwice},
		{"CompleteAfterAbortIsErrNoSuchUpload", testMultipartAbortThenComplete},
		{"AbortLeavesCompletedObjectAlone", testMultipartAbortAfterComplete},
		{"ManyPartsConcatenate", testMultipartManyParts},
		{"EtagsAreS3Etags", testMultipartETags},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			mp, ok := s.(objstore.Multipart)
			if !ok {
				t.Fatalf("%T does not implement objstore.Multipart", s)
			}
			tc.fn(t, s, mp)
		})
	}
}

func stage(t *testing.T, mp objstore.Multipart, key string, parts ...[]byte) (string, []objstore.Part) {
	t.Helper()
	ctx := context.Background()
	id, err := mp.CreateMultipart(ctx, key)
	if err != nil {
		t.Fatalf("CreateMultipart(%s): %v", key, err)
	}
	var ps []objstore.Part
	for i, b := range parts {
		p, err := mp.UploadPart(ctx, key, id, i+1, b)
		if err != nil {
			t.Fatalf("UploadPart(%s, %d): %v", key, i+1, err)
		}
		ps = append(ps, p)
	}
	return id, ps
}

func testMultipartInvisible(t *testing.T, s objstore.Store, mp objstore.Multipart) {
	ctx := context.Background()
	id, parts := stage(t, mp, "d/x.parquet", []byte("hello"))
	if _, err := s.Get(ctx, "d/x.parquet"); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("Get of a staged key = %v, want ErrNotExist", err)
	}
	if keys, err := s.List(ctx, ""); err != nil || len(keys) != 0 {
		t.Fatalf("List with only a staged upload = %q, %v; want nothing", keys, err)
	}
	if err := mp.CompleteMultipart(ctx, "d/x.parquet", id, parts); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "d/x.parquet")
	if err != nil || string(got) != "hello" {
		t.Fatalf("Get after Complete = %q, %v", got, err)
	}
	if keys, err := s.List(ctx, ""); err != nil || !slices.Equal(keys, []string{"d/x.parquet"}) {
		t.Fatalf("List after Complete = %q, %v; want [d/x.parquet]", keys, err)
	}
}

func testMultipartCompleteTwice(t *testing.T, s objstore.Store, mp objstore.Multipart) {
	ctx := context.Background()
	id, parts := stage(t, mp, "k", []byte("abc"))
	for i := 0; i < 2; i++ {
		if err := mp.CompleteMultipart(ctx, "k", id, parts); err != nil {
			t.Fatalf("Complete #%d: %v", i+1, err)
		}
	}
	// A different object now under the key: the old upload's completion
	// must not be taken as done.
	if err := s.Put(ctx, "k", []byte("other")); err != nil {
		t.Fatal(err)
	}
	err := mp.CompleteMultipart(ctx, "k", id, parts)
	// versitygw keeps answering 200 for a completed upload; then the
	// object must have been left as it was or replaced by the parts.
	if err == nil {
		got, _ := s.Get(ctx, "k")
		if string(got) != "other" && string(got) != "abc" {
			t.Fatalf("object after a late Complete = %q", got)
		}
		return
	}
	if !errors.Is(err, objstore.ErrNoSuchUpload) {
		t.Fatalf("Complete of a completed upload over another object = %v, want ErrNoSuchUpload", err)
	}
}

func testMultipartAbortThenComplete(t *testing.T, s objstore.Store, mp objstore.Multipart) {
	ctx := context.Background()
	id, parts := stage(t, mp, "a/b", []byte("abc"))
	if err := mp.AbortMultipart(ctx, "a/b", id); err != nil {
		t.Fatal(err)
	}
	if err := mp.AbortMultipart(ctx, "a/b", id); err != nil {
		t.Fatalf("second Abort: %v", err)
	}
	if err := mp.CompleteMultipart(ctx, "a/b", id, parts); !errors.Is(err, objstore.ErrNoSuchUpload) {
		t.Fatalf("Complete after Abort = %v, want ErrNoSuchUpload", err)
	}
	if keys, err := s.List(ctx, ""); err != nil || len(keys) != 0 {
		t.Fatalf("List after Abort = %q, %v", keys, err)
	}
}

func testMultipartAbortAfterComplete(t *testing.T, s objstore.Store, mp objstore.Multipart) {
	ctx := context.Background()
	id, parts := stage(t, mp, "k", []byte("abc"))
	if err := mp.CompleteMultipart(ctx, "k", id, parts); err != nil {
		t.Fatal(err)
	}
	if err := mp.AbortMultipart(ctx, "k", id); err != nil {
		t.Fatalf("Abort after Complete: %v", err)
	}
	if got, err := s.Get(ctx, "k"); err != nil || string(got) != "abc" {
		t.Fatalf("Get after Abort of a completed upload = %q, %v", got, err)
	}
}

func testMultipartManyParts(t *testing.T, s objstore.Store, mp objstore.Multipart) {
	ctx := context.Background()
	// S3 wants parts other than the last to be at least 5 MiB.
	big := bytes.Repeat([]byte("0123456789abcdef"), 5<<20/16)
	id, parts := stage(t, mp, "m", big, []byte("tail"))
	if err := mp.CompleteMultipart(ctx, "m", id, parts); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "m")
	if err != nil || !bytes.Equal(got, append(slices.Clone(big), "tail"...)) {
		t.Fatalf("Get after a two-part Complete: %d bytes, %v", len(got), err)
	}
	if err := mp.CompleteMultipart(ctx, "m", id, parts); err != nil {
		t.Fatalf("second Complete: %v", err)
	}
}

func testMultipartETags(t *testing.T, s objstore.Store, mp objstore.Multipart) {
	_, parts := stage(t, mp, "e", []byte("hello"))
	if want := `"5d41402abc4b2a76b9719d911017c592"`; parts[0].ETag != want || parts[0].Size != 5 {
		t.Fatalf("part = %+v, want etag %s size 5", parts[0], want)
	}
	// md5(md5("hello")) computed independently.
	inner := md5.Sum([]byte("hello"))
	outer := md5.Sum(inner[:])
	got, err := objstore.MultipartETag(parts)
	if want := `"` + hex.EncodeToString(outer[:]) + `-1"`; err != nil || got != want {
		t.Fatalf("MultipartETag = %s, %v; want %s", got, err, want)
	}
}
