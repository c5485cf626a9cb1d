package console

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/sink"
)

// Defaults as in Spark's console sink (numRows 20, truncate true).
const (
	MaxRows     = 20
	TruncateLen = 20
)

// Writer prints batches as tables. It implements sink.BatchWriter.
type Writer struct {
	cols []query.Column
	mu   sync.Mutex // one batch's table is written whole
	w    io.Writer
}

var _ sink.BatchWriter = (*Writer)(nil)

// New returns a Writer printing to w.
func New(w io.Writer, schema []query.Column) *Writer {
	return &Writer{w: w, cols: slices.Clone(schema)}
}

// WriteBatch prints the batch header and up to MaxRows rows.
func (c *Writer) WriteBatch(ctx context.Context, batchID ids.BatchID, rows []row.Row) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "-------- Batch: %d --------\n", batchID)
	buf.WriteString(Table(c.cols, rows, MaxRows))
	buf.WriteByte('\n')
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("print batch %d: %w", batchID, err)
	}
	return nil
}

// Table renders rows as Spark's Dataset.show does: right-aligned cells,
// columns at least 3 wide, strings over TruncateLen characters truncated,
// and a note when rows beyond limit are left out.
func Table(cols []query.Column, rows []row.Row, limit int) string {
	shown := rows
	if len(shown) > limit {
		shown = shown[:limit]
	}
	cells := make([][]string, 0, len(shown)+1)
	header := make([]string, len(cols))
	for i, c := range cols {
		header[i] = c.Name
	}
	cells = append(cells, header)
	for _, r := range shown {
		line := make([]string, len(cols))
		for i := range cols {
			if i < len(r) {
				line[i] = cell(r[i])
			}
		}
		cells = append(cells, line)
	}
	widths := make([]int, len(cols))
	for i := range widths {
		widths[i] = 3
		for _, line := range cells {
			widths[i] = max(widths[i], utf8.RuneCountInString(line[i]))
		}
	}
	var sb strings.Builder
	sep := func() {
		sb.WriteByte('+')
		for _, w := range widths {
			sb.WriteString(strings.Repeat("-", w))
			sb.WriteByte('+')
		}
		sb.WriteByte('\n')
	}
	printLine := func(line []string) {
		sb.WriteByte('|')
		for i, s := range line {
			sb.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(s)))
			sb.WriteString(s)
			sb.WriteByte('|')
		}
		sb.WriteByte('\n')
	}
	sep()
	printLine(cells[0])
	sep()
	for _, line := range cells[1:] {
		printLine(line)
	}
	sep()
	if len(rows) > limit {
		if limit == 1 {
			sb.WriteString("only showing top 1 row\n")
		} else {
			fmt.Fprintf(&sb, "only showing top %d rows\n", limit)
		}
	}
	return sb.String()
}

func cell(v row.Value) string {
	s := v.String()
	if v.Kind == row.String {
		s = strings.NewReplacer("\n", "\\n", "\r", "\\r", "\t", "\\t").Replace(s)
		if utf8.RuneCountInString(s) > TruncateLen {
			s = string([]rune(s)[:TruncateLen-3]) + "..."
		}
	}
	return s
}
