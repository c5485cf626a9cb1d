package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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

var (
	demoPageInBanner = regexp.MustCompile(`demo: status page (http://127\.0\.0\.1:\d+/) `)
	rateInDOM        = regexp.MustCompile(`<dd class="rate-(in|proc)">([^<]*)</dd>`)
)

// driver demo serves the status page on loopback and prints its URL in the
// banner; loaded in headless Chromium after data has flowed, the page
// shows the demo's query running on 2 executors with non-zero input and
// processing rates, and loads nothing from off the machine.
func TestDemoServesItsStatusPageWithRates(t *testing.T) {
	b := &browser{t: t, bin: chromiumPath(t)}
	demo := NewProc(t, "demo", bins.driver, "demo", "--dir", filepath.Join(t.TempDir(), "demo"), "--log-level", "warn")
	demo.Start()
	demo.WaitForLog("demo: status page http://", 90*time.Second)
	m := demoPageInBanner.FindStringSubmatch(demo.Logs())
	if m == nil {
		t.Fatalf("the banner has no status page URL on loopback:\n%s", demo.Logs())
	}
	url := m[1]
	demo.WaitForLog("batch 3:", 90*time.Second)

	dom := b.run(url, "--dump-dom")
	for _, want := range []string{"course-activity-tile", "RUNNING", "2 executors", "Recent batches", "Batch duration by phase (s)"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the demo's page lacks %q", want)
		}
	}
	rates := rateInDOM.FindAllStringSubmatch(dom, -1)
	if len(rates) != 2 {
		t.Fatalf("the page shows %d of the 2 rates:\n%s", len(rates), truncate(dom, 4000))
	}
	for _, r := range rates {
		if v, err := strconv.ParseFloat(strings.TrimRight(r[2], "kMG"), 64); err != nil || v <= 0 {
			t.Errorf("%s rows/s over the last minute reads %q after data, want more than 0", r[1], r[2])
		}
	}
	shot := filepath.Join(artifactDir(t), "demo-status-page.png")
	b.run(url, "--screenshot="+shot)
	if st, err := os.Stat(shot); err != nil || st.Size() < 10_000 {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	t.Logf("demo status page screenshot: %s", shot)
	page, _ := b.pageRequests("http://127.0.0.1")
	for _, u := range page {
		if !strings.HasPrefix(u, url) {
			t.Errorf("the page made a request to %s", u)
		}
	}
	for _, u := range anyURL.FindAllString(dom, -1) {
		if !isLocal(u) {
			t.Errorf("the page references %q", u)
		}
	}
	if err := demo.Stop(30 * time.Second); err != nil {
		t.Fatalf("demo did not stop cleanly: %v\n%s", err, demo.Logs())
	}
}
