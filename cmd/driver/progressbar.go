package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/progress"
)

// offsetPosition reads a source offset as one number: the sum over
// partitions of a Kafka offset ({"topic":{"0":42}}) or the generator's row
// ({"row":N}). Other shapes (the file source's) have no such number.
func offsetPosition(raw json.RawMessage) (int64, bool) {
	if len(raw) == 0 {
		return 0, false
	}
	var kafka map[string]map[string]int64
	if err := json.Unmarshal(raw, &kafka); err == nil && len(kafka) > 0 {
		var sum int64
		for _, parts := range kafka {
			for _, off := range parts {
				sum += off
			}
		}
		return sum, true
	}
	var gen struct {
		Row *int64 `json:"row"`
	}
	if err := json.Unmarshal(raw, &gen); err == nil && gen.Row != nil {
		return *gen.Row, true
	}
	return 0, false
}

// drainBar follows an availableNow run: offsets done of offsets to do (the
// offsets the run found at its start), rows per second and the time left.
// It is pure: progress and the time in, a line out.
type drainBar struct {
	began    time.Time
	rows     int64
	from     int64 // position before the run's first batch
	fromOK   bool
	done     int64 // offsets read so far
	total    int64 // offsets to read
	measured bool  // done and total are known
}

// observe folds in one batch's progress at now.
func (b *drainBar) observe(p *progress.Report, now time.Time) {
	if b.began.IsZero() {
		b.began = now
		if t, err := time.Parse(time.RFC3339Nano, p.Timestamp); err == nil && t.Before(now) {
			b.began = t
		}
	}
	b.rows += p.NumInputRows
	if len(p.Sources) == 0 {
		return
	}
	s := p.Sources[0]
	if !b.fromOK {
		b.from, b.fromOK = offsetPosition(s.StartOffset)
	}
	end, okEnd := offsetPosition(s.EndOffset)
	latest, okLatest := offsetPosition(s.LatestOffset)
	if b.fromOK && okEnd && okLatest && latest >= b.from {
		b.done, b.total, b.measured = end-b.from, latest-b.from, true
	}
}

// line renders the bar at now, width characters of bar.
func (b *drainBar) line(now time.Time, width int) string {
	elapsed := now.Sub(b.began).Seconds()
	rate := 0.0
	if elapsed > 0 {
		rate = float64(b.rows) / elapsed
	}
	if !b.measured || b.total <= 0 {
		return fmt.Sprintf("%d rows, %s rows/s", b.rows, humanCount(rate))
	}
	frac := min(float64(b.done)/float64(b.total), 1)
	filled := int(frac * float64(width))
	bar := strings.Repeat("=", filled) + strings.Repeat(" ", width-filled)
	eta := "-"
	if b.done > 0 && elapsed > 0 && b.done < b.total {
		left := time.Duration(float64(b.total-b.done) / (float64(b.done) / elapsed) * float64(time.Second))
		eta = left.Round(time.Second).String()
	} else if b.done >= b.total {
		eta = "0s"
	}
	return fmt.Sprintf("[%s] %3.0f%% %d/%d offsets, %s rows/s, ETA %s", bar, 100*frac, b.done, b.total, humanCount(rate), eta)
}

func humanCount(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// barPrinter prints each batch's line above a progress bar that it redraws
// in place (a terminal only).
type barPrinter struct {
	w   io.Writer
	bar drainBar
	now func() time.Time
}

func (b *barPrinter) print(p *progress.Report) {
	now := b.now()
	b.bar.observe(p, now)
	fmt.Fprintf(b.w, "\r\033[K%s\n%s", p.Line(), b.bar.line(now, 30))
}

// finish ends the bar's line.
func (b *barPrinter) finish() {
	if !b.bar.began.IsZero() {
		fmt.Fprintln(b.w)
	}
}
