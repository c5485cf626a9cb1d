package statestore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
)

// The state file format (file.go) streamed: written from an iterator and
// read from a reader with bounded buffers, so a snapshot larger than memory
// is written and loaded without holding it. The bytes are the same as
// encodeFile's, so files written either way are read either way
// and by both providers.

// maxEntryBytes bounds one key or value read from a file: a larger length
// means the file is corrupt, not that we should allocate it.
const maxEntryBytes = 256 << 20

// streamBufferBytes is the buffer of a streamed read or write.
const streamBufferBytes = 256 << 10

// fileWriter writes a state file entry by entry. The entry count comes
// first in the format, so it is given up front and checked at the end.
type fileWriter struct {
	w     *bufio.Writer
	crc   hash.Hash32
	want  uint64
	n     uint64
	last  []byte
	first bool
	tmp   [binary.MaxVarintLen64]byte
}

func newFileWriter(w io.Writer, kind byte, count uint64) (*fileWriter, error) {
	crc := crc32.New(castagnoli)
	fw := &fileWriter{w: bufio.NewWriterSize(io.MultiWriter(w, crc), streamBufferBytes), crc: crc, want: count, first: true}
	fw.w.WriteString(fileMagic)
	fw.w.Write([]byte{fileFormat, kind})
	fw.uvarint(count)
	return fw, nil
}

func (fw *fileWriter) uvarint(v uint64) {
	n := binary.PutUvarint(fw.tmp[:], v)
	fw.w.Write(fw.tmp[:n])
}

// put writes one entry; keys must come in strictly ascending order (the
// format is sorted, which is what makes its bytes deterministic).
func (fw *fileWriter) put(c change) error {
	if !fw.first && string(c.key) <= string(fw.last) {
		return fmt.Errorf("state file entries out of order: %q after %q", c.key, fw.last)
	}
	fw.first = false
	fw.last = append(fw.last[:0], c.key...)
	fw.n++
	if c.del {
		fw.w.WriteByte(opDelete)
		fw.uvarint(uint64(len(c.key)))
		_, err := fw.w.Write(c.key)
		return err
	}
	fw.w.WriteByte(opPut)
	fw.uvarint(uint64(len(c.key)))
	fw.w.Write(c.key)
	fw.uvarint(uint64(len(c.value)))
	_, err := fw.w.Write(c.value)
	return err
}

// close checks the count and writes the checksum trailer.
func (fw *fileWriter) close() error {
	if fw.n != fw.want {
		return fmt.Errorf("state file: %d entries written, %d announced", fw.n, fw.want)
	}
	if err := fw.w.Flush(); err != nil {
		return err
	}
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], fw.crc.Sum32())
	fw.w.Write(sum[:])
	return fw.w.Flush()
}

// tailHasher checksums every byte read through it except the last four
// seen so far, which it keeps: once the reader is at EOF, the checksum
// covers the file's body and the kept bytes are its trailer. It hashes in
// chunks, as the bytes are read, and remembers a read error other than
// EOF (to tell a failed read from a corrupt file).
type tailHasher struct {
	r    io.Reader
	crc  hash.Hash32
	tail [4]byte
	nt   int
	err  error
}

func (t *tailHasher) Read(b []byte) (int, error) {
	n, err := t.r.Read(b)
	if err != nil && !errors.Is(err, io.EOF) {
		t.err = err
	}
	if n == 0 {
		return n, err
	}
	total := t.nt + n
	if total <= len(t.tail) {
		copy(t.tail[t.nt:], b[:n])
		t.nt = total
		return n, err
	}
	h := total - len(t.tail) // bytes now known not to be the trailer
	var next [4]byte
	if h <= t.nt {
		t.crc.Write(t.tail[:h])
		k := copy(next[:], t.tail[h:t.nt])
		copy(next[k:], b[:n])
	} else {
		t.crc.Write(t.tail[:t.nt])
		t.crc.Write(b[:h-t.nt])
		copy(next[:], b[h-t.nt:n])
	}
	t.tail, t.nt = next, len(t.tail)
	return n, err
}

// decodeStream reads a state file from r, calling fn for each entry; the
// slices in the change are valid only during the call. It returns the
// file's checksum. Entries are passed before the checksum is checked (it
// is the last four bytes): a caller applies them to something it discards
// when decodeStream fails.
func decodeStream(name string, r io.Reader, wantKind byte, fn func(c change) error) (uint32, error) {
	bad := func(why string) error { return fmt.Errorf("state file %s: %s: %w", name, why, ErrCorrupt) }
	src := &tailHasher{r: r, crc: crc32.New(castagnoli)}
	readErr := func(err error) error {
		if src.err != nil {
			return fmt.Errorf("read state file %s: %w", name, src.err)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return bad("truncated")
		}
		return bad(err.Error())
	}
	br := bufio.NewReaderSize(src, streamBufferBytes)
	var head [6]byte
	if _, err := io.ReadFull(br, head[:]); err != nil {
		if src.err == nil {
			return 0, bad("not a state file")
		}
		return 0, readErr(err)
	}
	if string(head[:4]) != fileMagic {
		return 0, bad("not a state file")
	}
	if head[4] != fileFormat && head[4] != fileFormatBelow {
		return 0, bad(fmt.Sprintf("unknown format version %d", head[4]))
	}
	if head[5] != wantKind {
		return 0, bad("wrong file kind")
	}
	rangeOK := head[4] == fileFormatBelow && wantKind == kindDelta
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return 0, readErr(err)
	}
	var key, val []byte
	readBytes := func(dst []byte) ([]byte, error) {
		l, err := binary.ReadUvarint(br)
		if err != nil {
			return nil, readErr(err)
		}
		if l > maxEntryBytes {
			return nil, bad(fmt.Sprintf("entry of %d bytes", l))
		}
		if uint64(cap(dst)) < l {
			dst = make([]byte, l)
		}
		dst = dst[:l]
		if _, err := io.ReadFull(br, dst); err != nil {
			return nil, readErr(err)
		}
		return dst, nil
	}
	for i := uint64(0); i < n; i++ {
		op, err := br.ReadByte()
		if err != nil {
			return 0, readErr(err)
		}
		if key, err = readBytes(key); err != nil {
			return 0, err
		}
		switch op {
		case opPut:
			if val, err = readBytes(val); err != nil {
				return 0, err
			}
			if err := fn(change{key: key, value: val}); err != nil {
				return 0, err
			}
		case opDelete:
			if err := fn(change{key: key, del: true}); err != nil {
				return 0, err
			}
		case opDeleteBelow:
			if !rangeOK || i != 0 {
				return 0, bad("range deletion out of place")
			}
			if err := fn(change{key: key, below: true}); err != nil {
				return 0, err
			}
		default:
			return 0, bad("unknown op")
		}
	}
	var trailer [4]byte
	if _, err := io.ReadFull(br, trailer[:]); err != nil {
		return 0, readErr(err)
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		if err != nil {
			return 0, readErr(err)
		}
		return 0, bad("trailing bytes")
	}
	// At EOF: the hasher has checksummed everything but the trailer.
	sum := src.crc.Sum32()
	if src.nt != len(src.tail) || src.tail != trailer || binary.BigEndian.Uint32(trailer[:]) != sum {
		return 0, bad("checksum mismatch")
	}
	return sum, nil
}
