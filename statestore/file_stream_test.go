package statestore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

func randomChanges(seed uint64, n int, dels bool) []change {
	r := rand.New(rand.NewPCG(seed, 1))
	seen := map[string]bool{}
	var out []change
	for len(out) < n {
		k := fmt.Sprintf("key-%d", r.IntN(n*10))
		if seen[k] {
			continue
		}
		seen[k] = true
		c := change{key: []byte(k), value: bytes.Repeat([]byte{byte(r.Uint32())}, r.IntN(40))}
		if dels && r.IntN(4) == 0 {
			c = change{key: []byte(k), del: true}
		}
		out = append(out, c)
	}
	return out
}

func streamEncode(t *testing.T, kind byte, changes []change) []byte {
	t.Helper()
	sorted := append([]change(nil), changes...)
	encodeFile(kind, sorted) // sorts in place
	var b bytes.Buffer
	fw, err := newFileWriter(&b, kind, uint64(len(sorted)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range sorted {
		if err := fw.put(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The streamed writer writes the bytes encodeFile does, and the streamed
// reader reads what decodeFile reads, with the same checksum: files are
// interchangeable between the two paths and the two providers.
func TestStreamedStateFilesMatchTheWholeFileFormat(t *testing.T) {
	for _, n := range []int{0, 1, 7, 5000} {
		for _, kind := range []byte{kindDelta, kindSnap} {
			changes := randomChanges(uint64(n)+uint64(kind), n, kind == kindDelta)
			whole := encodeFile(kind, append([]change(nil), changes...))
			streamed := streamEncode(t, kind, changes)
			if !bytes.Equal(whole, streamed) {
				t.Fatalf("n=%d kind=%d: streamed bytes differ from encodeFile's", n, kind)
			}
			var a, b []string
			if err := decodeFile("x", whole, kind, func(c change) { a = append(a, fmt.Sprint(string(c.key), c.value, c.del)) }); err != nil {
				t.Fatal(err)
			}
			sum, err := decodeStream("x", bytes.NewReader(whole), kind, func(c change) error {
				b = append(b, fmt.Sprint(string(c.key), c.value, c.del))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(a) != fmt.Sprint(b) || sum != fileSum(whole) {
				t.Fatalf("n=%d kind=%d: streamed decode differs (sum %x want %x)", n, kind, sum, fileSum(whole))
			}
			// Reads of any size: one byte, half of what was asked.
			for _, r := range []io.Reader{iotest.OneByteReader(bytes.NewReader(whole)), iotest.HalfReader(bytes.NewReader(whole))} {
				var c []string
				sum, err := decodeStream("x", r, kind, func(ch change) error {
					c = append(c, fmt.Sprint(string(ch.key), ch.value, ch.del))
					return nil
				})
				if err != nil || sum != fileSum(whole) || fmt.Sprint(c) != fmt.Sprint(a) {
					t.Fatalf("n=%d kind=%d: decode through %T: %v", n, kind, r, err)
				}
			}
		}
	}
}

func TestStreamedReadRefusesCorruptFiles(t *testing.T) {
	good := encodeFile(kindSnap, randomChanges(9, 50, false))
	nop := func(change) error { return nil }
	for cut := 0; cut < len(good); cut++ {
		if _, err := decodeStream("x", bytes.NewReader(good[:cut]), kindSnap, nop); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated at %d of %d: %v, want ErrCorrupt", cut, len(good), err)
		}
	}
	for i := 0; i < len(good); i += 7 {
		bad := bytes.Clone(good)
		bad[i] ^= 0x40
		if _, err := decodeStream("x", bytes.NewReader(bad), kindSnap, nop); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: %v, want ErrCorrupt", i, err)
		}
	}
	if _, err := decodeStream("x", bytes.NewReader(append(bytes.Clone(good), 0)), kindSnap, nop); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("trailing byte: %v", err)
	}
	if _, err := decodeStream("x", bytes.NewReader(good), kindDelta, nop); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("wrong kind: %v", err)
	}
	// A read that fails is an I/O error, not a corrupt file.
	if _, err := decodeStream("x", io.MultiReader(bytes.NewReader(good[:100]), iotest.ErrReader(iotest.ErrTimeout)), kindSnap, nop); !errors.Is(err, iotest.ErrTimeout) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("failed read: %v, want the read's error and not ErrCorrupt", err)
	}
	var b bytes.Buffer
	fw, _ := newFileWriter(&b, kindSnap, 2)
	fw.put(change{key: []byte("b")})
	if err := fw.put(change{key: []byte("a")}); err == nil {
		t.Fatal("out-of-order keys accepted")
	}
	fw, _ = newFileWriter(&b, kindSnap, 2)
	fw.put(change{key: []byte("a")})
	if err := fw.close(); err == nil {
		t.Fatal("fewer entries than announced accepted")
	}
}
