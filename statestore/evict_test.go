package statestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/objstore"
)

// boundKey is a key as agg encodes a windowed group: an 8-byte bound, then
// the group's bytes. A few keys are shorter than a bound, as a store must
// take any key.
// shortOr is n, or short under go test -short (the fast loop): the same
// randomized walk, fewer steps.
func shortOr(n, short int) int {
	if testing.Short() {
		return short
	}
	return n
}

func boundKey(rng *rand.Rand) string {
	if rng.IntN(15) == 0 {
		return fmt.Sprintf("s%d", rng.IntN(5))
	}
	return string(binary.BigEndian.AppendUint64(nil, uint64(100+rng.IntN(6)))) + fmt.Sprintf("g%02d", rng.IntN(12))
}

// randomUpper is an EvictBelow bound: mostly a bound's eight bytes, some
// longer (inside a bound) or shorter (a prefix of one).
func randomUpper(rng *rand.Rand) []byte {
	u := binary.BigEndian.AppendUint64(nil, uint64(100+rng.IntN(7)))
	switch rng.IntN(5) {
	case 0:
		return append(u, fmt.Sprintf("g%02d", rng.IntN(12))...)
	case 1:
		return u[:3+rng.IntN(5)]
	case 2:
		return []byte{'s', '3'}
	}
	return u
}

// evictModel is EvictBelow on the oracle: the rows below upper, removed.
func evictModel(m model, upper []byte) model {
	out := model{}
	for k, v := range m {
		if k < string(upper) {
			out[k] = v
			delete(m, k)
		}
	}
	return out
}

// EvictBelow removes exactly the rows below its bound, whatever the batch
// did before and does after, in the memory provider with one table and
// with a table per bound, and in pebble; every version loads from the
// checkpoint, and the providers write the same files byte for byte.
func TestEvictBelowMatchesTheOracleInEveryProvider(t *testing.T) {
	ctx := context.Background()
	type prov struct {
		name string
		cp   objstore.Store
		p    Provider
	}
	var provs []prov
	for _, name := range []string{"memory", "memory-bounds", "pebble"} {
		cp, err := objstore.NewFS(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		var p Provider
		switch name {
		case "memory":
			p = NewMemory(cp, MemoryOptions{SnapshotInterval: 5})
		case "memory-bounds":
			p = NewMemory(cp, MemoryOptions{SnapshotInterval: 5, BoundPrefix: true})
		default:
			p = newTestPebble(t, cp, 5)
		}
		provs = append(provs, prov{name, cp, p})
	}
	rng := rand.New(rand.NewPCG(3, 4))
	history := []model{{}}
	rangeDeltas := 0
	// -short (the fast loop) runs fewer steps of the same walk.
	for step := range shortOr(250, 60) {
		v := Version(len(history) - 1)
		stores := make([]Store, len(provs))
		for i, pv := range provs {
			st, err := pv.p.Open(ctx, 0, v)
			if err != nil {
				t.Fatalf("step %d: %s: open version %d: %v", step, pv.name, v, err)
			}
			stores[i] = st
		}
		m := maps.Clone(history[v])
		for range rng.IntN(30) {
			k := boundKey(rng)
			switch r := rng.IntN(12); {
			case r < 2:
				for i, st := range stores {
					got, ok, err := st.Get([]byte(k))
					if err != nil {
						t.Fatal(err)
					}
					if want, wantOK := m[k]; ok != wantOK || string(got) != want {
						t.Fatalf("step %d: %s: Get(%q) = %q, %v; want %q, %v", step, provs[i].name, k, got, ok, want, wantOK)
					}
				}
			case r < 7:
				val := fmt.Sprintf("v%d", rng.IntN(1000))
				for _, st := range stores {
					if err := st.Put([]byte(k), []byte(val)); err != nil {
						t.Fatal(err)
					}
				}
				m[k] = val
			case r < 9:
				for _, st := range stores {
					if err := st.Delete([]byte(k)); err != nil {
						t.Fatal(err)
					}
				}
				delete(m, k)
			default:
				upper := randomUpper(rng)
				want := evictModel(m, upper)
				for i, st := range stores {
					got := model{}
					n, err := st.EvictBelow(upper, func(k, v []byte) error {
						if _, dup := got[string(k)]; dup {
							return fmt.Errorf("key %q evicted twice", k)
						}
						got[string(k)] = string(v)
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
					if d := diffModels(want, got); d != "" || n != len(want) {
						t.Fatalf("step %d: %s: EvictBelow(%q) removed %d: %s", step, provs[i].name, upper, n, d)
					}
				}
			}
		}
		for i, st := range stores {
			checkStore(t, fmt.Sprintf("step %d: %s mid-batch", step, provs[i].name), st, m)
			if ms, ok := st.(*memStore); ok {
				var sum int64
				ms.part.data.each(func(t *memTable) error { sum += t.held(); return nil })
				if ms.part.data.bytes != sum {
					t.Fatalf("step %d: %s keeps %d bytes as its tables' memory, they hold %d", step, provs[i].name, ms.part.data.bytes, sum)
				}
			}
		}
		if rng.IntN(7) == 0 {
			for _, st := range stores {
				st.Abort()
			}
			continue
		}
		var writes []int
		for i, st := range stores {
			w, err := st.Commit(ctx, "")
			if err != nil {
				t.Fatalf("step %d: %s: commit: %v", step, provs[i].name, err)
			}
			writes = append(writes, w)
		}
		if writes[0] != writes[1] || writes[0] != writes[2] {
			t.Fatalf("step %d: objects written %v differ between providers", step, writes)
		}
		history = append(history, m)
	}
	// Fresh providers rebuild every version from each checkpoint.
	for _, pv := range provs {
		fresh := NewMemory(pv.cp, MemoryOptions{})
		bounded := newTestPebble(t, pv.cp, 5)
		for v, want := range history {
			for _, p := range []Provider{fresh, bounded} {
				if got := contents(t, p, 0, Version(v)); diffModels(want, got) != "" {
					t.Fatalf("%s's checkpoint, version %d: %s", pv.name, v, diffModels(want, got))
				}
			}
		}
	}
	files := make([]map[string][]byte, len(provs))
	for i, pv := range provs {
		files[i] = listAll(t, pv.cp, "state/")
	}
	for k, b := range files[0] {
		for i := 1; i < len(provs); i++ {
			if !bytes.Equal(b, files[i][k]) {
				t.Fatalf("file %s differs between %s and %s", k, provs[0].name, provs[i].name)
			}
		}
		if bytes.HasSuffix([]byte(k), []byte(".delta")) && b[4] == fileFormatBelow {
			rangeDeltas++
		}
	}
	if len(files[0]) != len(files[1]) || len(files[0]) != len(files[2]) {
		t.Fatalf("providers wrote %d, %d and %d files", len(files[0]), len(files[1]), len(files[2]))
	}
	if rangeDeltas == 0 {
		t.Fatal("no delta recorded a range deletion")
	}
}

// A delta that evicts a range is one range entry, not a deletion per row,
// and is format 2; one that does not is format 1, byte for byte what
// builds before the range wrote. Format 1 readers refuse format 2 (the
// version check an older build runs), and a range entry anywhere but a
// delta's first entry is refused.
func TestRangeDeletionIsFormat2AndOnlyWhereItBelongs(t *testing.T) {
	ctx := context.Background()
	cp := objstore.NewMem()
	p := NewMemory(cp, MemoryOptions{BoundPrefix: true})
	bound := func(b uint64, g string) []byte { return append(binary.BigEndian.AppendUint64(nil, b), g...) }
	st, err := p.Open(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for b := range uint64(3) {
		for g := range 100 {
			st.Put(bound(b, fmt.Sprint(g)), []byte("1"))
		}
	}
	if _, err := st.Commit(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	v1, _ := cp.Get(ctx, deltaKey(0, 0, 1, "a"))
	if v1[4] != fileFormat {
		t.Fatalf("a delta without a range is format %d", v1[4])
	}
	old := encodeFile(kindDelta, []change{{key: bound(0, "0"), value: []byte("1")}})
	if old[4] != 1 {
		t.Fatalf("encodeFile without a range wrote format %d", old[4])
	}

	st, err = p.Open(ctx, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	n, err := st.EvictBelow(binary.BigEndian.AppendUint64(nil, 2), nil)
	if err != nil || n != 200 {
		t.Fatalf("EvictBelow removed %d, %v; want 200", n, err)
	}
	st.Put(bound(2, "new"), []byte("2"))
	if _, err := st.Commit(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	v2, _ := cp.Get(ctx, deltaKey(0, 0, 2, "b"))
	if v2[4] != fileFormatBelow {
		t.Fatalf("a delta with a range is format %d", v2[4])
	}
	var entries []change
	if err := decodeFile("v2", v2, kindDelta, func(c change) {
		entries = append(entries, change{key: bytes.Clone(c.key), value: bytes.Clone(c.value), del: c.del, below: c.below})
	}); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || !entries[0].below || !bytes.Equal(entries[0].key, binary.BigEndian.AppendUint64(nil, 2)) ||
		entries[1].below || entries[1].del || !bytes.Equal(entries[1].key, bound(2, "new")) {
		t.Fatalf("delta entries %+v, want the range then the put", entries)
	}
	if got := contents(t, NewMemory(cp, MemoryOptions{}), 0, 2); len(got) != 101 {
		t.Fatalf("version 2 loads with %d rows, want 101", len(got))
	}

	// What an older build does with the file: its check of the version.
	if v2[4] == 1 {
		t.Fatal("an older build would read the range deletion as format 1")
	}
	reject := func(what string, data []byte, kind byte) {
		t.Helper()
		if err := decodeFile(what, data, kind, func(change) {}); err == nil {
			t.Errorf("%s: decoded", what)
		}
		if _, err := decodeStream(what, bytes.NewReader(data), kind, func(change) error { return nil }); err == nil {
			t.Errorf("%s: stream decoded", what)
		}
	}
	asFormat := func(b []byte, f byte) []byte {
		b = bytes.Clone(b[:len(b)-4])
		b[4] = f
		return binary.BigEndian.AppendUint32(b, crcOf(b))
	}
	reject("a range in a format 1 file", asFormat(v2, fileFormat), kindDelta)
	snap := bytes.Clone(v2[:len(v2)-4])
	snap[5] = kindSnap
	reject("a range in a snapshot", binary.BigEndian.AppendUint32(snap, crcOf(snap)), kindSnap)
	late := encodeFile(kindDelta, []change{{key: []byte("a"), value: []byte("1")}, {key: []byte("b"), below: true}})
	reject("a range after another entry", asFormat(late, fileFormatBelow), kindDelta)
	reject("format 3", asFormat(v2, 3), kindDelta)
}

func crcOf(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// An aborted batch that changed a partition leaves nothing behind: the
// next batch opens the committed version (reloaded from the checkpoint)
// whichever way the abort came.
func TestAbortAfterInPlaceChangesReopensTheCommittedVersion(t *testing.T) {
	ctx := context.Background()
	cp := objstore.NewMem()
	limit := NewMemoryLimit(1 << 30)
	p := NewMemory(cp, MemoryOptions{BoundPrefix: true, Limit: limit})
	want := model{}
	st, _ := p.Open(ctx, 0, 0)
	for g := range 50 {
		k := string(binary.BigEndian.AppendUint64(nil, uint64(g%3))) + fmt.Sprint(g)
		st.Put([]byte(k), []byte("x"))
		want[k] = "x"
	}
	if _, err := st.Commit(ctx, ""); err != nil {
		t.Fatal(err)
	}
	used := limit.Used()
	st, _ = p.Open(ctx, 0, 1)
	st.EvictBelow(binary.BigEndian.AppendUint64(nil, 2), nil)
	st.Put([]byte("0123456789"), []byte("y"))
	st.Delete([]byte(string(binary.BigEndian.AppendUint64(nil, 2)) + "2"))
	st.Abort()
	if limit.Used() != 0 {
		t.Fatalf("the dropped partition keeps %d bytes of the budget", limit.Used())
	}
	if got := contents(t, p, 0, 1); diffModels(want, got) != "" {
		t.Fatalf("after the abort: %s", diffModels(want, got))
	}
	if limit.Used() != used {
		t.Fatalf("budget after the reload: %d, want %d", limit.Used(), used)
	}
}

// The delta's changes come out of memData in key order, so encodeFile
// finds them sorted: permute applies SortKeys's order in place.
func TestPermuteAppliesTheOrderInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for range 100 {
		n := rng.IntN(50)
		cs := make([]change, n)
		for i := range cs {
			cs[i] = change{key: []byte{byte(i)}}
		}
		order := make([]int32, n)
		for i, p := range rng.Perm(n) {
			order[i] = int32(p)
		}
		want := slices.Clone(order)
		permute(cs, order)
		for i, w := range want {
			if int32(cs[i].key[0]) != w {
				t.Fatalf("position %d holds %d, want %d", i, cs[i].key[0], w)
			}
		}
	}
	d := newMemData(true)
	for i := range 300 {
		d.put(binary.BigEndian.AppendUint64(nil, uint64(i%7)), []byte("v"))
		d.put(fmt.Appendf(binary.BigEndian.AppendUint64(nil, uint64(i%5)), "k%d", rng.IntN(1000)), []byte("v"))
	}
	got := d.delta()
	if !slices.IsSortedFunc(got, func(a, b change) int { return bytes.Compare(a.key, b.key) }) {
		t.Fatal("memData's delta is not in key order")
	}
}
