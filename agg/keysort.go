package agg

import (
	"cmp"
	"slices"
)

// SortKeys returns the order of keys sorted as bytes (indexes into keys;
// equal keys keep no particular order). It sorts eight bytes at a time:
// every key by its first eight bytes (as an integer, with how many of
// them the key has), then each run that shares them by the next eight,
// and so on. Encoded keys share long prefixes (a window's bound, a value's
// tag, an id's common letters), which a comparison of whole keys reads
// again and again; here each byte is read about once per level. A reduce
// sorts every row it emits and every change its state writes, so this was
// a tenth of the reduce at a million groups.
func SortKeys[K ~string | ~[]byte](keys []K) []int32 {
	items := make([]keyWord, len(keys))
	for i := range items {
		items[i].i = int32(i)
	}
	sortWords(keys, items, 0)
	order := make([]int32, len(items))
	for i, it := range items {
		order[i] = it.i
	}
	return order
}

// keyWord is a key's eight bytes at one depth (big-endian, zero-padded)
// and how many of them it has (9: it goes on after them).
type keyWord struct {
	w uint64
	n uint8
	i int32
}

func sortWords[K ~string | ~[]byte](keys []K, items []keyWord, depth int) {
	for j := range items {
		k := keys[items[j].i]
		if len(k) >= depth+8 {
			b := k[depth : depth+8]
			items[j].w = uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
				uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
			items[j].n = 8
			if len(k) > depth+8 {
				items[j].n = 9
			}
			continue
		}
		var w uint64
		for p := depth; p < depth+8; p++ {
			w <<= 8
			if p < len(k) {
				w |= uint64(k[p])
			}
		}
		items[j].w, items[j].n = w, uint8(max(len(k)-depth, 0))
	}
	// A key that ends inside the word is a prefix of any longer key with
	// the same word (its missing bytes read as zeros), so it sorts first.
	if len(items) < radixMin {
		slices.SortFunc(items, func(a, b keyWord) int {
			if c := cmp.Compare(a.w, b.w); c != 0 {
				return c
			}
			return cmp.Compare(a.n, b.n)
		})
	} else {
		radixSort(items)
	}
	for start := 0; start < len(items); {
		end := start + 1
		for end < len(items) && items[end].w == items[start].w && items[end].n == items[start].n {
			end++
		}
		if end-start > 1 && items[start].n == 9 {
			sortWords(keys, items[start:end], depth+8)
		}
		start = end
	}
}

// radixMin is the run length from which radixSort beats a comparison sort.
const radixMin = 256

// radixSort sorts items by (w, n): a stable counting pass per byte, least
// significant first, skipping the bytes every item shares (a window's
// bound varies in its last bytes only, an id's word after its common
// letters), so a level costs a few passes over the items, not a
// comparison sort's log n.
func radixSort(items []keyWord) {
	and, or := ^uint64(0), uint64(0)
	nAnd, nOr := uint8(0xFF), uint8(0)
	for _, it := range items {
		and, or = and&it.w, or|it.w
		nAnd, nOr = nAnd&it.n, nOr|it.n
	}
	tmp := make([]keyWord, len(items))
	src, dst := items, tmp
	pass := func(digit func(keyWord) uint8) {
		var count [256]int
		for _, it := range src {
			count[digit(it)]++
		}
		pos := 0
		for d, c := range count {
			count[d] = pos
			pos += c
		}
		for _, it := range src {
			d := digit(it)
			dst[count[d]] = it
			count[d]++
		}
		src, dst = dst, src
	}
	if nAnd != nOr {
		pass(func(it keyWord) uint8 { return it.n })
	}
	for shift := uint(0); shift < 64; shift += 8 {
		if (and^or)>>shift&0xFF == 0 {
			continue
		}
		pass(func(it keyWord) uint8 { return uint8(it.w >> shift) })
	}
	if &src[0] != &items[0] {
		copy(items, src)
	}
}
