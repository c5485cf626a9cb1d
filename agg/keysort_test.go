package agg

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/row"
)

// randomKeys are keys with long shared prefixes, zero bytes and every
// length around the eight-byte words, some repeated.
func randomKeys(rng *rand.Rand, n int) [][]byte {
	alphabet := []byte{0x00, 0x01, 0x05, 'c', 'd', 0xFF}
	prefixes := [][]byte{nil, []byte("c"), bytes.Repeat([]byte{0}, 8), append(appendInt64(nil, 1700), 0x05, 'c', '-'), append(appendInt64(nil, 1701), 0x05)}
	keys := make([][]byte, n)
	for i := range keys {
		if i > 0 && rng.IntN(10) == 0 {
			keys[i] = slices.Clone(keys[rng.IntN(i)])
			continue
		}
		k := slices.Clone(prefixes[rng.IntN(len(prefixes))])
		for range rng.IntN(20) {
			k = append(k, alphabet[rng.IntN(len(alphabet))])
		}
		keys[i] = k
	}
	return keys
}

func TestSortKeysIsBytesOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 200 {
		n := rng.IntN(300)
		if round%10 == 0 {
			n = 1000 + rng.IntN(5000) // runs long enough for the radix passes
		}
		keys := randomKeys(rng, n)
		want := slices.Clone(keys)
		slices.SortFunc(want, bytes.Compare)
		order := SortKeys(keys)
		if len(order) != len(keys) {
			t.Fatalf("round %d: %d indexes for %d keys", round, len(order), len(keys))
		}
		seen := make([]bool, len(keys))
		for i, o := range order {
			if seen[o] {
				t.Fatalf("round %d: index %d twice", round, o)
			}
			seen[o] = true
			if !bytes.Equal(keys[o], want[i]) {
				t.Fatalf("round %d: position %d holds %q, want %q", round, i, keys[o], want[i])
			}
		}
		strs := make([]string, len(keys))
		for i, k := range keys {
			strs[i] = string(k)
		}
		for i, o := range SortKeys(strs) {
			if strs[o] != string(want[i]) {
				t.Fatalf("round %d: string keys: position %d holds %q, want %q", round, i, strs[o], want[i])
			}
		}
	}
}

// BenchmarkSortKeys sorts tile keys (a few windows' bounds, a course id)
// by whole-key comparison and eight bytes at a time. Compare with go test
// -bench, never with a timing assertion.
func BenchmarkSortKeys(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	keys := make([]string, 60_000)
	for i := range keys {
		k := appendInt64(nil, int64(rng.IntN(5))*300_000_000)
		k = appendValue(k, row.StringValue(fmt.Sprintf("c-%06d", rng.IntN(1_000_000))))
		keys[i] = string(k)
	}
	b.Run("compare", func(b *testing.B) {
		for range b.N {
			s := slices.Clone(keys)
			slices.SortFunc(s, strings.Compare)
		}
	})
	b.Run("words", func(b *testing.B) {
		for range b.N {
			SortKeys(keys)
		}
	})
}
