package statestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sort"
	"strconv"
	"strings"
)

const (
	fileMagic   = "SLST"
	fileFormat  = 1
	kindDelta   = 1
	kindSnap    = 2
	opPut       = 1
	opDelete    = 2
	deltaSuffix = ".delta"
	snapSuffix  = ".snapshot"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// change is one entry of a delta or snapshot; del marks a deletion.
type change struct {
	key, value []byte
	del        bool
}

// encodeFile encodes changes sorted by key, so the bytes are deterministic.
func encodeFile(kind byte, changes []change) []byte {
	sort.Slice(changes, func(i, j int) bool { return bytes.Compare(changes[i].key, changes[j].key) < 0 })
	b := make([]byte, 0, 64+len(changes)*32)
	b = append(b, fileMagic...)
	b = append(b, fileFormat, kind)
	b = binary.AppendUvarint(b, uint64(len(changes)))
	for _, c := range changes {
		if c.del {
			b = append(b, opDelete)
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
	if body[4] != fileFormat {
		return bad(fmt.Sprintf("unknown format version %d", body[4]))
	}
	if body[5] != wantKind {
		return bad("wrong file kind")
	}
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
func partPrefix(op, p int) string { return fmt.Sprintf("state/%d/%d/", op, p) }

func deltaKey(op, p int, v Version) string {
	return partPrefix(op, p) + strconv.FormatInt(int64(v), 10) + deltaSuffix
}

func snapKey(op, p int, v Version) string {
	return partPrefix(op, p) + strconv.FormatInt(int64(v), 10) + snapSuffix
}

// fileSet is what a partition's directory holds.
type fileSet struct {
	deltas map[Version]string
	snaps  map[Version]string
}

func parseFiles(keys []string, prefix string) fileSet {
	fs := fileSet{deltas: map[Version]string{}, snaps: map[Version]string{}}
	for _, k := range keys {
		name := strings.TrimPrefix(k, prefix)
		switch {
		case strings.HasSuffix(name, deltaSuffix):
			if v, err := strconv.ParseInt(strings.TrimSuffix(name, deltaSuffix), 10, 64); err == nil {
				fs.deltas[Version(v)] = k
			}
		case strings.HasSuffix(name, snapSuffix):
			if v, err := strconv.ParseInt(strings.TrimSuffix(name, snapSuffix), 10, 64); err == nil {
				fs.snaps[Version(v)] = k
			}
		}
	}
	return fs
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
	for v, k := range fs.deltas {
		if v <= base {
			out = append(out, k)
		}
	}
	for v, k := range fs.snaps {
		if v < base {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
