package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/query"
)

// chromiumPath finds Debian's chromium ($SLUICE_CHROMIUM, else on PATH).
// Without it the test fails under CI=true (scripts/test.sh installs it)
// and is skipped, saying why, elsewhere.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SLUICE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "headless Chromium not found (set SLUICE_CHROMIUM or install Debian's chromium: apt-get install -y chromium; scripts/test.sh does)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// artifactDir is where the test keeps what a person should look at:
// $SLUICE_ARTIFACTS, else a directory that outlives the test.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SLUICE_ARTIFACTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "sluice-artifacts-"); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser runs headless Chromium once per call with a fresh profile,
// recording its network log.
type browser struct {
	t      *testing.T
	bin    string
	netLog []string // one file per run
}

// run loads url and returns chromium's stdout; extra are the action
// flags (--dump-dom, --screenshot=...).
func (b *browser) run(url string, extra ...string) string {
	b.t.Helper()
	dir := b.t.TempDir()
	netLog := filepath.Join(dir, "netlog.json")
	args := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + filepath.Join(dir, "profile"),
		// Nothing but loopback resolves: whatever the browser itself
		// attempts (it does try Google's update and account services
		// despite the flags above) cannot leave the machine.
		"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
		"--log-net-log=" + netLog, "--net-log-capture-mode=Everything",
		"--window-size=1400,1700", "--hide-scrollbars",
	}, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.bin, append(args, url)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		b.t.Fatalf("chromium %v: %v\n%s", extra, err, truncate(stderr.String(), 3000))
	}
	b.netLog = append(b.netLog, netLog)
	return stdout.String()
}

// pageRequests reads the network logs: the URLs of the requests made on
// behalf of pages of site (their network isolation key is the page's
// site), and the other URLs the browser itself asked for.
func (b *browser) pageRequests(site string) (page, own []string) {
	b.t.Helper()
	for _, f := range b.netLog {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.t.Fatal(err)
		}
		var nl struct {
			Constants struct {
				LogEventTypes map[string]int `json:"logEventTypes"`
			} `json:"constants"`
			Events []struct {
				Type   int            `json:"type"`
				Params map[string]any `json:"params"`
			} `json:"events"`
		}
		if err := json.Unmarshal(raw, &nl); err != nil {
			b.t.Fatalf("read chromium's network log %s: %v", f, err)
		}
		start, ok := nl.Constants.LogEventTypes["URL_REQUEST_START_JOB"]
		if !ok {
			b.t.Fatalf("network log %s has no URL_REQUEST_START_JOB events", f)
		}
		for _, e := range nl.Events {
			if e.Type != start {
				continue
			}
			url, _ := e.Params["url"].(string)
			nik, _ := e.Params["network_isolation_key"].(string)
			if strings.HasPrefix(nik, site+" ") {
				page = append(page, url)
			} else {
				own = append(own, url)
			}
		}
	}
	return page, own
}

var (
	batchInDOM  = regexp.MustCompile(`data-batch="(\d+)"`)
	anyURL      = regexp.MustCompile(`(?i)(?:https?:|wss?:)?//[a-z0-9.\-\[\]:]+`)
	requestPath = regexp.MustCompile(`msg="http request" method=(\S+) path=(\S+)`)
)

func batchesIn(dom string) []ids.BatchID {
	var out []ids.BatchID
	for _, m := range batchInDOM.FindAllStringSubmatch(dom, -1) {
		n, _ := ids.ParseBatchID(m[1])
		out = append(out, n)
	}
	return out
}

func maxOf(xs []ids.BatchID) ids.BatchID {
	m := ids.BatchID(-1)
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// isLocal reports whether a URL (or //host) is on this machine.
func isLocal(u string) bool {
	h := strings.ToLower(u)
	if i := strings.Index(h, "//"); i >= 0 {
		h = h[i+2:]
	}
	return strings.HasPrefix(h, "127.0.0.1") || strings.HasPrefix(h, "localhost") || strings.HasPrefix(h, "[::1]")
}

// The status page of a real `driver run` with a running query, loaded in
// headless Chromium: it shows the query's batches, newer ones after a
// refresh, and nothing it loads comes from off the machine. A screenshot
// is kept.
func TestStatusPageInHeadlessChromiumShowsBatchesAndLoadsNothingFromOutside(t *testing.T) {
	b := &browser{t: t, bin: chromiumPath(t)}
	events := tiletest.Events(53, 1200, 30*time.Second, 4*time.Minute, 6)
	in := filepath.Join(t.TempDir(), "in")
	if err := tiletest.WriteFiles(in, events[:300], 100); err != nil {
		t.Fatal(err)
	}
	l := localLocations(t, "page")
	spec := tiletest.Spec(in, l.Sink, l.Checkpoint)
	spec.Source.File.MaxFilesPerTrigger = 1
	spec.Trigger = query.Trigger{ProcessingTime: query.Duration(300 * time.Millisecond)}
	progress := filepath.Join(t.TempDir(), "progress.jsonl")
	drv := NewProc(t, "driver", bins.driver, "run", "-f", writeSpec(t, spec), "--http-addr", "127.0.0.1:0",
		"--log-level", "debug", "--progress-json", progress)
	drv.Start()
	drv.WaitForLog(`msg="serving HTTP`, 30*time.Second)
	addr := logMatch(t, drv, httpAddrInLog)
	url := "http://" + addr + "/"

	lastBatch := func() ids.BatchID {
		ps := readProgressIf(t, progress)
		if len(ps) == 0 {
			return -1
		}
		return ps[len(ps)-1].BatchID
	}
	waitBatch := func(atLeast ids.BatchID) ids.BatchID {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for lastBatch() < atLeast {
			if time.Now().After(deadline) {
				t.Fatalf("no batch %d within 90s; driver logs:\n%s", atLeast, truncate(drv.Logs(), 4000))
			}
			time.Sleep(100 * time.Millisecond)
		}
		return lastBatch()
	}

	before := waitBatch(2)
	dom := b.run(url, "--dump-dom")
	shown := batchesIn(dom)
	if len(shown) == 0 || maxOf(shown) < before {
		t.Fatalf("first load: batches shown %v, want up to at least %d committed before the load:\n%s", shown, before, truncate(dom, 3000))
	}
	for _, want := range []string{spec.Name, "RUNNING", "Recent batches", "<svg", "Watermark and max event time"} {
		if !strings.Contains(dom, want) {
			t.Errorf("page lacks %q", want)
		}
	}

	// More input: newer batches commit, and a refresh shows them.
	for f := 3; f < 12; f++ {
		lines := ""
		for _, e := range events[f*100 : (f+1)*100] {
			lines += e.JSON() + "\n"
		}
		if err := os.WriteFile(filepath.Join(in, fmt.Sprintf("part-%05d.jsonl", f)), []byte(lines), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	newer := waitBatch(maxOf(shown) + 3)
	dom2 := b.run(url, "--dump-dom")
	shown2 := batchesIn(dom2)
	if maxOf(shown2) < newer {
		t.Fatalf("after a refresh: batches shown %v, want up to at least %d", shown2, newer)
	}
	if maxOf(shown2) <= maxOf(shown) {
		t.Fatalf("the refresh shows no newer batch: %v then %v", shown, shown2)
	}

	// The page refreshes itself: with the clock run ahead 15 s, its script
	// fetches the page again and swaps it in place.
	gets := func() int { return strings.Count(drv.Logs(), `msg="http request" method=GET path=/ `) }
	n0 := gets()
	dom3 := b.run(url, "--virtual-time-budget=15000", "--dump-dom")
	if n := gets() - n0; n < 3 {
		t.Errorf("one load with 15 s of page time fetched / %d times; the page's refresh every 3 s should add at least 2", n)
	}
	if shown3 := batchesIn(dom3); maxOf(shown3) < maxOf(shown2) {
		t.Errorf("after in-place refreshes: batches shown %v, older than %v", shown3, shown2)
	}

	dir := artifactDir(t)
	shot := filepath.Join(dir, "status-page.png")
	b.run(url, "--screenshot="+shot)
	if st, err := os.Stat(shot); err != nil || st.Size() < 10_000 {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "status-page.html"), []byte(dom2), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("status page screenshot: %s", shot)

	// Nothing left the machine: the page names no other host; every
	// request made for the page went to the driver; the driver was asked
	// only for the page and its embedded assets.
	for _, u := range anyURL.FindAllString(dom+dom2+dom3, -1) {
		if !isLocal(u) {
			t.Errorf("the page references %q", u)
		}
	}
	page, own := b.pageRequests("http://127.0.0.1")
	if len(page) < 4*3 {
		t.Errorf("network log: %d page requests over 4 loads, want the page and its 2 assets each: %v", len(page), page)
	}
	for _, u := range page {
		if !isLocal(u) || !strings.HasPrefix(u, "http://"+addr+"/") {
			t.Errorf("the page made a request to %s", u)
		}
	}
	hosts := map[string]int{}
	for _, u := range own {
		if m := anyURL.FindString(u); m != "" {
			hosts[m]++
		}
	}
	if len(hosts) > 0 {
		t.Logf("chromium's own background requests, not the page's (no name but loopback resolves): %v", hosts)
	}
	allowed := map[string]bool{"/": true, "/assets/style.css": true, "/assets/page.js": true}
	served := requestPath.FindAllStringSubmatch(drv.Logs(), -1)
	if len(served) < 12 {
		t.Errorf("driver logged %d requests, want at least 12", len(served))
	}
	for _, m := range served {
		if m[1] != "GET" || !allowed[m[2]] {
			t.Errorf("driver was asked for %s %s", m[1], m[2])
		}
	}
}
