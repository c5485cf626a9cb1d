package e2e

// Who may do what, with real processes: a driver serving viewer and
// operator tokens beside the executors' cluster token, a location policy,
// and its registry (with the audit trail) on the S3-compatible server.
// Every CLI command with each credential, the HTTP port, specs outside the
// policy in each field, a second query on a used checkpoint, and driver
// history across a driver restart.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil/s3test"
	"github.com/sluicehq/sluice/query"
)

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// historyJSON is one entry of driver history -o json.
type historyJSON struct {
	Generation        int64  `json:"generation"`
	Change            string `json:"change"`
	Desired           string `json:"desired"`
	Principal         string `json:"principal"`
	Role              string `json:"role"`
	Reason            string `json:"reason"`
	ChangedBy         string `json:"changedBy"`
	ChangedAt         string `json:"changedAt"`
	FingerprintBefore string `json:"fingerprintBefore"`
	FingerprintAfter  string `json:"fingerprintAfter"`
}

func TestRolesPolicyAndAuditTrail(t *testing.T) {
	srv := s3test.Start(t)
	regURI := srv.URI("control", "sluice/registry/")
	env := srv.Env()

	const (
		viewerTok   = "viewer-token-vera-0001"
		olgaTok     = "operator-token-olga-0001"
		oscarTok    = "operator-token-oscar-001"
		clusterTokV = "svc-e2e-token"
	)
	clusterTok := writeToken(t) // holds clusterTokV
	viewers := writeFile(t, "viewers", "# viewers\nvera "+viewerTok+"\n")
	operators := writeFile(t, "operators", "olga "+olgaTok+"\noscar "+oscarTok+"\n")
	creds := map[string]string{
		"viewer":   writeFile(t, "vera", viewerTok+"\n"),
		"operator": writeFile(t, "olga", olgaTok+"\n"),
		"oscar":    writeFile(t, "oscar", oscarTok+"\n"),
		"executor": clusterTok,
	}

	root := t.TempDir()
	in, _ := tileFiles(t, 81, 8000, 500)
	cpRoot, outRoot, badRoot := filepath.Join(root, "cp"), filepath.Join(root, "out"), filepath.Join(root, "bad")
	pol := writeFile(t, "policy.yaml", fmt.Sprintf(`lab: true
allow:
  sources: [%s]
  topics: [learning.progress]
  sinks: [%s]
  checkpoints: [%s]
  badRecords: [%s]
`, in, outRoot, cpRoot, badRoot))
	mkGood := func() query.Spec {
		g := tileSpec(in, locations{Checkpoint: filepath.Join(cpRoot, "tile"), Sink: filepath.Join(outRoot, "tile")}, 1)
		g.Trigger = query.Trigger{ProcessingTime: query.Duration(200 * time.Millisecond)}
		return g
	}
	good := mkGood()
	goodPath := writeSpec(t, good)
	const name = "course-activity-tile"

	httpAddr := freePort(t)
	roleFlags := []string{"--viewer-tokens-file", viewers, "--operator-tokens-file", operators, "--policy", pol, "--http-addr", httpAddr}
	s := startSvc(t, clusterTok, regURI, env, 1, roleFlags...)

	// as runs a CLI command with a credential ("none": no token at all).
	as := func(cred string, args ...string) (string, string, int) {
		t.Helper()
		args = append(args, "--server", s.addr)
		if cred != "none" {
			args = append(args, "--token-file", creds[cred])
		}
		return cli(t, env, args...)
	}
	waitUntil(t, "the driver to be active", 60*time.Second, s.logs, func() bool {
		_, _, code := as("viewer", "list")
		return code == 0
	})

	// submit: operator only.
	for _, cred := range []string{"viewer", "executor", "none"} {
		_, errs, code := as(cred, "submit", "-f", goodPath)
		if code != 4 || !strings.Contains(errs, "operator") {
			t.Errorf("submit as %s: exit %d, %q; want 4 naming role operator", cred, code, errs)
		}
	}
	if out, errs, code := as("operator", "submit", "-f", goodPath, "--wait", "--reason", "CHG-1 first start"); code != 0 || !strings.Contains(out, "submitted") {
		t.Fatalf("submit as operator: exit %d, %q %q\n%s", code, out, errs, s.logs())
	}

	// Read commands: viewer and operator; not the executors' credential,
	// not nothing.
	reads := [][]string{{"list"}, {"status", name}, {"progress", name, "-n", "1"}, {"history", name}}
	for _, c := range reads {
		for _, cred := range []string{"viewer", "operator"} {
			if out, errs, code := as(cred, c...); code != 0 {
				t.Errorf("%v as %s: exit %d, %q %q", c, cred, code, out, errs)
			}
		}
		_, errs, code := as("executor", c...)
		if code != 4 || !strings.Contains(errs, "needs role viewer") || !strings.Contains(errs, "cluster-token (executor)") {
			t.Errorf("%v as executor: exit %d, %q; want 4 naming role viewer", c, code, errs)
		}
		_, errs, code = as("none", c...)
		if code != 4 || !strings.Contains(errs, "viewer or operator") {
			t.Errorf("%v with no credential: exit %d, %q; want 4 naming the roles", c, code, errs)
		}
	}

	// The HTTP port: a viewer credential; probes need none.
	get := func(path, tok string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path, tok string
		want      int
	}{
		{"/metrics", "", http.StatusUnauthorized}, {"/", "", http.StatusUnauthorized},
		{"/metrics", clusterTokV, http.StatusForbidden},
		{"/metrics", viewerTok, http.StatusOK}, {"/", olgaTok, http.StatusOK},
		{"/healthz", "", http.StatusOK},
	} {
		if got := get(c.path, c.tok); got != c.want {
			t.Errorf("GET %s with token %q: %d, want %d", c.path, c.tok, got, c.want)
		}
	}

	// The location policy: each field outside it is refused at submit,
	// naming field and value, and nothing is created.
	outside := filepath.Join(root, "elsewhere")
	for _, c := range []struct {
		field, value string
		edit         func(*query.Spec)
	}{
		{"source.file.path", "/etc", func(q *query.Spec) { q.Source.File.Path = "/etc" }},
		{"sink.parquet.path", outside, func(q *query.Spec) { q.Sink.Parquet.Path = outside }},
		{"checkpointLocation", outside, func(q *query.Spec) { q.CheckpointLocation = outside }},
		{"checkpointLocation", cpRoot + "/../elsewhere", func(q *query.Spec) { q.CheckpointLocation = cpRoot + "/../elsewhere" }},
		{"badRecordsPath", outside, func(q *query.Spec) { q.BadRecordsPath = outside }},
		{"source.kafka.subscribe", "payroll", func(q *query.Spec) {
			q.Source.File = nil
			q.Source.Kafka = &query.KafkaSource{BootstrapServers: "127.0.0.1:1", Subscribe: "payroll", StartingOffsets: "earliest"}
		}},
	} {
		spec := mkGood()
		spec.Name = "outsider"
		spec.CheckpointLocation = filepath.Join(cpRoot, "outsider")
		c.edit(&spec)
		_, errs, code := as("operator", "submit", "-f", writeSpec(t, spec))
		if code != 4 || !strings.Contains(errs, c.field+": ") || !strings.Contains(errs, fmt.Sprintf("%q", c.value)) || !strings.Contains(errs, "outside the driver's policy") {
			t.Errorf("%s outside the policy: exit %d, %q", c.field, code, errs)
		}
		if _, err := os.Stat(outside); !os.IsNotExist(err) {
			t.Fatalf("%s refused, yet %s was created", c.field, outside)
		}
	}
	if _, err := os.Stat(filepath.Join(cpRoot, "outsider")); !os.IsNotExist(err) {
		t.Fatalf("a refused submit created its checkpoint (%v)", err)
	}
	// Another query on the tile's checkpoint, or inside it.
	for _, cp := range []string{good.CheckpointLocation, filepath.Join(good.CheckpointLocation, "nested")} {
		spec := mkGood()
		spec.Name = "copycat"
		spec.Sink.Parquet.Path = filepath.Join(outRoot, "copycat")
		spec.CheckpointLocation = cp
		_, errs, code := as("operator", "submit", "-f", writeSpec(t, spec))
		if code != 4 || !strings.Contains(errs, "query "+name) || !strings.Contains(errs, "never share a checkpoint") {
			t.Errorf("a second query on checkpoint %s: exit %d, %q", cp, code, errs)
		}
	}
	if out, _, _ := as("viewer", "list"); strings.Contains(out, "outsider") || strings.Contains(out, "copycat") {
		t.Fatalf("a refused query was registered:\n%s", out)
	}

	// replay submits too: operator only, and within the policy.
	kspec := mkGood()
	kspec.Name = "kafka-q"
	kspec.CheckpointLocation = filepath.Join(cpRoot, "kafka-q")
	kspec.Source.File = nil
	kspec.Source.Kafka = &query.KafkaSource{BootstrapServers: "127.0.0.1:1", Subscribe: "learning.progress", StartingOffsets: "earliest"}
	kpath := writeSpec(t, kspec)
	replay := func(cred, cp string) (string, int) {
		_, errs, code := as(cred, "replay", "-f", kpath, "--checkpoint", cp, "--starting-offsets", "earliest", "--ticket", "INC-5",
			"--out", filepath.Join(t.TempDir(), "replay.yaml"))
		return errs, code
	}
	for _, cred := range []string{"viewer", "executor", "none"} {
		if errs, code := replay(cred, filepath.Join(cpRoot, "kafka-q-replay")); code != 4 || !strings.Contains(errs, "operator") {
			t.Errorf("replay as %s: exit %d, %q; want 4 naming role operator", cred, code, errs)
		}
	}
	if errs, code := replay("operator", outside); code != 4 || !strings.Contains(errs, "checkpointLocation: ") || !strings.Contains(errs, "outside the driver's policy") {
		t.Errorf("replay onto a checkpoint outside the policy: exit %d, %q", code, errs)
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Fatalf("a refused replay created %s", outside)
	}

	// stop: operator only.
	for _, cred := range []string{"viewer", "executor", "none"} {
		_, errs, code := as(cred, "stop", name)
		if code != 4 || !strings.Contains(errs, "operator") {
			t.Errorf("stop as %s: exit %d, %q; want 4 naming role operator", cred, code, errs)
		}
	}
	if out, errs, code := as("oscar", "stop", name, "--reason", "INC-2 maintenance"); code != 0 || !strings.Contains(out, "STOPPED") {
		t.Fatalf("stop as oscar: exit %d, %q %q", code, out, errs)
	}

	// A driver restart: the new driver reads the audit trail from the
	// object store.
	if err := s.driver.Stop(60 * time.Second); err != nil {
		t.Fatalf("driver SIGTERM: %v\n%s", err, s.logs())
	}
	for _, e := range s.executors {
		e.Kill()
	}
	s = startSvc(t, clusterTok, regURI, env, 1, append(roleFlags[:len(roleFlags)-2:len(roleFlags)-2], "--http-addr", freePort(t))...)
	waitUntil(t, "the new driver to be active", 60*time.Second, s.logs, func() bool {
		_, _, code := as("viewer", "list")
		return code == 0
	})
	if out, errs, code := as("operator", "submit", "-f", goodPath, "--reason", "CHG-3 resume"); code != 0 || !strings.Contains(out, "resumed") {
		t.Fatalf("resume as olga: exit %d, %q %q", code, out, errs)
	}
	out, errs, code := as("viewer", "history", name, "-o", "json")
	if code != 0 {
		t.Fatalf("history: exit %d %q", code, errs)
	}
	var hist []historyJSON
	if err := json.Unmarshal([]byte(out), &hist); err != nil {
		t.Fatalf("history -o json: %v\n%s", err, out)
	}
	want := []struct{ change, principal, role, reason string }{
		{"submit", "olga", "operator", "CHG-1 first start"},
		{"stop", "oscar", "operator", "INC-2 maintenance"},
		{"resume", "olga", "operator", "CHG-3 resume"},
	}
	if len(hist) != len(want) {
		t.Fatalf("history has %d entries, want %d:\n%s", len(hist), len(want), out)
	}
	var prevAt time.Time
	for i, w := range want {
		h := hist[i]
		at, err := time.Parse(time.RFC3339, h.ChangedAt)
		if h.Generation != int64(i+1) || h.Change != w.change || h.Principal != w.principal || h.Role != w.role || h.Reason != w.reason || err != nil || at.Before(prevAt) {
			t.Errorf("history[%d] = %+v, want %+v in order", i, h, w)
		}
		prevAt = at
		if h.FingerprintAfter == "" || len(h.FingerprintAfter) != 64 || (i > 0 && (h.FingerprintBefore != hist[0].FingerprintAfter || h.FingerprintAfter != hist[0].FingerprintAfter)) {
			t.Errorf("history[%d] fingerprints: before %q after %q (first %q)", i, h.FingerprintBefore, h.FingerprintAfter, hist[0].FingerprintAfter)
		}
	}
	table, _, _ := as("viewer", "history", name)
	for _, s := range []string{"PRINCIPAL", "olga (operator)", "oscar (operator)", "INC-2 maintenance"} {
		if !strings.Contains(table, s) {
			t.Errorf("history table lacks %q:\n%s", s, table)
		}
	}
	// The audit trail is in the object store beside the registry.
	keys, err := srv.Store(t, "control", "sluice/registry/").List(context.Background(), "audit/"+name+"/")
	if err != nil || len(keys) != 3 {
		t.Fatalf("audit objects beside the registry: %v, %v", keys, err)
	}
}
