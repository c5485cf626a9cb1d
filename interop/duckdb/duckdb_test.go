package duckdb

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/query"
)

// DuckDB polls the Parquet sink directory with read_parquet over
// DIR/**/*.parquet (a glob that also reads names starting with '_' or '.')
// while `driver run` is SIGKILLed at random moments and restarted on the
// same checkpoint, with input files arriving: every snapshot DuckDB takes
// holds only windows of the oracle (append mode emits final windows), each
// at most once, and the last one is the oracle.
func TestDuckDBSeesOnlyCommittedWindowsWhileTheDriverIsKilled(t *testing.T) {
	dir := t.TempDir()
	driver := filepath.Join(dir, "driver")
	// Built in the product's own module, as it ships (no cgo).
	build := exec.Command("go", "build", "-o", driver, "./cmd/driver")
	build.Dir = filepath.Join("..", "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build driver: %v\n%s", err, out)
	}
	in, out, cp := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "cp")
	events := tiletest.Events(7, 6000, 500*time.Millisecond, time.Minute, 5)
	want := tiletest.Oracle(events, 5*time.Minute, 10*time.Minute)
	const perFile = 100
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := tiletest.Spec(in, out, cp)
	spec.Source.File.MaxFilesPerTrigger = 3
	spec.Trigger = query.Trigger{ProcessingTime: query.Duration(100 * time.Millisecond)}
	specPath := writeSpec(t, dir, "spec.json", spec)
	spec.Trigger = query.Trigger{AvailableNow: true}
	drainPath := writeSpec(t, dir, "drain.json", spec)

	// Input arrives, a file every 50 ms.
	var feed sync.WaitGroup
	feed.Add(1)
	go func() {
		defer feed.Done()
		for f := 0; f*perFile < len(events); f++ {
			var b strings.Builder
			for _, e := range events[f*perFile : min(len(events), (f+1)*perFile)] {
				b.WriteString(e.JSON() + "\n")
			}
			tmp := filepath.Join(in, fmt.Sprintf(".tmp-%05d", f))
			if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
				panic(err)
			}
			if err := os.Rename(tmp, filepath.Join(in, fmt.Sprintf("part-%05d.jsonl", f))); err != nil {
				panic(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	glob := filepath.ToSlash(filepath.Join(out, "**", "*.parquet"))
	snapshot := func() ([]tiletest.Window, error) {
		rows, err := db.QueryContext(context.Background(), "SELECT window_start, course_id, event_count FROM read_parquet('"+glob+"')")
		if err != nil {
			if strings.Contains(err.Error(), "No files found") {
				return nil, nil
			}
			return nil, err
		}
		defer rows.Close()
		var ws []tiletest.Window
		for rows.Next() {
			var w tiletest.Window
			if err := rows.Scan(&w.Start, &w.Course, &w.Count); err != nil {
				return nil, err
			}
			w.Start = w.Start.UTC()
			ws = append(ws, w)
		}
		return ws, rows.Err()
	}
	wantBy := map[string]int64{}
	for _, w := range want {
		wantBy[w.Start.Format(time.RFC3339)+" "+w.Course] = w.Count
	}
	var mu sync.Mutex
	var violations []string
	snapshots, nonEmpty := 0, 0
	stop := make(chan struct{})
	var poll sync.WaitGroup
	poll.Add(1)
	go func() {
		defer poll.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			ws, err := snapshot()
			mu.Lock()
			snapshots++
			if len(ws) > 0 {
				nonEmpty++
			}
			if err != nil {
				violations = append(violations, "query: "+err.Error())
			}
			seen := map[string]bool{}
			for _, w := range ws {
				k := w.Start.Format(time.RFC3339) + " " + w.Course
				n, ok := wantBy[k]
				switch {
				case seen[k]:
					violations = append(violations, "twice: "+w.String())
				case !ok || n != w.Count:
					violations = append(violations, "not the oracle's: "+w.String())
				}
				seen[k] = true
			}
			mu.Unlock()
		}
	}()

	rng := rand.New(rand.NewPCG(7, 12))
	kills := 0
	for i := 0; i < 5; i++ {
		cmd := exec.Command(driver, "run", "-f", specPath)
		cmd.Dir = dir
		logf, _ := os.Create(filepath.Join(dir, fmt.Sprintf("run-%d.log", i)))
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond) // spacing the kills
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		logf.Close()
		kills++
	}
	feed.Wait()
	drain := exec.Command(driver, "run", "-f", drainPath)
	drain.Dir = dir
	if out, err := drain.CombinedOutput(); err != nil {
		t.Fatalf("the draining run failed: %v\n%s", err, out)
	}
	close(stop)
	poll.Wait()
	final, err := snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if d := tiletest.Diff(want, final); d != "" {
		t.Fatalf("DuckDB's final snapshot differs from the oracle:\n%s", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(violations) > 0 {
		t.Fatalf("%d violations in %d snapshots, e.g. %v", len(violations), snapshots, violations[:min(10, len(violations))])
	}
	if nonEmpty == 0 {
		t.Fatal("DuckDB never saw a committed window while the query ran: the test checked nothing")
	}
	t.Logf("DuckDB: %d snapshots (%d with windows) over %d driver kills, each only committed windows, each once; final = oracle (%d windows)", snapshots, nonEmpty, kills, len(want))
}

func writeSpec(t *testing.T, dir, name string, spec query.Spec) string {
	t.Helper()
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
