package monitor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/scheduler"
)

func TestProgressGoesToEveryConsumerAndTheJSONLogAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "progress.jsonl")
	var lines bytes.Buffer
	var seen []int64
	for round := 0; round < 2; round++ {
		jsonLog, closeLog, err := OpenJSONLog(path)
		if err != nil {
			t.Fatal(err)
		}
		f := Fanout(nil, LinePrinter(&lines), jsonLog, func(p *scheduler.Progress) { seen = append(seen, p.BatchID) })
		for b := int64(0); b < 2; b++ {
			f(&scheduler.Progress{Name: "tile", BatchID: int64(round)*2 + b})
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
	var ids []int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var p scheduler.Progress
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		ids = append(ids, p.BatchID)
	}
	if len(ids) != 4 || ids[0] != 0 || ids[3] != 3 {
		t.Fatalf("the log holds batches %v, want 0..3 across a reopen", ids)
	}
	if none, closeNone, err := OpenJSONLog(""); none != nil || err != nil || closeNone() != nil {
		t.Fatal("an empty path is no log")
	}
}
