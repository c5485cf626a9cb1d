package statestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/ids"
)

const (
	fileMagic = "SLST"
	// fileFormat is the format of snapshots and of deltas without a range
	// deletion; fileFormatBelow adds opDeleteBelow, which only a delta's
	// first entry may be. A delta is written as format 1 unless it needs
	// the range, so its bytes are those older builds wrote; a build that
	// reads only format 1 refuses a format 2 file (unknown format
	// version) instead of misreading it.
	fileFormat      = 1
	fileFormatBelow = 2
	kindDelta       = 1
	kindSnap        = 2
	opPut           = 1
	opDelete        = 2
	// opDeleteBelow deletes every row whose key is below its key (bytes
	// order) before the delta's other entries apply: a batch evicting the
	// closed windows (keys start with their bound, agg/key.go) records one
	// entry instead of a deletion per group.
	opDeleteBelow = 3
	deltaSuffix   = ".delta"
	snapSuffix    = ".snapshot"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// change is one entry of a delta or snapshot; del marks a deletion, below
// a range deletion of every key below key.
type change struct {
	key, value []byte
	del, below bool
}

// encodeFile encodes changes sorted by key (after a range deletion, which
// comes first), so the bytes are deterministic.
func encodeFile(kind byte, changes []change) []byte {
	format := byte(fileFormat)
	sorted := changes
	if len(changes) > 0 && changes[0].below {
		format, sorted = fileFormatBelow, changes[1:]
	}
	// slices.SortFunc, not sort.Slice: no reflection per swap, which
	// showed as an eighth of a large partition's reduce in the profile.
	byKey := func(a, b change) int { return bytes.Compare(a.key, b.key) }
	if !slices.IsSortedFunc(sorted, byKey) {
		slices.SortFunc(sorted, byKey)
	}
	size := len(fileMagic) + 2 + uvarintLen(len(changes)) + 4
	for _, c := range changes {
		size += 1 + uvarintLen(len(c.key)) + len(c.key)
		if !c.del && !c.below {
			size += uvarintLen(len(c.value)) + len(c.value)
		}
	}
	b := make([]byte, 0, size)
	b = append(b, fileMagic...)
	b = append(b, format, kind)
	b = binary.AppendUvarint(b, uint64(len(changes)))
	for _, c := range changes {
		if c.del || c.below {
			op := byte(opDelete)
			if c.below {
				op = opDeleteBelow
			}
			b = append(b, op)
			b = binary.AppendUvarint(b, uint64(len(c.key)))
			b = append(b, c.key...)
			continue
		}
		b = append(b, opPut)
		b = binary.AppendUvarint(b, uint64(len(c.key)))
		b = append(b, c.key...)
		b = binary.AppendUvarint(b, uint64(len(c.value)))
		b = append(b, c.value...)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// uvarintLen is the length of n's uvarint encoding.
func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

// decodeFile calls fn for each entry of a state file held whole. The
// providers read files with decodeStream (file_stream.go); this is the
// reference the streamed reader is tested against.
func decodeFile(name string, data []byte, wantKind byte, fn func(c change)) error {
	bad := func(why string) error { return fmt.Errorf("state file %s: %s: %w", name, why, ErrCorrupt) }
	if len(data) < len(fileMagic)+2+4 || string(data[:4]) != fileMagic {
		return bad("not a state file")
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return bad("checksum mismatch")
	}
	if body[4] != fileFormat && body[4] != fileFormatBelow {
		return bad(fmt.Sprintf("unknown format version %d", body[4]))
	}
	if body[5] != wantKind {
		return bad("wrong file kind")
	}
	rangeOK := body[4] == fileFormatBelow && wantKind == kindDelta
	b := body[6:]
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return bad("truncated")
	}
	b = b[k:]
	readBytes := func() ([]byte, bool) {
		l, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < l {
			return nil, false
		}
		v := b[k : k+int(l)]
		b = b[k+int(l):]
		return v, true
	}
	for i := uint64(0); i < n; i++ {
		if len(b) == 0 {
			return bad("truncated")
		}
		op := b[0]
		b = b[1:]
		key, ok := readBytes()
		if !ok {
			return bad("truncated")
		}
		switch op {
		case opPut:
			val, ok := readBytes()
			if !ok {
				return bad("truncated")
			}
			fn(change{key: key, value: val})
		case opDelete:
			fn(change{key: key, del: true})
		case opDeleteBelow:
			if !rangeOK || i != 0 {
				return bad("range deletion out of place")
			}
			fn(change{key: key, below: true})
		default:
			return bad("unknown op")
		}
	}
	if len(b) != 0 {
		return bad("trailing bytes")
	}
	return nil
}

// partPrefix is the key prefix of a partition's files.
func partPrefix(op int, p ids.PartitionID) string { return fmt.Sprintf("state/%d/%d/", op, p) }

// fileName is a state file's name: <v>-<attempt><suffix>, or <v><suffix>
// for attempt "" (the names of format 1, written before files carried the
// attempt that wrote them; still read).
func fileName(v Version, attempt, suffix string) string {
	if attempt == "" {
		return strconv.FormatInt(int64(v), 10) + suffix
	}
	return strconv.FormatInt(int64(v), 10) + "-" + attempt + suffix
}

func deltaKey(op int, p ids.PartitionID, v Version, attempt string) string {
	return partPrefix(op, p) + fileName(v, attempt, deltaSuffix)
}

func snapKey(op int, p ids.PartitionID, v Version, attempt string) string {
	return partPrefix(op, p) + fileName(v, attempt, snapSuffix)
}

// AttemptID is the short id of one attempt of a batch's reduce: the driver
// run, the batch and the map attempts it reads. The driver and the
// executor derive it alike, so the commit can record the attempt whose
// state files make a version without carrying it in the task result.
func AttemptID(runID string, batch ids.BatchID, mapAttempts []uint64) string {
	h := fnv.New64a()
	h.Write([]byte(runID))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(batch))
	h.Write(b[:])
	for _, a := range mapAttempts {
		binary.BigEndian.PutUint64(b[:], a)
		h.Write(b[:])
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// fileSet is what a partition's directory holds: deltas and snaps are the
// files chosen for each version (by the commit records, see
// records.follow, else the only file of the version), all holds every
// file by version and attempt, and ambiguous the versions with deltas (or
// snapshots) of more than one attempt that no record has chosen between.
type fileSet struct {
	deltas        map[Version]string
	snaps         map[Version]string
	allDeltas     map[Version]map[string]string
	allSnaps      map[Version]map[string]string
	ambiguous     map[Version]bool
	ambiguousSnap map[Version]bool
}

// parseName splits <v>[-<attempt>]<suffix>.
func parseName(name, suffix string) (Version, string, bool) {
	if !strings.HasSuffix(name, suffix) {
		return 0, "", false
	}
	name = strings.TrimSuffix(name, suffix)
	vs, attempt, _ := strings.Cut(name, "-")
	v, err := strconv.ParseInt(vs, 10, 64)
	if err != nil {
		return 0, "", false
	}
	return Version(v), attempt, true
}

func parseFiles(keys []string, prefix string) fileSet {
	fs := fileSet{
		deltas: map[Version]string{}, snaps: map[Version]string{},
		allDeltas: map[Version]map[string]string{}, allSnaps: map[Version]map[string]string{},
		ambiguous: map[Version]bool{}, ambiguousSnap: map[Version]bool{},
	}
	add := func(all map[Version]map[string]string, v Version, attempt, k string) {
		if all[v] == nil {
			all[v] = map[string]string{}
		}
		all[v][attempt] = k
	}
	for _, k := range keys {
		name := strings.TrimPrefix(k, prefix)
		if v, a, ok := parseName(name, deltaSuffix); ok {
			add(fs.allDeltas, v, a, k)
		} else if v, a, ok := parseName(name, snapSuffix); ok {
			add(fs.allSnaps, v, a, k)
		}
	}
	pick := func(all map[Version]map[string]string, chosen map[Version]string, ambiguous map[Version]bool) {
		for v, byAttempt := range all {
			if len(byAttempt) == 1 {
				for _, k := range byAttempt {
					chosen[v] = k
				}
				continue
			}
			ambiguous[v] = true
		}
	}
	pick(fs.allDeltas, fs.deltas, fs.ambiguous)
	pick(fs.allSnaps, fs.snaps, fs.ambiguousSnap)
	return fs
}

// attemptOf is the attempt in a state file's key ("" for none).
func attemptOf(key string) string {
	name := key[strings.LastIndexByte(key, '/')+1:]
	if _, a, ok := parseName(name, deltaSuffix); ok {
		return a
	}
	_, a, _ := parseName(name, snapSuffix)
	return a
}

// checkPlan fails when loading version v from base would need a version
// whose files no record chose between: a delta after base, or a snapshot
// after base (which would have been the base).
func (fs fileSet) checkPlan(op int, p ids.PartitionID, base, v Version) error {
	for _, amb := range []map[Version]bool{fs.ambiguous, fs.ambiguousSnap} {
		for u := range amb {
			if u <= base || u > v {
				continue
			}
			return fmt.Errorf("load state partition %d version %d: %s holds files of several attempts for version %d and no commit record says which one committed: %w",
				p, v, partPrefix(op, p), u, ErrCorrupt)
		}
	}
	return nil
}

// plan returns the snapshot version to start from (0: empty) and the
// deltas to apply to reach v. A version with no delta file is one in which
// the batch did not change the partition: no file is written for it.
func (fs fileSet) plan(v Version) (Version, []Version) {
	var base Version
	for s := range fs.snaps {
		if s <= v && s > base {
			base = s
		}
	}
	var deltas []Version
	for d := range fs.deltas {
		if d > base && d <= v {
			deltas = append(deltas, d)
		}
	}
	sort.Slice(deltas, func(i, j int) bool { return deltas[i] < deltas[j] })
	return base, deltas
}

// obsolete returns the files no version >= keep needs: everything before
// the newest snapshot at or below keep.
func (fs fileSet) obsolete(keep Version) []string {
	var base Version
	for s := range fs.snaps {
		if s <= keep && s > base {
			base = s
		}
	}
	if base == 0 {
		return nil
	}
	var out []string
	for v, byAttempt := range fs.allDeltas {
		if v <= base {
			for _, k := range byAttempt {
				out = append(out, k)
			}
		}
	}
	for v, byAttempt := range fs.allSnaps {
		if v < base {
			for _, k := range byAttempt {
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}
