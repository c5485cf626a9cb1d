package driver

import (
	"os/exec"
	"strings"
	"testing"
)

// deps lists the packages pkg links (go list -deps), from the module root.
func deps(t *testing.T, pkg string) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr)
	}
	m := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		m[p] = true
	}
	return m
}

const mod = "github.com/sluicehq/sluice/"

// The layout by process: the executor binary links nothing only the
// driver runs (the batch loop, dispatch, the service, the registry), and
// observability (monitor, metrics, web, progress) does not import the
// batch loop, only its report.
func TestTheExecutorBinaryAndObservabilityDoNotLinkTheBatchLoop(t *testing.T) {
	driverOnly := []string{"driver/microbatch", "driver/dispatch", "driver/service", "driver/registry", "driver/policy"}
	for pkg, forbidden := range map[string][]string{
		"../cmd/executor": driverOnly,
		"../executor":     driverOnly,
		"../task":         driverOnly,
		"../monitor":      {"driver/microbatch", "driver/dispatch", "driver/service"},
		"../metrics":      {"driver/microbatch", "driver/dispatch", "driver/service"},
		"../web":          {"driver/microbatch", "driver/dispatch", "driver/service"},
		"../progress":     {"driver/microbatch", "driver/dispatch", "driver/service", "task", "executor"},
	} {
		linked := deps(t, pkg)
		if len(linked) < 3 {
			t.Fatalf("go list -deps %s listed %d packages: the check would pass on nothing", pkg, len(linked))
		}
		for _, f := range forbidden {
			if linked[mod+f] {
				t.Errorf("%s links %s", strings.TrimPrefix(pkg, "../"), f)
			}
		}
	}
	// And the check can fail: the driver binary links the loop.
	if !deps(t, "../cmd/driver")[mod+"driver/microbatch"] {
		t.Fatal("cmd/driver does not link driver/microbatch: the check above tests nothing")
	}
}
