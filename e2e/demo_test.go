package e2e

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// driver demo runs the whole architecture embedded (broker, feeder, driver,
// two executors over gRPC): windows close and print, SIGINT/SIGTERM stops it
// cleanly, and a second run resumes after the first run's last batch.
func TestDemoRunsEmbeddedClusterAndResumes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	first := NewProc(t, "demo", bins.driver, "demo", "--dir", dir, "--log-level", "warn")
	first.Start()
	first.WaitForLog("window closed: window_start=2026-01-01T00:", 90*time.Second)
	if err := first.Stop(30 * time.Second); err != nil {
		t.Fatalf("demo did not stop cleanly: %v\n%s", err, first.Logs())
	}
	last := lastBatch(first.Logs())
	if last < 0 {
		t.Fatalf("no batch line in the demo's output:\n%s", first.Logs())
	}
	second := NewProc(t, "demo", bins.driver, "demo", "--dir", dir, "--log-level", "warn")
	second.Start()
	second.WaitForLog("batch "+strconv.Itoa(last+2)+":", 90*time.Second)
	if err := second.Stop(30 * time.Second); err != nil {
		t.Fatalf("second demo run did not stop cleanly: %v", err)
	}
	if m := regexp.MustCompile(`(?m)^batch (\d+)`).FindStringSubmatch(second.Logs()); m == nil || m[1] == "0" {
		t.Fatalf("second run started over instead of resuming:\n%s", second.Logs())
	}
}

func lastBatch(logs string) int {
	last := -1
	for _, m := range regexp.MustCompile(`(?m)^batch (\d+)`).FindAllStringSubmatch(logs, -1) {
		n, _ := strconv.Atoi(m[1])
		last = max(last, n)
	}
	return last
}
