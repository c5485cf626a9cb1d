package e2e

// The shipped alerting rules and Grafana dashboard against a real
// Prometheus server (built from its Go module, cached by scripts/test.sh)
// scraping a real `driver serve` and two executors: the alerts fire for the
// incidents docs/operations.md ("Alerts") names, and only for them, and
// every dashboard query returns data.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/query"
)

// prometheusVersion is the server scripts/test.sh installs.
const prometheusVersion = "v0.316.0"

// prometheusBinary finds the Prometheus server: $SLUICE_PROMETHEUS, else
// the cache scripts/test.sh fills. Without it the test fails under
// CI=true and is skipped, saying why, elsewhere.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("SLUICE_PROMETHEUS")
	if p == "" {
		cache := os.Getenv("SLUICE_CACHE")
		if cache == "" {
			if base, err := os.UserCacheDir(); err == nil {
				cache = filepath.Join(base, "sluice")
			}
		}
		p = filepath.Join(cache, "bin", "prometheus-"+prometheusVersion)
	}
	if _, err := os.Stat(p); err != nil {
		msg := fmt.Sprintf("no Prometheus server at %s (%v): scripts/test.sh installs it (go install github.com/prometheus/prometheus/cmd/prometheus@%s), or set SLUICE_PROMETHEUS", p, err, prometheusVersion)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// forScale divides every rule's `for:` in the test's copy of the rules, so
// a 5-minute incident fires in 5 s; evaluation and scrapes run every second.
const forScale = 60

// scaledRules returns the shipped rules file with every `for:` divided by
// forScale, and checks that the copy differs from the shipped file in
// nothing else. It also returns each alert's scaled `for:` and severity.
func scaledRules(t *testing.T) (text []byte, forOf map[string]time.Duration, severity map[string]string) {
	t.Helper()
	raw, err := os.ReadFile("../deploy/prometheus/sluice-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	forOf, severity = map[string]time.Duration{}, map[string]string{}
	rules := func(d map[string]any) []map[string]any {
		var out []map[string]any
		for _, g := range d["groups"].([]any) {
			for _, r := range g.(map[string]any)["rules"].([]any) {
				out = append(out, r.(map[string]any))
			}
		}
		return out
	}
	for _, r := range rules(doc) {
		name, _ := r["alert"].(string)
		severity[name], _ = r["labels"].(map[string]any)["severity"].(string)
		f, ok := r["for"].(string)
		if !ok {
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil {
			t.Fatalf("%s: for: %q: %v", name, f, err)
		}
		forOf[name] = d / forScale
		r["for"] = fmt.Sprintf("%ds", int((d / forScale).Seconds()))
	}
	text, err = yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	// The copy, read back, is the shipped file but for `for:`.
	var orig, copied map[string]any
	if err := yaml.Unmarshal(raw, &orig); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(text, &copied); err != nil {
		t.Fatal(err)
	}
	ro, rc := rules(orig), rules(copied)
	if len(ro) != len(rc) || len(ro) < 5 {
		t.Fatalf("the copy has %d rules, the shipped file %d", len(rc), len(ro))
	}
	for i := range ro {
		fo, fc := ro[i]["for"], rc[i]["for"]
		if (fo == nil) != (fc == nil) {
			t.Fatalf("rule %v: for %v became %v", ro[i]["alert"], fo, fc)
		}
		if fo != nil {
			do, _ := time.ParseDuration(fo.(string))
			dc, _ := time.ParseDuration(fc.(string))
			if dc*forScale != do {
				t.Fatalf("rule %v: for %v scaled to %v, not 1/%d", ro[i]["alert"], fo, fc, forScale)
			}
		}
		delete(ro[i], "for")
		delete(rc[i], "for")
	}
	if !reflect.DeepEqual(orig, copied) {
		t.Fatalf("the test's rules differ from deploy/prometheus/sluice-rules.yaml in more than for:\n%v\n%v", orig, copied)
	}
	return text, forOf, severity
}

// promServer is a running Prometheus server and its HTTP API.
type promServer struct {
	t    *testing.T
	url  string
	proc *Proc
}

func startPrometheus(t *testing.T, config, rules []byte) *promServer {
	t.Helper()
	bin := prometheusBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, config, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	p := &promServer{t: t, url: "http://" + addr}
	p.proc = NewProc(t, "prometheus", bin, "--config.file="+cfg, "--web.listen-address="+addr,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--log.level=warn")
	p.proc.Start()
	waitUntil(t, "Prometheus to be ready", 60*time.Second, p.proc.Logs, func() bool { return getStatus(p.url+"/-/ready") == 200 })
	return p
}

// getStatus is the status code of a GET of u (0 when it fails).
func getStatus(u string) int {
	c := http.Client{Timeout: 3 * time.Second}
	r, err := c.Get(u)
	if err != nil {
		return 0
	}
	r.Body.Close()
	return r.StatusCode
}

// api GETs path from Prometheus' HTTP API and decodes its data.
func (p *promServer) api(path string, data any) {
	p.t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(p.url + path)
	if err != nil {
		p.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.Status != "success" {
		p.t.Fatalf("GET %s: %d %s %v", path, resp.StatusCode, body, err)
	}
	if err := json.Unmarshal(env.Data, data); err != nil {
		p.t.Fatalf("GET %s: %v\n%s", path, err, env.Data)
	}
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant query and returns its result type and series (a
// scalar counts as one).
func (p *promServer) query(expr string) (string, []promSample) {
	p.t.Helper()
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	p.api("/api/v1/query?query="+url.QueryEscape(expr), &data)
	var out []promSample
	switch data.ResultType {
	case "vector":
		if err := json.Unmarshal(data.Result, &out); err != nil {
			p.t.Fatal(err)
		}
	case "scalar", "string":
		var v [2]any
		if err := json.Unmarshal(data.Result, &v); err != nil {
			p.t.Fatal(err)
		}
		out = []promSample{{Value: v}}
	default:
		p.t.Fatalf("%s: result type %s", expr, data.ResultType)
	}
	return data.ResultType, out
}

// value is the value of expr's single series (false when it has none).
func (p *promServer) value(expr string) (float64, bool) {
	p.t.Helper()
	_, ss := p.query(expr)
	if len(ss) != 1 {
		return 0, false
	}
	var v float64
	if s, ok := ss[0].Value[1].(string); ok {
		fmt.Sscan(s, &v)
	}
	return v, true
}

type promAlert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"`
	ActiveAt time.Time         `json:"activeAt"`
}

func (p *promServer) alerts() []promAlert {
	p.t.Helper()
	var data struct {
		Alerts []promAlert `json:"alerts"`
	}
	p.api("/api/v1/alerts", &data)
	return data.Alerts
}

// find returns the alert named name for query q ("": any), if active.
func (p *promServer) find(name, q string) (promAlert, bool) {
	for _, a := range p.alerts() {
		if a.Labels["alertname"] == name && (q == "" || a.Labels["query"] == q) {
			return a, true
		}
	}
	return promAlert{}, false
}

// TestAlertsAndDashboardAgainstARealPrometheus runs a real Prometheus over
// a `driver serve` with viewer and operator roles and two executors on
// kfake, scraping the driver with a viewer token as the chart's
// ServiceMonitor does (roles.clientToken) and the executors without one,
// with deploy/prometheus/sluice-rules.yaml loaded (every `for:` divided by
// 60, nothing else changed). Through Prometheus' own API:
//   - the idle query fires no incident alert (critical or warning), not
//     even pending;
//   - a consumer throttled below the input rate, an executor stopped with
//     SIGSTOP, a query that failed, and a query past its state budget each
//     fire the alert docs/operations.md names, once it has been pending for
//     its `for:`;
//   - recovery (producing stops, SIGCONT, the query resubmitted with a
//     larger budget) resolves it;
//   - every query of the Grafana dashboard returns data.
func TestAlertsAndDashboardAgainstARealPrometheus(t *testing.T) {
	start := time.Now()
	rules, forOf, severity := scaledRules(t)
	prometheusBinary(t) // skip (or fail under CI) before starting anything

	b := startKafkaBroker(t)
	events := tiletest.Events(57, 60000, 20*time.Millisecond, time.Minute, 9)
	produced := 0
	var pmu sync.Mutex
	produce := func(n int) {
		pmu.Lock()
		defer pmu.Unlock()
		produceEvents(t, b.addr, events[produced:produced+n], 2)
		produced += n
	}
	producedNow := func() int { pmu.Lock(); defer pmu.Unlock(); return produced }
	produce(600)

	const viewerTok, operatorTok = "viewer-token-prom-000001", "operator-token-prom-0001"
	clusterTok := writeFile(t, "token", "prometheus-e2e-cluster-token\n")
	viewers := writeFile(t, "viewers", "prometheus "+viewerTok+"\n")
	operators := writeFile(t, "operators", "olga "+operatorTok+"\n")
	viewerCred := writeFile(t, "viewer-cred", viewerTok+"\n") // roles.clientToken: one viewer token, alone
	operatorCred := writeFile(t, "operator-cred", operatorTok+"\n")

	root := t.TempDir()
	kafkaSpec := func(name string, maxOffsets int64, trigger time.Duration, budget *query.StateBudget) query.Spec {
		s := tiletest.Spec("", filepath.Join(root, name, "out"), filepath.Join(root, name, "cp"))
		s.Name = name
		s.Source.File = nil
		s.Source.Kafka = &query.KafkaSource{BootstrapServers: b.addr, Subscribe: chaosTopic, StartingOffsets: "earliest", MaxOffsetsPerTrigger: maxOffsets}
		s.Trigger = query.Trigger{ProcessingTime: query.Duration(trigger)}
		s.StateBudget = budget
		return s
	}
	// 200 offsets a second at most; a trigger long enough that a loaded
	// machine's batches are not slower than it (an incident of its own).
	tile := kafkaSpec("tile", 200, time.Second, nil)
	drv := NewProc(t, "driver", bins.driver, "serve", "--listen", "127.0.0.1:0", "--token-file", clusterTok,
		"--viewer-tokens-file", viewers, "--operator-tokens-file", operators, "--registry", filepath.Join(root, "registry"),
		"--query", writeSpec(t, tile), "--http-addr", "127.0.0.1:0", "--min-executors", "2",
		// A stopped executor stays registered: its batch stays in flight.
		"--health-stall", "3s", "--health-slow-batches", "3", "--heartbeat-timeout", "10m")
	drv.Start()
	drv.WaitForLog(`msg="serving HTTP`, 30*time.Second)
	drv.WaitForLog(`msg="driver listening"`, 30*time.Second)
	drvHTTP, drvGRPC := logMatch(t, drv, httpAddrInLog), logMatch(t, drv, addrInLog)
	var exes []*Proc
	var exeHTTP []string
	for i := range 2 {
		e := NewProc(t, fmt.Sprintf("executor-%d", i+1), bins.executor, "--driver", drvGRPC, "--token-file", clusterTok,
			"--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0")
		e.Start()
		e.WaitForLog(`msg="serving HTTP`, 30*time.Second)
		exes = append(exes, e)
		exeHTTP = append(exeHTTP, logMatch(t, e, httpAddrInLog))
	}
	logs := func() string {
		s := "--- driver:\n" + truncate(drv.Logs(), 5000)
		for _, e := range exes {
			s += "\n--- " + e.name + ":\n" + truncate(e.Logs(), 1500)
		}
		return s
	}
	if code := getStatus("http://" + drvHTTP + "/metrics"); code != http.StatusUnauthorized {
		t.Fatalf("the driver's /metrics without a credential: %d, want 401 (roles are on)", code)
	}

	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [rules.yaml]
scrape_configs:
  # As the chart's driver ServiceMonitor: a viewer token as bearer.
  - job_name: sluice-driver
    authorization: {type: Bearer, credentials_file: %q}
    static_configs: [{targets: [%q]}]
  # As the chart's executor ServiceMonitor: no credential.
  - job_name: sluice-executor
    static_configs: [{targets: [%q, %q]}]
  # Without the credential the driver refuses the scrape.
  - job_name: sluice-driver-anonymous
    static_configs: [{targets: [%q]}]
`, viewerCred, drvHTTP, exeHTTP[0], exeHTTP[1], drvHTTP)
	prom := startPrometheus(t, []byte(config), rules)
	logs2 := func() string { return logs() + "\n--- prometheus:\n" + truncate(prom.proc.Logs(), 2000) }

	// The driver answers the chart's credential, and only it.
	waitUntil(t, "every target scraped", 60*time.Second, logs2, func() bool {
		d, _ := prom.value(`up{job="sluice-driver"}`)
		e, _ := prom.value(`sum(up{job="sluice-executor"})`)
		a, ok := prom.value(`up{job="sluice-driver-anonymous"}`)
		return d == 1 && e == 2 && ok && a == 0
	})

	// Before the first scrape no driver metric exists: SluiceDriverAbsent
	// is pending until the next evaluation after it.
	waitUntil(t, "the first evaluation after the first scrape", 30*time.Second, logs2, func() bool {
		_, active := prom.find("SluiceDriverAbsent", "")
		return !active
	})
	q := func(name string) string { return fmt.Sprintf(`query=%q`, name) }
	rowsRead := func(name string) float64 {
		v, _ := prom.value(fmt.Sprintf(`sum(sluice_input_rows_total{%s})`, q(name)))
		return v
	}
	health := func(name, h string) bool {
		v, _ := prom.value(fmt.Sprintf(`sluice_query_health{%s,health=%q}`, q(name), h))
		return v == 1
	}
	incidentAlerts := func() []string {
		var out []string
		for _, a := range prom.alerts() {
			if s := severity[a.Labels["alertname"]]; s == "critical" || s == "warning" {
				out = append(out, fmt.Sprintf("%s{query=%q} %s", a.Labels["alertname"], a.Labels["query"], a.State))
			}
		}
		return out
	}
	// fires waits until the alert named name for query qn fires, having
	// been pending for its `for:`, and returns when it did.
	fires := func(scenario, name, qn string, t0 time.Time, within time.Duration) {
		t.Helper()
		f := forOf[name]
		var a promAlert
		waitUntil(t, scenario+": "+name+" firing", within+f, logs2, func() bool {
			var ok bool
			a, ok = prom.find(name, qn)
			return ok && a.State == "firing"
		})
		firedAfter := time.Since(a.ActiveAt)
		// Evaluation runs every second and the poll every 200 ms.
		if firedAfter < f-time.Second || firedAfter > f+4*time.Second {
			t.Errorf("%s: %s fired %v after it became active; its for: is %v", scenario, name, firedAfter.Round(100*time.Millisecond), f)
		}
		t.Logf("%s: %s{query=%q} fired %v after the scenario began (active after %v, for: %v)", scenario, name, qn,
			time.Since(t0).Round(100*time.Millisecond), a.ActiveAt.Sub(t0).Round(100*time.Millisecond), f)
	}
	// stillResolved checks, once the query runs again and caught up, that
	// the alert did not come back.
	stillResolved := func(scenario, name, qn string) {
		t.Helper()
		if a, active := prom.find(name, qn); active {
			t.Errorf("%s: %s{query=%q} is %s again after recovery\n%s", scenario, name, qn, a.State, logs2())
		}
	}
	resolves := func(scenario, name, qn string, within time.Duration) {
		t.Helper()
		t0 := time.Now()
		waitUntil(t, scenario+": "+name+" resolved", within, logs2, func() bool {
			_, active := prom.find(name, qn)
			return !active
		})
		t.Logf("%s: %s{query=%q} resolved %v after recovery began", scenario, name, qn, time.Since(t0).Round(100*time.Millisecond))
	}

	// submit submits a spec as the operator.
	submit := func(s query.Spec) {
		t.Helper()
		out, errs, code := cli(t, nil, "submit", "-f", writeSpec(t, s), "--server", drvGRPC, "--token-file", operatorCred)
		if code != 0 {
			t.Fatalf("driver submit %s: exit %d\n%s%s\n%s", s.Name, code, out, errs, logs2())
		}
	}

	// 1. Idle: the first records read, nothing more arrives. No incident
	// alert is pending or firing for ten evaluations.
	waitUntil(t, "the first 600 records read", 120*time.Second, logs2, func() bool { return rowsRead("tile") == 600 })
	waitUntil(t, "the idle verdict", 60*time.Second, logs2, func() bool { return health("tile", "idle") })
	for range 20 {
		if a := incidentAlerts(); len(a) > 0 {
			t.Fatalf("idle: incident alerts %v\n%s", a, logs2())
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("idle: no incident alert for 10 s (%v into the test)", time.Since(start).Round(time.Second))

	// 2. A throttled consumer: 2000 records/s arrive, maxOffsetsPerTrigger
	// lets the query read 200/s. Producing stops once the alert fired.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if producedNow()+500 <= len(events)-2000 {
					produce(500)
				}
			}
		}
	})
	fires("throttled consumer", "SluiceQueryIncident", "tile", time.Now(), 90*time.Second)
	close(stop)
	wg.Wait()
	// The operator's fix: a higher maxOffsetsPerTrigger (same checkpoint).
	tile.Source.Kafka.MaxOffsetsPerTrigger = 100_000
	submit(tile)
	resolves("throttled consumer", "SluiceQueryIncident", "tile", 120*time.Second)
	waitUntil(t, "every record read", 300*time.Second, logs2, func() bool { return rowsRead("tile") == float64(producedNow()) })
	waitUntil(t, "idle again", 60*time.Second, logs2, func() bool { return health("tile", "idle") })
	stillResolved("throttled consumer", "SluiceQueryIncident", "tile")

	// 3. An executor stopped (SIGSTOP) while records arrive: its batch
	// stays in flight.
	victim := exes[0]
	stopped := time.Now()
	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	continued := false
	defer func() {
		if !continued {
			victim.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	produce(300)
	fires("executor stopped", "SluiceQueryIncident", "tile", stopped, 90*time.Second)
	if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	continued = true
	resolves("executor stopped", "SluiceQueryIncident", "tile", 120*time.Second)
	waitUntil(t, "every record read after SIGCONT", 300*time.Second, logs2, func() bool { return rowsRead("tile") == float64(producedNow()) })
	waitUntil(t, "idle again", 60*time.Second, logs2, func() bool { return health("tile", "idle") })
	stillResolved("executor stopped", "SluiceQueryIncident", "tile")

	// 4 and 5. A query that fails (its state passes a budget with
	// onExceed: stop) and one past its budget that keeps running
	// (onExceed: flag), submitted by an operator; then both resubmitted
	// with a budget they fit in.
	tight := func(on string) *query.StateBudget { return &query.StateBudget{MaxRows: 1, OnExceed: on} }
	roomy := func(on string) *query.StateBudget { return &query.StateBudget{MaxRows: 1_000_000, OnExceed: on} }
	failing := kafkaSpec("tile-budget-stop", 5000, 300*time.Millisecond, tight(query.OnExceedStop))
	flagged := kafkaSpec("tile-budget-flag", 5000, 300*time.Millisecond, tight(query.OnExceedFlag))
	submitted := time.Now()
	submit(failing)
	submit(flagged)
	fires("failed query", "SluiceQueryFailed", failing.Name, submitted, 90*time.Second)
	fires("state budget exceeded", "SluiceStateBudgetExceeded", flagged.Name, submitted, 90*time.Second)
	failing.StateBudget, flagged.StateBudget = roomy(query.OnExceedStop), roomy(query.OnExceedFlag)
	submit(failing)
	submit(flagged)
	produce(200) // a data batch measures the state against the new budget
	resolves("failed query", "SluiceQueryFailed", failing.Name, 90*time.Second)
	resolves("state budget exceeded", "SluiceStateBudgetExceeded", flagged.Name, 90*time.Second)
	waitUntil(t, "every query caught up", 120*time.Second, logs2, func() bool {
		n := float64(producedNow())
		return rowsRead("tile") == n && rowsRead(flagged.Name) == n && rowsRead(failing.Name) == n
	})
	stillResolved("failed query", "SluiceQueryFailed", failing.Name)
	stillResolved("state budget exceeded", "SluiceStateBudgetExceeded", flagged.Name)

	// 6. Every query of the Grafana dashboard returns data, the dashboard's
	// variables as Grafana sends them for "All" and a one-minute interval.
	raw, err := os.ReadFile("../deploy/grafana/sluice-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer(`"$query"`, `".*"`, "$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h")
	exprs := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs++
			expr := vars.Replace(tg.Expr)
			if _, ss := prom.query(expr); len(ss) == 0 {
				t.Errorf("dashboard panel %q: %s returns nothing", p.Title, expr)
			}
		}
	}
	if exprs < 15 {
		t.Fatalf("read %d dashboard queries", exprs)
	}
	t.Logf("%d dashboard queries return data; the test took %v", exprs, time.Since(start).Round(time.Second))
}
