package monitor

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/sluicehq/sluice/progress"
)

// LinePrinter writes each committed batch's one-line summary
// (progress.Report.Line) to w, one batch at a time when several queries
// share w.
func LinePrinter(w io.Writer) progress.Observer {
	var mu sync.Mutex
	return progress.Committed(func(p *progress.Report) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(w, p.Line())
	})
}

// OpenJSONLog appends each committed batch's report as one JSON object per
// line to path (--progress-json), synced after each line so a reader that
// tails it after a crash finds every batch that reported. An empty path is
// no log: a nil Observer and a no-op close.
func OpenJSONLog(path string) (progress.Observer, func() error, error) {
	if path == "" {
		return nil, func() error { return nil }, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open progress log: %w", err)
	}
	var mu sync.Mutex
	enc := json.NewEncoder(f)
	return progress.Committed(func(p *progress.Report) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(p)
		_ = f.Sync()
	}), f.Close, nil
}
