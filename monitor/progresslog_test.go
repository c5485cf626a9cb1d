package monitor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/progress"
)

func TestProgressGoesToEveryConsumerAndTheJSONLogAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "progress.jsonl")
	var lines bytes.Buffer
	var seen []ids.BatchID
	for round := 0; round < 2; round++ {
		jsonLog, closeLog, err := OpenJSONLog(path)
		if err != nil {
			t.Fatal(err)
		}
		obs := progress.Observers{nil, LinePrinter(&lines), jsonLog, progress.Committed(func(p *progress.Report) { seen = append(seen, p.BatchID) })}
		for b := ids.BatchID(0); b < 2; b++ {
			obs.BatchStarted(ids.BatchID(round)*2 + b) // only committed batches are printed and logged
			obs.Committed(&progress.Report{Name: "tile", BatchID: ids.BatchID(round)*2 + b})
		}
		if err := closeLog(); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 4 || seen[3] != 3 {
		t.Fatalf("the last consumer saw %v", seen)
	}
	if got := strings.Count(lines.String(), "\n"); got != 4 {
		t.Fatalf("%d lines printed, want 4:\n%s", got, lines.String())
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var batches []ids.BatchID
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var p progress.Report
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		batches = append(batches, p.BatchID)
	}
	if len(batches) != 4 || batches[0] != 0 || batches[3] != 3 {
		t.Fatalf("the log holds batches %v, want 0..3 across a reopen", batches)
	}
	if none, closeNone, err := OpenJSONLog(""); none != nil || err != nil || closeNone() != nil {
		t.Fatal("an empty path is no log")
	}
}
