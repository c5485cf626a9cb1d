package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil/validatecases"
)

// execute runs the driver's command tree in this process.
func execute(args ...string) (stdout, stderr string, err error) {
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err = root.Execute()
	return out.String(), errb.String(), err
}

// For every spec the validation tests refuse, explain refuses it with the
// message run gives, and creates nothing.
func TestExplainRefusesWhatRunRefusesWithTheSameMessage(t *testing.T) {
	dir := t.TempDir()
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	n := 0
	validatecases.Each(t, func(t *testing.T, pos string, data []byte, want string) {
		if strings.TrimSpace(want) == "ok" {
			return
		}
		n++
		f := filepath.Join(dir, "q.yaml")
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
		before := entries(t, dir)
		_, _, runErr := execute("run", "-f", f)
		_, _, explainErr := execute("explain", "-f", f)
		if runErr == nil || explainErr == nil {
			t.Fatalf("%s: run error %v, explain error %v: both must refuse", pos, runErr, explainErr)
		}
		if runErr.Error() != explainErr.Error() {
			t.Fatalf("%s: run said\n%v\nexplain said\n%v", pos, runErr, explainErr)
		}
		if after := entries(t, dir); strings.Join(after, " ") != strings.Join(before, " ") {
			t.Fatalf("%s: a refused spec created files: %v", pos, after)
		}
	})
	if n < 50 {
		t.Fatalf("only %d invalid specs checked", n)
	}
}

func TestExplainPrintsThePlanAndNotesWhatRunWouldRefuse(t *testing.T) {
	dir := t.TempDir()
	labSpec(t, dir)
	r := runDriver(t, dir, "explain", "-f", "q.yaml")
	r.expect(t, 0, `note: driver run would refuse this query now:`, `source.file.path: "./lab/in" is not a readable directory`)
	golden, err := os.ReadFile("../../explain/testdata/tile-file.golden")
	if err != nil {
		t.Fatal(err)
	}
	if r.stdout != string(golden) {
		t.Fatalf("explain printed\n%s\nwant explain/testdata/tile-file.golden", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "lab")); !os.IsNotExist(err) {
		t.Fatalf("explain created ./lab: %v", err)
	}
	os.MkdirAll(filepath.Join(dir, "lab/in"), 0o755)
	r = runDriver(t, dir, "explain", "-f", "q.yaml")
	r.expect(t, 0)
	if r.stderr != "" {
		t.Fatalf("explain of a query run would accept printed on stderr:\n%s", r.stderr)
	}
	runDriver(t, dir, "explain").expect(t, 1, "explain: -f QUERY.yaml is required")
}

// Refusals that come from the source's own option checks, not Validate:
// explain gives run's message for them too.
func TestExplainRefusesBadKafkaOptionsAsRunDoes(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../../examples/tile-kafka.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec := strings.Replace(string(b), "    minPartitions: 8\n", "    minPartitions: 8\n    kafka.group.id: mine\n", 1)
	f := filepath.Join(dir, "q.yaml")
	os.WriteFile(f, []byte(spec), 0o644)
	_, _, runErr := execute("run", "-f", f)
	_, _, explainErr := execute("explain", "-f", f)
	if runErr == nil || explainErr == nil || runErr.Error() != explainErr.Error() || !strings.Contains(runErr.Error(), "group.id") {
		t.Fatalf("run: %v\nexplain: %v\nwant the same refusal of kafka.group.id", runErr, explainErr)
	}
}
