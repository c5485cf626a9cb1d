package e2e

// Incident or idle, told apart by a real `driver serve` and executor
// reading kfake over TCP: the verdict is read from /metrics
// (sluice_query_health) and from `driver status -o json`.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/query"
)

// A Kafka query with a short health stall (3 s) is judged
//   - idle once its first records are read and nothing more arrives;
//   - an incident while producers keep writing faster than its
//     maxOffsetsPerTrigger lets it read (lag higher batch after batch);
//   - idle again once producing stops and it has caught up;
//   - an incident while its only executor is stopped (SIGSTOP) and records
//     keep arriving;
//   - and it reads every record produced once the executor continues.
func TestHealthIdleAndIncidentToldApartOnKafka(t *testing.T) {
	b := startKafkaBroker(t)
	events := tiletest.Events(53, 40000, 20*time.Millisecond, time.Minute, 9)
	produceEvents(t, b.addr, events[:600], 2)
	produced := 600

	l := localLocations(t, "health")
	spec := tiletest.Spec("", l.Sink, l.Checkpoint)
	spec.Name = "tile-health"
	spec.Source.File = nil
	spec.Source.Kafka = &query.KafkaSource{BootstrapServers: b.addr, Subscribe: chaosTopic, StartingOffsets: "earliest", MaxOffsetsPerTrigger: 200}
	spec.Trigger = query.Trigger{ProcessingTime: query.Duration(300 * time.Millisecond)}
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("health-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	drv := NewProc(t, "driver", bins.driver, "serve", "--listen", "127.0.0.1:0", "--token-file", token, "--query", writeSpec(t, spec),
		"--http-addr", "127.0.0.1:0", "--health-stall", "3s", "--health-slow-batches", "3", "--heartbeat-timeout", "120s")
	drv.Start()
	drv.WaitForLog(`msg="serving HTTP`, 30*time.Second)
	drv.WaitForLog(`msg="driver listening"`, 30*time.Second)
	drvHTTP, drvGRPC := logMatch(t, drv, httpAddrInLog), logMatch(t, drv, addrInLog)
	exe := NewProc(t, "executor", bins.executor, "--driver", drvGRPC, "--token-file", token, "--data-dir", t.TempDir())
	exe.Start()
	logs := func() string { return truncate(drv.Logs(), 6000) + "\n--- executor:\n" + truncate(exe.Logs(), 2000) }

	q := map[string]string{"query": spec.Name}
	health := func() (string, string) {
		ss := scrape(t, drvHTTP)
		metric := ""
		for _, h := range []string{"healthy", "idle", "incident", "inactive"} {
			if v, ok := value(ss, "sluice_query_health", map[string]string{"query": spec.Name, "health": h}); ok && v == 1 {
				if metric != "" {
					t.Fatalf("two healths at once: %s and %s", metric, h)
				}
				metric = h
			}
		}
		out, errs, code := cli(t, nil, "status", spec.Name, "-o", "json", "--server", drvGRPC, "--token-file", token)
		if code != 0 {
			t.Fatalf("driver status: exit %d\n%s%s", code, out, errs)
		}
		var st struct {
			Health *struct {
				Health string `json:"health"`
				Reason string `json:"reason"`
			} `json:"health"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil || st.Health == nil {
			t.Fatalf("driver status -o json without a health: %v\n%s", err, out)
		}
		// The metric and the CLI are read a moment apart; report the CLI's
		// verdict only when both agree.
		if metric != st.Health.Health {
			return "", st.Health.Reason
		}
		return metric, st.Health.Reason
	}
	each := func() {}
	waitHealth := func(what, want string, reasonHas ...string) string {
		t.Helper()
		var reason string
		waitUntil(t, what, 120*time.Second, logs, func() bool {
			each()
			var got string
			got, reason = health()
			if got != want {
				return false
			}
			for _, r := range reasonHas {
				if strings.Contains(reason, r) {
					return true
				}
			}
			return len(reasonHas) == 0
		})
		t.Logf("%s: %s (%s)", what, want, reason)
		return reason
	}
	rowsRead := func() float64 {
		v, _ := value(scrape(t, drvHTTP), "sluice_input_rows_total", q)
		return v
	}

	// 1. Stop producing: idle.
	waitUntil(t, "the first 600 records read", 120*time.Second, logs, func() bool { return rowsRead() == 600 })
	waitHealth("no new input", "idle")

	// 2. Keep producing faster than 200 offsets per 300 ms trigger: the
	// lag grows batch after batch.
	// Each poll produces 1000 more records (polls are hundreds of ms apart).
	each = func() {
		if produced+1000 <= 30000 {
			produceEvents(t, b.addr, events[produced:produced+1000], 2)
			produced += 1000
		}
	}
	waitHealth("producing faster than the query may read", "incident", "lag grew", "watermark stalled while the source lag grows", "slower than")
	each = func() {}

	// 3. Producing stopped: the query catches up, then it is idle again.
	waitUntil(t, "every record read", 300*time.Second, logs, func() bool { return rowsRead() == float64(produced) })
	waitHealth("caught up, no new input", "idle")

	// 4. The executor stopped while records arrive: incident.
	if err := exe.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	continued := false
	defer func() {
		if !continued {
			exe.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	produceEvents(t, b.addr, events[produced:produced+300], 2)
	produced += 300
	waitHealth("executor stopped, records waiting", "incident", "in flight", "offsets wait", "retries failing")
	if err := exe.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	continued = true
	waitUntil(t, "every record read after SIGCONT", 300*time.Second, logs, func() bool { return rowsRead() == float64(produced) })
	waitHealth("caught up after the executor continued", "idle")
}
