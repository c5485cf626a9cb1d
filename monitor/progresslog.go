package monitor

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/sluicehq/sluice/progress"
)

// ProgressFunc receives one batch's progress (engine.Options.Progress).
type ProgressFunc = func(*progress.Report)

// Fanout calls each non-nil f in order with every progress.
func Fanout(fs ...ProgressFunc) ProgressFunc {
	var live []ProgressFunc
	for _, f := range fs {
		if f != nil {
			live = append(live, f)
		}
	}
	return func(p *progress.Report) {
		for _, f := range live {
			f(p)
		}
	}
}

// LinePrinter writes each batch's one-line summary (Progress.Line) to w,
// one batch at a time when several queries share w.
func LinePrinter(w io.Writer) ProgressFunc {
	var mu sync.Mutex
	return func(p *progress.Report) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(w, p.Line())
	}
}

// OpenJSONLog appends each progress as one JSON object per line to path
// (--progress-json), synced after each line so a reader that tails it
// after a crash finds every batch that reported. An empty path is no log:
// a nil ProgressFunc and a no-op close.
func OpenJSONLog(path string) (ProgressFunc, func() error, error) {
	if path == "" {
		return nil, func() error { return nil }, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open progress log: %w", err)
	}
	var mu sync.Mutex
	enc := json.NewEncoder(f)
	return func(p *progress.Report) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(p)
		_ = f.Sync()
	}, f.Close, nil
}
