package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/syncbuf"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/progress"
)

func TestServeHTTPServesTheTrackerAndStops(t *testing.T) {
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	tr := monitor.New(monitor.Options{})
	ready := errors.New("standby: the lease is held by driver-b")
	var mu sync.Mutex
	readyFn := func() error { mu.Lock(); defer mu.Unlock(); return ready }
	stop, err := serveHTTP(context.Background(), "127.0.0.1:0", tr, readyFn, log)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	m := regexp.MustCompile(`address=(\S+)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no address logged: %s", logs.String())
	}
	base := "http://" + m[1]
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "lease is held by driver-b") {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	mu.Lock()
	ready = nil
	mu.Unlock()
	if code, _ := get("/readyz"); code != 200 {
		t.Fatalf("/readyz when ready: %d", code)
	}
	r := monitor.Ref{Name: "tile", ID: "qid"}
	tr.SetState(r, monitor.Running, nil)
	for i := range 3 {
		tr.Observe(&progress.Report{Name: "tile", ID: "qid", BatchID: ids.BatchID(i), NumInputRows: 10, Timestamp: time.Now().Format(time.RFC3339Nano),
			DurationMs: map[string]int64{"triggerExecution": 5}})
	}
	_, body := get("/metrics")
	for _, want := range []string{
		`sluice_input_rows_total{query="tile",query_id="qid"} 30`,
		`sluice_batches_total{kind="data",query="tile",query_id="qid"} 3`,
		`sluice_query_state{query="tile",query_id="qid",state="RUNNING"} 1`,
		`sluice_build_info{`, `go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if code, page := get("/"); code != 200 || !strings.Contains(page, `data-batch="2"`) {
		t.Fatalf("/: %d", code)
	}
	stop()
	stop()
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("still serving after stop")
	}
	tr.Observe(&progress.Report{Name: "tile", ID: "qid", BatchID: 3}) // no listener left behind to panic
}
