// Package storetest is the contract test suite for objstore.Store
// implementations. Every backend and every decorator that claims to be a
// Store runs it:
//
//	storetest.Run(t, func(t *testing.T) objstore.Store { return newEmptyStore(t) })
//
// It owns only tests of the Store contract; it must not depend on any
// backend's internals.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/objstore"
)

// Run runs the contract suite. newStore must return an empty store, a new
// one for each call.
func Run(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s objstore.Store)
	}{
		{"PutThenGetReturnsSameBytes", testPutGet},
		{"PutReplacesWholeObject", testPutReplaces},
		{"GetMissingIsErrNotExist", testGetMissing},
		{"SecondPutIfAbsentIsErrExistsAndKeepsFirstData", testPutIfAbsentTwice},
		{"PutIfAbsentOnKeyWrittenByPutIsErrExists", testPutIfAbsentAfterPut},
		{"ConcurrentPutIfAbsentHasExactlyOneWinner", testPutIfAbsentRace},
		{"ListReturnsKeysWithPrefixInLexicalOrder", testList},
		{"ListInfoAfterReturnsOnlyKeysAfterTheStart", testListAfter},
		{"DeleteThenGetIsErrNotExist", testDelete},
		{"DeleteMissingIsErrNotExist", testDeleteMissing},
		{"DeletedNestedKeyFreesItsParentName", testDeleteNestedFreesParent},
		{"PrefixedStoreIsScopedToItsPrefix", testPrefixed},
		{"StreamedPutThenStreamedGetReturnsSameBytes", testStreamRoundTrip},
		{"FailedStreamedPutLeavesOldObject", testStreamFailedPut},
		{"StreamedGetMissingIsErrNotExist", testStreamGetMissing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func mustPut(t *testing.T, s objstore.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(context.Background(), key, data); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func mustGet(t *testing.T, s objstore.Store, key string) []byte {
	t.Helper()
	b, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return b
}

func mustList(t *testing.T, s objstore.Store, prefix string) []string {
	t.Helper()
	keys, err := s.List(context.Background(), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return keys
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want one matching %q", what, err, target)
	}
}

func testPutGet(t *testing.T, s objstore.Store) {
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 64*1024+3) // ~1 MiB, not a round size
	cases := map[string][]byte{
		"plain":                  []byte("hello"),
		"empty":                  {},
		"binary/all-bytes":       binary,
		"nested/a/b/c/deep.json": []byte(`{"x":1}`),
		"part/window_date=2026-01-01/part 0+1.bin": []byte("special characters in the key"),
		"unicode/ключ-ü.txt":                       []byte("unicode key"),
		"big/object":                               big,
	}
	for k, v := range cases {
		mustPut(t, s, k, v)
	}
	for k, v := range cases {
		if got := mustGet(t, s, k); !bytes.Equal(got, v) {
			t.Errorf("Get(%q) = %d bytes %.20q, want %d bytes %.20q", k, len(got), got, len(v), v)
		}
	}
}

func testPutReplaces(t *testing.T, s objstore.Store) {
	mustPut(t, s, "k", []byte("a much longer first value"))
	mustPut(t, s, "k", []byte("short"))
	if got := mustGet(t, s, "k"); string(got) != "short" {
		t.Fatalf("Get after second Put = %q, want %q", got, "short")
	}
}

func testGetMissing(t *testing.T, s objstore.Store) {
	_, err := s.Get(context.Background(), "never/written")
	wantErr(t, "Get of a missing key", err, objstore.ErrNotExist)
	mustPut(t, s, "dir/child", []byte("x"))
	_, err = s.Get(context.Background(), "dir")
	wantErr(t, "Get of a key that is only a prefix of another", err, objstore.ErrNotExist)
}

func testPutIfAbsentTwice(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	if err := s.PutIfAbsent(ctx, "offsets/0", []byte("first")); err != nil {
		t.Fatalf("first PutIfAbsent: %v", err)
	}
	err := s.PutIfAbsent(ctx, "offsets/0", []byte("second"))
	wantErr(t, "second PutIfAbsent", err, objstore.ErrExists)
	if got := mustGet(t, s, "offsets/0"); string(got) != "first" {
		t.Fatalf("after losing PutIfAbsent, Get = %q, want %q", got, "first")
	}
}

func testPutIfAbsentAfterPut(t *testing.T, s objstore.Store) {
	mustPut(t, s, "k", []byte("by put"))
	err := s.PutIfAbsent(context.Background(), "k", []byte("by put-if-absent"))
	wantErr(t, "PutIfAbsent on a key written by Put", err, objstore.ErrExists)
	if got := mustGet(t, s, "k"); string(got) != "by put" {
		t.Fatalf("Get = %q, want %q", got, "by put")
	}
}

func testPutIfAbsentRace(t *testing.T, s objstore.Store) {
	const n = 16
	ctx := context.Background()
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = s.PutIfAbsent(ctx, "commits/7", []byte(fmt.Sprintf("writer-%02d", i)))
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("writers %d and %d both won PutIfAbsent", winner, i)
			}
			winner = i
		case errors.Is(err, objstore.ErrExists):
		default:
			t.Fatalf("writer %d: got %v, want nil or ErrExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no writer won PutIfAbsent; errors: %v", errs)
	}
	if got, want := string(mustGet(t, s, "commits/7")), fmt.Sprintf("writer-%02d", winner); got != want {
		t.Fatalf("object holds %q, want the winner's %q", got, want)
	}
}

func testList(t *testing.T, s objstore.Store) {
	// Chosen so that directory walk order differs from lexical key order:
	// '-' (0x2d) < '.' (0x2e) < '/' (0x2f) < 'b' (0x62).
	keys := []string{
		"l/ab", "l/a/z", "l/a.x/1", "l/a-1", "l/a/y/deep",
		"l/b", "m/other", "lz",
	}
	for _, k := range keys {
		mustPut(t, s, k, []byte(k))
	}
	oracle := func(prefix string) []string {
		var out []string
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) {
				out = append(out, k)
			}
		}
		sort.Strings(out)
		return out
	}
	for _, prefix := range []string{"", "l", "l/", "l/a", "l/a/", "l/a.x/", "l/a/y/deep", "m/", "nothing/", "l/c"} {
		got := mustList(t, s, prefix)
		want := oracle(prefix)
		if !slices.Equal(got, want) {
			t.Errorf("List(%q) = %q, want %q", prefix, got, want)
		}
	}
}

func testListAfter(t *testing.T, s objstore.Store) {
	// Directories before, around and after the start keys, with names
	// whose walk order differs from key order.
	keys := []string{
		"l/ab", "l/a/z", "l/a.x/1", "l/a-1", "l/a/y/deep",
		"l/b", "l/date=01/h=00/f", "l/date=01/h=01/f", "l/date=02/h=00/a",
		"l/date=02/h=00/b", "l/date=03/f", "m/other", "lz",
	}
	for _, k := range keys {
		mustPut(t, s, k, []byte(k))
	}
	ctx := context.Background()
	for _, tc := range []struct{ prefix, after string }{
		{"", ""}, {"", "l/a"}, {"l/", "l/a/"}, {"l/", "l/a/y/deep"}, {"l/", "l/date=02/h=00/"},
		{"l/", "l/date=02/h=00/a"}, {"l/", "l/date=01/"}, {"l/", "l/date=01/h=01/f"},
		{"l/date=0", "l/date=02"}, {"", "lz"}, {"", "zzz"}, {"m/", "a"}, {"l/a", "l/a."},
	} {
		infos, err := objstore.ListInfoAfter(ctx, s, tc.prefix, tc.after)
		if err != nil {
			t.Fatalf("ListInfoAfter(%q, %q): %v", tc.prefix, tc.after, err)
		}
		var got, want []string
		for _, o := range infos {
			got = append(got, o.Key)
			if o.Size != int64(len(o.Key)) || o.ModTime.IsZero() {
				t.Errorf("ListInfoAfter(%q, %q): %s has size %d, time %v", tc.prefix, tc.after, o.Key, o.Size, o.ModTime)
			}
		}
		for _, k := range keys {
			if strings.HasPrefix(k, tc.prefix) && k > tc.after {
				want = append(want, k)
			}
		}
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("ListInfoAfter(%q, %q) = %q, want %q", tc.prefix, tc.after, got, want)
		}
	}
}

func testDelete(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	mustPut(t, s, "state/1.bin", []byte("x"))
	mustPut(t, s, "state/2.bin", []byte("y"))
	if err := s.Delete(ctx, "state/1.bin"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err := s.Get(ctx, "state/1.bin")
	wantErr(t, "Get after Delete", err, objstore.ErrNotExist)
	if got, want := mustList(t, s, "state/"), []string{"state/2.bin"}; !slices.Equal(got, want) {
		t.Fatalf("List after Delete = %q, want %q", got, want)
	}
	if err := s.PutIfAbsent(ctx, "state/1.bin", []byte("again")); err != nil {
		t.Fatalf("PutIfAbsent after Delete: %v", err)
	}
}

func testDeleteMissing(t *testing.T, s objstore.Store) {
	err := s.Delete(context.Background(), "never/written")
	wantErr(t, "Delete of a missing key", err, objstore.ErrNotExist)
	mustPut(t, s, "dir/child", []byte("x"))
	err = s.Delete(context.Background(), "dir")
	wantErr(t, "Delete of a key that is only a prefix of another", err, objstore.ErrNotExist)
	if got := mustGet(t, s, "dir/child"); string(got) != "x" {
		t.Fatalf("Get(dir/child) after deleting dir = %q, want %q", got, "x")
	}
}

func testDeleteNestedFreesParent(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	mustPut(t, s, "x/y/z", []byte("nested"))
	if err := s.Delete(ctx, "x/y/z"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := s.PutIfAbsent(ctx, "x", []byte("now a plain key")); err != nil {
		t.Fatalf("PutIfAbsent(x) after deleting x/y/z: %v", err)
	}
	if got := mustGet(t, s, "x"); string(got) != "now a plain key" {
		t.Fatalf("Get(x) = %q", got)
	}
}

func testPrefixed(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	mustPut(t, s, "outside", []byte("o"))
	mustPut(t, s, "scopeX/k", []byte("not in scope/ despite the shared string prefix"))
	p := objstore.Prefixed(s, "scope")
	mustPut(t, p, "k", []byte("v"))
	if err := p.PutIfAbsent(ctx, "sub/k2", []byte("v2")); err != nil {
		t.Fatalf("PutIfAbsent through prefix: %v", err)
	}
	if got := mustGet(t, s, "scope/k"); string(got) != "v" {
		t.Fatalf("inner Get(scope/k) = %q, want %q", got, "v")
	}
	if got, want := mustList(t, p, ""), []string{"k", "sub/k2"}; !slices.Equal(got, want) {
		t.Fatalf("prefixed List(\"\") = %q, want %q", got, want)
	}
	if got, want := mustList(t, p, "sub/"), []string{"sub/k2"}; !slices.Equal(got, want) {
		t.Fatalf("prefixed List(sub/) = %q, want %q", got, want)
	}
	_, err := p.Get(ctx, "outside")
	wantErr(t, "prefixed Get of a key outside the prefix", err, objstore.ErrNotExist)
	nested := objstore.Prefixed(p, "sub/")
	if got := mustGet(t, nested, "k2"); string(got) != "v2" {
		t.Fatalf("nested prefixed Get(k2) = %q, want %q", got, "v2")
	}
	if err := p.Delete(ctx, "k"); err != nil {
		t.Fatalf("prefixed Delete: %v", err)
	}
	_, err = s.Get(ctx, "scope/k")
	wantErr(t, "inner Get after prefixed Delete", err, objstore.ErrNotExist)
	if got, want := mustList(t, s, ""), []string{"outside", "scope/sub/k2", "scopeX/k"}; !slices.Equal(got, want) {
		t.Fatalf("inner List after prefixed writes = %q, want %q", got, want)
	}
}

// streamSize is larger than one part of a streamed S3 put (8 MiB), so the
// S3 backend takes its multipart path.
const streamSize = 12<<20 + 12345

// pattern returns n deterministic pseudo-random bytes.
func pattern(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// onlyReader hides a reader's other methods (Len, WriterTo, Seek), as a
// pipe would.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(b []byte) (int, error) { return o.r.Read(b) }

func testStreamRoundTrip(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	for _, n := range []int{0, 10, streamSize} {
		key := fmt.Sprintf("stream/obj-%d", n)
		want := pattern(uint64(n)+1, n)
		if err := objstore.PutReader(ctx, s, key, onlyReader{bytes.NewReader(want)}); err != nil {
			t.Fatalf("PutReader(%q, %d bytes): %v", key, n, err)
		}
		rc, err := objstore.GetReader(ctx, s, key)
		if err != nil {
			t.Fatalf("GetReader(%q): %v", key, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("read stream of %q: %v", key, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("streamed %d bytes, read back %d (equal prefix: %v)", n, len(got), bytes.HasPrefix(want, got))
		}
		if whole := mustGet(t, s, key); !bytes.Equal(whole, want) {
			t.Fatalf("Get of a streamed object: %d bytes, want %d", len(whole), n)
		}
	}
	// PutWriter: an encoder writing into the store.
	want := pattern(7, 3<<20)
	err := objstore.PutWriter(ctx, s, "stream/written", func(w io.Writer) error {
		for off := 0; off < len(want); off += 100_000 {
			if _, err := w.Write(want[off:min(off+100_000, len(want))]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("PutWriter: %v", err)
	}
	if got := mustGet(t, s, "stream/written"); !bytes.Equal(got, want) {
		t.Fatalf("PutWriter wrote %d bytes, want %d", len(got), len(want))
	}
}

// failingReader returns n bytes, then err.
type failingReader struct {
	data []byte
	err  error
}

func (f *failingReader) Read(b []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(b, f.data)
	f.data = f.data[n:]
	return n, nil
}

func testStreamFailedPut(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	old := []byte("the old object")
	mustPut(t, s, "k", old)
	boom := errors.New("source failed")
	for _, n := range []int{100, streamSize} {
		err := objstore.PutReader(ctx, s, "k", &failingReader{data: pattern(3, n), err: boom})
		if err == nil {
			t.Fatalf("a streamed put whose reader failed after %d bytes returned nil", n)
		}
		if got := mustGet(t, s, "k"); !bytes.Equal(got, old) {
			t.Fatalf("after a failed streamed put of %d bytes the object is %d bytes, want the old %q", n, len(got), old)
		}
	}
	err := objstore.PutWriter(ctx, s, "never", func(w io.Writer) error {
		if _, err := w.Write(pattern(4, 1<<20)); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("PutWriter whose write failed: %v, want the write's error", err)
	}
	keys, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"k"}) {
		t.Fatalf("after failed streamed puts the store lists %v, want only [k]", keys)
	}
}

func testStreamGetMissing(t *testing.T, s objstore.Store) {
	_, err := objstore.GetReader(context.Background(), s, "missing/key")
	if !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("GetReader of a missing key: %v, want ErrNotExist", err)
	}
}
