package e2e

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/query"
)

var httpAddrInLog = regexp.MustCompile(`msg="serving HTTP[^"]*" address=(\S+)`)

// sample is one series of a scrape: name{labels} and its value.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads addr's /metrics (the text format, parsed without the
// engine's code).
func scrape(t *testing.T, addr string) []sample {
	t.Helper()
	body, code := httpGet(t, "http://"+addr+"/metrics")
	if code != 200 {
		t.Fatalf("GET %s/metrics: %d", addr, code)
	}
	var out []sample
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	label := regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		s := sample{labels: map[string]string{}, value: v}
		head := line[:sp]
		if i := strings.IndexByte(head, '{'); i >= 0 {
			s.name = head[:i]
			for _, m := range label.FindAllStringSubmatch(head[i:], -1) {
				s.labels[m[1]] = m[2]
			}
		} else {
			s.name = head
		}
		out = append(out, s)
	}
	return out
}

// value sums the series of name whose labels include want.
func value(ss []sample, name string, want map[string]string) (float64, bool) {
	sum, found := 0.0, false
	for _, s := range ss {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range want {
			ok = ok && s.labels[k] == v
		}
		if ok {
			sum += s.value
			found = true
		}
	}
	return sum, found
}

func httpGet(t *testing.T, url string) (string, int) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}

// documentedMetrics reads the metric names docs/observability.md documents (the rows
// of its metrics tables that start with a `sluice_` name), split into the
// driver's and the executor's.
func documentedMetrics(t *testing.T) (driver, executor []string) {
	t.Helper()
	b, err := os.ReadFile("../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?m)^\\| `(sluice_[a-z_]+)`")
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		if strings.HasPrefix(m[1], "sluice_executor_") {
			executor = append(executor, m[1])
		} else {
			driver = append(driver, m[1])
		}
	}
	if len(driver) < 20 || len(executor) < 4 {
		t.Fatalf("docs/observability.md documents %d driver and %d executor metrics; the tables were not found", len(driver), len(executor))
	}
	return driver, executor
}

// has reports whether a scrape has a series of name (a histogram's
// _bucket, _sum and _count count as its name).
func has(ss []sample, name string) bool {
	for _, s := range ss {
		if s.name == name || s.name == name+"_bucket" || s.name == name+"_count" {
			return true
		}
	}
	return false
}

// Metrics scraped over HTTP from a running `driver serve` and its
// executor, during a Kafka run: every name docs/observability.md documents is there, the
// counters move as records arrive, and the input rows counted equal the
// records produced.
func TestMetricsScrapedDuringAServeRunHaveTheDocumentedNamesAndCountersMove(t *testing.T) {
	docDriver, docExecutor := documentedMetrics(t)
	b := startKafkaBroker(t)
	events := tiletest.Events(47, 2400, 150*time.Millisecond, 4*time.Minute, 9)
	produceEvents(t, b.addr, events[:800], 2)

	l := localLocations(t, "metrics")
	spec := tiletest.Spec("", l.Sink, l.Checkpoint)
	spec.Source.File = nil
	spec.Source.Kafka = &query.KafkaSource{BootstrapServers: b.addr, Subscribe: chaosTopic, StartingOffsets: "earliest", MaxOffsetsPerTrigger: 200}
	spec.Trigger = query.Trigger{ProcessingTime: query.Duration(200 * time.Millisecond)}
	// A budget far above the state, so sluice_state_budget_exceeded is
	// exported (at 0) like every documented metric.
	spec.StateBudget = &query.StateBudget{MaxRows: 1 << 40}
	progress := filepath.Join(t.TempDir(), "progress.jsonl")
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("metrics-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	drv := NewProc(t, "driver", bins.driver, "serve", "--listen", "127.0.0.1:0", "--token-file", token, "--query", writeSpec(t, spec),
		"--http-addr", "127.0.0.1:0", "--metrics-partition-lag", "--progress-json", progress)
	drv.Start()
	drv.WaitForLog(`msg="serving HTTP`, 30*time.Second)
	drv.WaitForLog(`msg="driver listening"`, 30*time.Second)
	drvHTTP, drvGRPC := logMatch(t, drv, httpAddrInLog), logMatch(t, drv, addrInLog)
	exe := NewProc(t, "executor", bins.executor, "--driver", drvGRPC, "--token-file", token, "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0")
	exe.Start()
	exe.WaitForLog(`msg="serving HTTP`, 30*time.Second)
	exeHTTP := logMatch(t, exe, httpAddrInLog)

	if body, code := httpGet(t, "http://"+drvHTTP+"/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("driver /healthz: %d %q", code, body)
	}
	q := map[string]string{"query": spec.Name}
	waitMetric := func(addr, what string, cond func([]sample) bool) []sample {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			ss := scrape(t, addr)
			if cond(ss) {
				return ss
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 90s; driver logs:\n%s\nexecutor logs:\n%s", what, truncate(drv.Logs(), 4000), truncate(exe.Logs(), 2000))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	first := waitMetric(drvHTTP, "the first 800 records counted", func(ss []sample) bool {
		v, _ := value(ss, "sluice_input_rows_total", q)
		return v == 800
	})
	if _, code := httpGet(t, "http://"+exeHTTP+"/readyz"); code != 200 {
		t.Fatalf("executor /readyz after tasks ran: %d", code)
	}
	batches1, _ := value(first, "sluice_batches_total", q)

	produceEvents(t, b.addr, events[800:], 2)
	second := waitMetric(drvHTTP, "all 2400 records counted and the lag back to 0", func(ss []sample) bool {
		v, _ := value(ss, "sluice_input_rows_total", q)
		lag, ok := value(ss, "sluice_source_lag_offsets", q)
		return v == 2400 && ok && lag == 0
	})
	batches2, _ := value(second, "sluice_batches_total", q)
	if batches2 <= batches1 {
		t.Fatalf("sluice_batches_total did not move: %v then %v", batches1, batches2)
	}
	for _, name := range docDriver {
		if !has(second, name) {
			t.Errorf("driver /metrics lacks documented %s", name)
		}
	}
	checks := []struct {
		name   string
		labels map[string]string
		ok     func(float64) bool
		want   string
	}{
		{"sluice_query_state", map[string]string{"query": spec.Name, "state": "RUNNING"}, func(v float64) bool { return v == 1 }, "1"},
		{"sluice_query_state", map[string]string{"query": spec.Name, "state": "FAILED"}, func(v float64) bool { return v == 0 }, "0"},
		{"sluice_query_desired_state", map[string]string{"query": spec.Name, "state": "running"}, func(v float64) bool { return v == 1 }, "1"},
		{"sluice_executors_registered", nil, func(v float64) bool { return v == 1 }, "1"},
		{"sluice_shuffle_bytes_total", q, func(v float64) bool { return v > 0 }, "> 0"},
		{"sluice_objstore_requests_total", map[string]string{"store": "checkpoint", "operation": "put_if_absent"}, func(v float64) bool { return v >= batches2 }, ">= batches (one offsets entry each)"},
		{"sluice_watermark_seconds", q, func(v float64) bool { return v > float64(tiletest.Base.Add(-10*time.Minute).Unix()) }, "past the first event minus the 10-minute delay"},
		{"sluice_max_event_time_seconds", q, func(v float64) bool { return v > float64(tiletest.Base.Unix()) }, "after the first event"},
		{"sluice_source_partition_lag_offsets", map[string]string{"query": spec.Name, "partition": chaosTopic + "-1"}, func(v float64) bool { return v == 0 }, "0 (per partition, asked for)"},
		{"sluice_build_info", nil, func(v float64) bool { return v == 1 }, "1"},
	}
	for _, c := range checks {
		v, ok := value(second, c.name, c.labels)
		if !ok || !c.ok(v) {
			t.Errorf("%s%v = %v (found %v), want %s", c.name, c.labels, v, ok, c.want)
		}
	}
	// Labels are query and query_id, never the run's id.
	ps := readProgressIf(t, progress)
	if len(ps) == 0 {
		t.Fatal("no progress written")
	}
	for _, s := range second {
		if _, bad := s.labels["run_id"]; bad {
			t.Errorf("%s has a run_id label", s.name)
		}
		if strings.HasPrefix(s.name, "sluice_") && s.labels["query"] != "" && s.labels["query_id"] != ps[0].ID {
			t.Errorf("%s{query=%q} has query_id %q, want %q", s.name, s.labels["query"], s.labels["query_id"], ps[0].ID)
		}
	}
	if body, _ := httpGet(t, "http://"+drvHTTP+"/metrics"); strings.Contains(body, ps[len(ps)-1].RunID) {
		t.Errorf("the run id %s appears in /metrics", ps[len(ps)-1].RunID)
	}

	ex := scrape(t, exeHTTP)
	for _, name := range docExecutor {
		if !has(ex, name) {
			t.Errorf("executor /metrics lacks documented %s", name)
		}
	}
	if v, _ := value(ex, "sluice_executor_tasks_total", map[string]string{"kind": "map"}); v < batches2/2 {
		t.Errorf("executor map tasks = %v after %v batches", v, batches2)
	}
	if v, _ := value(ex, "sluice_executor_registered", nil); v != 1 {
		t.Errorf("sluice_executor_registered = %v", v)
	}
	if v, _ := value(ex, "sluice_executor_shuffle_bytes_total", nil); v <= 0 {
		t.Errorf("sluice_executor_shuffle_bytes_total = %v", v)
	}
	names := map[string]bool{}
	for _, s := range second {
		if strings.HasPrefix(s.name, "sluice_") {
			names[s.name] = true
		}
	}
	var list []string
	for n := range names {
		list = append(list, n)
	}
	sort.Strings(list)
	t.Logf("driver exports %d sluice_ series names; %v batches; executor map tasks %v", len(list), batches2, func() float64 {
		v, _ := value(ex, "sluice_executor_tasks_total", map[string]string{"kind": "map"})
		return v
	}())
}
