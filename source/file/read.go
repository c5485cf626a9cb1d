package file

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/source"
)

// Read calls fn for every non-empty line of the split, with Part the file
// name and Offset the 1-based line number. Lines end with "\n" or "\r\n";
// the last line needs no newline; blank lines are skipped.
//
// A byte-range split (byteRange) reads the lines that start in its range.
// One that starts past the file's first byte does not know how many lines
// come before it, so its records' Offset is the line's byte offset in the
// file; ResolveOffsets turns those into line numbers (a map task calls it
// for the records it sets aside, so only a split with bad records reads
// the file before its range).
//
// The file is streamed (objstore.GetReader, objstore.GetRangeReader) and
// decoded as it arrives: Read holds a ReadBufferBytes buffer, plus the
// current line when it is longer, never the whole file. A line longer than
// MaxLineBytes is an error naming the file and the line.
func (s *Source) Read(ctx context.Context, split source.Split, fn func(*source.Record) error) error {
	d, err := parseSplit(split)
	if err != nil {
		return err
	}
	if r := d.Range; r != nil {
		rc := &rangeStream{ctx: ctx, store: s.store, file: r.File, off: r.From, to: r.To}
		defer rc.Close()
		return readLines(ctx, rc, r.File, r, fn)
	}
	rc, err := objstore.GetReader(ctx, s.store, d.File)
	if err != nil {
		return fmt.Errorf("read file source file %s in %s: %w", d.File, s.opts.Path, err)
	}
	defer rc.Close()
	return readLines(ctx, rc, d.File, nil, fn)
}

func parseSplit(split source.Split) (splitDesc, error) {
	var d splitDesc
	err := json.Unmarshal(split.Desc, &d)
	if r := d.Range; err != nil || (d.File == "") == (r == nil) || r != nil && (r.File == "" || r.From < 0 || r.To != 0 && r.To <= r.From) {
		return splitDesc{}, fmt.Errorf("read file source split %s: bad description %s", split.ID, split.Desc)
	}
	return d, nil
}

// ResolveOffsets turns the Offsets Read gave records of split into line
// numbers: the byte offsets of a byte-range split that starts past the
// file's first byte (by counting the newlines before each, streaming the
// file up to the last one); other splits' Offsets are line numbers
// already.
func (s *Source) ResolveOffsets(ctx context.Context, split source.Split, offsets []int64) error {
	d, err := parseSplit(split)
	if err != nil {
		return err
	}
	if d.Range == nil || d.Range.From == 0 || len(offsets) == 0 {
		return nil
	}
	file := d.Range.File
	order := make([]int, len(offsets))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return int(offsets[a] - offsets[b]) })
	last := offsets[order[len(order)-1]]
	rc, err := objstore.GetRangeReader(ctx, s.store, file, 0, last)
	if err != nil {
		return fmt.Errorf("find line numbers in file source file %s: %w", file, err)
	}
	defer rc.Close()
	buf := make([]byte, ReadBufferBytes)
	var pos, lines int64 // bytes read, newlines among them
	next := 0
	for {
		// An offset at or before pos has every newline before it counted.
		for next < len(order) && offsets[order[next]] <= pos {
			offsets[order[next]] = lines + 1
			next++
		}
		if next == len(order) {
			return nil
		}
		n, err := rc.Read(buf)
		chunk := buf[:n]
		for next < len(order) && offsets[order[next]] <= pos+int64(n) {
			i := order[next]
			offsets[i] = lines + int64(bytes.Count(chunk[:offsets[i]-pos], []byte{'\n'})) + 1
			next++
		}
		lines += int64(bytes.Count(chunk, []byte{'\n'}))
		pos += int64(n)
		if errors.Is(err, io.EOF) && next < len(order) {
			err = io.ErrUnexpectedEOF
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("find line numbers in file source file %s: read %d bytes of %d: %w", file, pos, last, err)
		}
	}
}

// ReadBufferBytes is the read buffer of one file being read.
const ReadBufferBytes = 256 << 10

// MaxLineBytes bounds one line of a source file: a longer line fails the
// read rather than growing a buffer without bound.
const MaxLineBytes = 64 << 20

// readLines streams r's lines to fn (see Read): every line, or with rng the
// lines that start in its range, r then starting at byte rng.From.
func readLines(ctx context.Context, r io.Reader, file string, rng *byteRange, fn func(*source.Record) error) error {
	br := bufio.NewReaderSize(r, ReadBufferBytes)
	rec := source.Record{Part: file}
	var long []byte // a line longer than the buffer, gathered
	var line int64  // lines read (whole files and ranges from byte 0)
	var pos int64   // the byte offset of the line being read
	// where names the line being read in an error.
	where := func() string { return fmt.Sprintf("line %d", line+1) }
	byOffset := rng != nil && rng.From > 0
	if rng != nil {
		pos = rng.From
	}
	if byOffset {
		where = func() string { return fmt.Sprintf("the line at byte %d", pos) }
		// Skip through the first newline at or past From: the line it
		// ends started before the range and belongs to the one before.
		for {
			frag, err := br.ReadSlice('\n')
			pos += int64(len(frag))
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("read file source file %s from byte %d: %w", file, rng.From, err)
			}
			break
		}
	}
	for {
		if rng != nil && rng.To > 0 && pos > rng.To {
			return nil // the next line starts in the next range
		}
		frag, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(frag) > MaxLineBytes {
				return fmt.Errorf("read file source file %s: %s is longer than %d bytes", file, where(), MaxLineBytes)
			}
			long = append(long, frag...)
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read file source file %s at %s: %w", file, where(), err)
		}
		l := frag
		if len(long) > 0 {
			if len(long)+len(frag) > MaxLineBytes {
				return fmt.Errorf("read file source file %s: %s is longer than %d bytes", file, where(), MaxLineBytes)
			}
			long = append(long, frag...)
			l, long = long, long[:0]
		}
		if len(l) == 0 && err != nil {
			return nil // end of file after a newline
		}
		line++
		start := pos
		pos += int64(len(l))
		l = bytes.TrimSuffix(l, []byte("\n"))
		l = bytes.TrimRight(l, "\r")
		if len(bytes.TrimSpace(l)) > 0 {
			if line%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("read file source file %s: %w", file, err)
				}
			}
			rec.Value = l
			rec.Offset = line
			if byOffset {
				rec.Offset = start
			}
			if err := fn(&rec); err != nil {
				return err
			}
		}
		if err != nil {
			return nil // io.EOF: the last line had no newline
		}
	}
}

// rangeSlack is how far past a range's end its first read asks for: the
// line crossing the end is usually within it; a longer one is read on
// from there.
const rangeSlack = 64 << 10

// rangeStream reads file from off: first up to the range's end plus
// rangeSlack (a ranged GET on S3 need not fetch the rest of the file), then,
// only if the reader wants more, on to the end of the file.
type rangeStream struct {
	ctx   context.Context
	store objstore.Store
	file  string
	off   int64 // the next byte
	rc    io.ReadCloser
	left  int64 // bytes rc may still give; -1: to the end of the file
	to    int64 // the first read's end (0: the end of the file)
	opens int
}

func (r *rangeStream) Read(b []byte) (int, error) {
	for {
		if r.rc == nil {
			n := int64(-1)
			if r.opens == 0 && r.to > 0 {
				n = r.to - r.off + rangeSlack
			}
			rc, err := objstore.GetRangeReader(r.ctx, r.store, r.file, r.off, n)
			if err != nil {
				return 0, fmt.Errorf("read file source file %s from byte %d: %w", r.file, r.off, err)
			}
			r.rc, r.left = rc, n
			r.opens++
		}
		n, err := r.rc.Read(b)
		r.off += int64(n)
		if r.left >= 0 {
			r.left -= int64(n)
		}
		if errors.Is(err, io.EOF) && r.left == 0 {
			// The first read ended where it was asked to, not at the
			// end of the file: go on from here.
			r.rc.Close()
			r.rc, err = nil, nil
			if n == 0 {
				continue
			}
		}
		return n, err
	}
}

func (r *rangeStream) Close() error {
	if r.rc == nil {
		return nil
	}
	err := r.rc.Close()
	r.rc = nil
	return err
}
