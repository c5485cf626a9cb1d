package wire

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/sluicehq/sluice/agg"
	"github.com/sluicehq/sluice/row"
)

// Encoding of a chunk of partials: per group, uvarint key length, key,
// uvarint accumulator length, accumulators (agg.Layout.AppendAccs).
// A chunk of rows: per row, uvarint column count, then per value a kind
// byte and its payload (varint for long, int, date, timestamp and
// boolean; 8 bytes big-endian for double; uvarint length and bytes for
// string; for a decimal its scale byte, then 0 and the unscaled integer as
// a varint, or 1 and its base-10 digits as a string when they do not fit
// an int64; nothing for null). Chunks always end on a record boundary.

// DefaultChunkBytes is the target size of one pushed chunk.
const DefaultChunkBytes = 256 << 10

// AppendEntry appends one encoded partial to b.
func AppendEntry(b []byte, l *agg.Layout, e agg.Entry, scratch []byte) (out, scratchOut []byte) {
	scratch = l.AppendAccs(scratch[:0], e.Accs)
	b = binary.AppendUvarint(b, uint64(len(e.Key)))
	b = append(b, e.Key...)
	b = binary.AppendUvarint(b, uint64(len(scratch)))
	b = append(b, scratch...)
	return b, scratch
}

// DecodeEntries appends the partials of one chunk to dst.
func DecodeEntries(l *agg.Layout, data []byte, dst []agg.Entry) ([]agg.Entry, error) {
	nm := len(l.Measures)
	for len(data) > 0 {
		key, rest, err := readBytes(data)
		if err != nil {
			return nil, fmt.Errorf("decode partial key: %w", err)
		}
		accs, rest, err := readBytes(rest)
		if err != nil {
			return nil, fmt.Errorf("decode partial of key %x: %w", key, err)
		}
		e := agg.Entry{Key: string(key), Accs: make([]agg.Acc, nm)}
		if err := l.DecodeAccs(accs, e.Accs); err != nil {
			return nil, fmt.Errorf("decode partial of key %x: %w", key, err)
		}
		dst = append(dst, e)
		data = rest
	}
	return dst, nil
}

// AppendRow appends one encoded row to b.
func AppendRow(b []byte, r row.Row) []byte {
	b = binary.AppendUvarint(b, uint64(len(r)))
	for _, v := range r {
		b = append(b, byte(v.Kind))
		switch v.Kind {
		case row.Null:
		case row.Long, row.Timestamp, row.Bool, row.Int, row.Date:
			b = binary.AppendVarint(b, v.I)
		case row.Double:
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(v.F))
		case row.String:
			b = binary.AppendUvarint(b, uint64(len(v.S)))
			b = append(b, v.S...)
		case row.Decimal:
			b = append(b, v.Scale)
			if v.S == "" {
				b = binary.AppendVarint(append(b, 0), v.I)
			} else {
				b = binary.AppendUvarint(append(b, 1), uint64(len(v.S)))
				b = append(b, v.S...)
			}
		default:
			panic(fmt.Sprintf("shuffle: cannot encode value kind %v", v.Kind))
		}
	}
	return b
}

// DecodeRows appends the rows of one chunk to dst.
func DecodeRows(data []byte, dst []row.Row) ([]row.Row, error) {
	for len(data) > 0 {
		n, k := binary.Uvarint(data)
		if k <= 0 || n > uint64(len(data)) {
			return nil, fmt.Errorf("decode row: bad column count")
		}
		data = data[k:]
		r := make(row.Row, n)
		for i := range r {
			if len(data) == 0 {
				return nil, fmt.Errorf("decode row: truncated at column %d", i)
			}
			kind := row.Kind(data[0])
			data = data[1:]
			v := row.Value{Kind: kind}
			switch kind {
			case row.Null:
			case row.Long, row.Timestamp, row.Bool, row.Int, row.Date:
				x, k := binary.Varint(data)
				if k <= 0 {
					return nil, fmt.Errorf("decode row: truncated %v at column %d", kind, i)
				}
				v.I, data = x, data[k:]
			case row.Double:
				if len(data) < 8 {
					return nil, fmt.Errorf("decode row: truncated double at column %d", i)
				}
				v.F, data = math.Float64frombits(binary.BigEndian.Uint64(data)), data[8:]
			case row.String:
				s, rest, err := readBytes(data)
				if err != nil {
					return nil, fmt.Errorf("decode row: string at column %d: %w", i, err)
				}
				v.S, data = string(s), rest
			case row.Decimal:
				if len(data) < 2 {
					return nil, fmt.Errorf("decode row: truncated decimal at column %d", i)
				}
				v.Scale = data[0]
				big := data[1] == 1
				data = data[2:]
				if !big {
					x, k := binary.Varint(data)
					if k <= 0 {
						return nil, fmt.Errorf("decode row: truncated decimal at column %d", i)
					}
					v.I, data = x, data[k:]
					break
				}
				s, rest, err := readBytes(data)
				if err != nil {
					return nil, fmt.Errorf("decode row: decimal at column %d: %w", i, err)
				}
				v.S, data = string(s), rest
			default:
				return nil, fmt.Errorf("decode row: unknown value kind %d at column %d", kind, i)
			}
			r[i] = v
		}
		dst = append(dst, r)
	}
	return dst, nil
}

func readBytes(b []byte) ([]byte, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, fmt.Errorf("truncated")
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

// Chunker cuts a stream of encoded records into chunks of about a target
// size, always on record boundaries.
type Chunker struct {
	target int
	buf    []byte
	flush  func([]byte) error
}

// NewChunker returns a chunker that hands each full chunk to flush; flush
// owns the slice (the chunker starts a new one).
func NewChunker(target int, flush func([]byte) error) *Chunker {
	if target <= 0 {
		target = DefaultChunkBytes
	}
	return &Chunker{target: target, flush: flush}
}

// Buf returns the pending chunk to append one record to; after appending,
// call Done with the result.
func (c *Chunker) Buf() []byte { return c.buf }

// Done stores the chunk with a record appended, flushing it when it
// reached the target size.
func (c *Chunker) Done(b []byte) error {
	c.buf = b
	if len(c.buf) >= c.target {
		return c.Flush()
	}
	return nil
}

// Flush hands over the pending chunk, if any.
func (c *Chunker) Flush() error {
	if len(c.buf) == 0 {
		return nil
	}
	err := c.flush(c.buf)
	// The next chunk grows by append: partials of one partition from one
	// map task are often a few hundred bytes, far below the target.
	c.buf = nil
	return err
}

// DecodePartials decodes the chunks Buffer.Wait returned (by map index)
// into partials by map index, as agg.Layout.Reduce takes them.
func DecodePartials(l *agg.Layout, byMap [][][]byte) ([][]agg.Entry, error) {
	out := make([][]agg.Entry, len(byMap))
	for m, chunks := range byMap {
		var err error
		for _, c := range chunks {
			if out[m], err = DecodeEntries(l, c, out[m]); err != nil {
				return nil, fmt.Errorf("partials of map task %d: %w", m, err)
			}
		}
	}
	return out, nil
}

// DecodeRowsByMap decodes the chunks Buffer.Wait returned (by map index)
// into rows by map index.
func DecodeRowsByMap(byMap [][][]byte) ([][]row.Row, error) {
	out := make([][]row.Row, len(byMap))
	for m, chunks := range byMap {
		var err error
		for _, c := range chunks {
			if out[m], err = DecodeRows(c, out[m]); err != nil {
				return nil, fmt.Errorf("rows of map task %d: %w", m, err)
			}
		}
	}
	return out, nil
}
