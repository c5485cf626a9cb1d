package scripts

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// nobody is the user a root test runs the script as to see a non-root
// contributor's run (the test running as any other user is one).
const nobody = "65534"

// plan runs `scripts/test.sh --plan` with exactly env (plus HOME and a
// cache of its own), as a non-root user when asNonRoot: itself when it is
// not root, else nobody through setpriv. It returns the combined output
// and the exit code.
func plan(t *testing.T, asNonRoot bool, env ...string) (string, int) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: runs bash")
	}
	script, err := filepath.Abs("test.sh")
	if err != nil {
		t.Fatal(err)
	}
	home := sharedDir(t, 0o777)
	name, args := script, []string{"--plan"}
	if asNonRoot && os.Getuid() == 0 {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			t.Skipf("running as root without setpriv: cannot run the script as a non-root user: %v", err)
		}
		name, args = setpriv, append([]string{"--reuid=" + nobody, "--regid=" + nobody, "--clear-groups", script}, args...)
	}
	if !asNonRoot && os.Getuid() != 0 {
		t.Skip("the root case needs root")
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append([]string{"HOME=" + home, "SLUICE_CACHE=" + filepath.Join(home, "cache")}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out.String())
	}
	return out.String(), code
}

// sharedDir is a temporary directory the non-root user can reach
// (t.TempDir's parent is private to this user).
func sharedDir(t *testing.T, mode os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sluice-plan-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

func expect(t *testing.T, out string, code, want int, has ...string) {
	t.Helper()
	if code != want {
		t.Fatalf("exit %d, want %d:\n%s", code, want, out)
	}
	for _, h := range has {
		if !strings.Contains(out, h) {
			t.Errorf("output lacks %q:\n%s", h, out)
		}
	}
}

// minimalPath is a PATH holding only what --plan needs (bash, id,
// dirname): no chromium, no protoc, no sudo.
func minimalPath(t *testing.T) string {
	t.Helper()
	dir := sharedDir(t, 0o755)
	for _, tool := range []string{"bash", "id", "dirname"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s not found: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(dir, tool)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A contributor who is not root runs everything but the real-cluster test,
// which the plan names as skipped, with the reason, in the banner too.
// Under CI=true the same user is refused, naming the reason.
func TestNonRootOutsideCISkipsTheClusterTestLoudlyAndCIRefuses(t *testing.T) {
	path := "PATH=" + os.Getenv("PATH")
	out, code := plan(t, true, path)
	expect(t, out, code, 0,
		"real-cluster test (scripts/k8s-e2e.sh): SKIPPED", "it needs root", "NOT EVERYTHING RUNS ON THIS MACHINE",
		"go vet and go test of the module and of deploy/: run")

	out, code = plan(t, true, path, "CI=true")
	expect(t, out, code, 1, "the real-cluster test needs root", "CI=true requires it")
}

// Without chromium and without a way to install it (not root, no sudo),
// the status page tests are named as skipped outside CI; under CI=true
// the run is refused, naming chromium.
func TestMissingChromiumWithoutRootIsASkipOutsideCIAndARefusalInCI(t *testing.T) {
	path := "PATH=" + minimalPath(t)
	out, code := plan(t, true, path, "SLUICE_SKIP_K8S=1")
	expect(t, out, code, 0, "chromium:                   skip", "the status page tests (headless Chromium): chromium is not installed",
		"protoc:                     skip", "SLUICE_SKIP_K8S=1")

	out, code = plan(t, true, path, "CI=true")
	expect(t, out, code, 1, "the status page tests (headless Chromium) needs chromium (Debian's chromium)", "not root, no passwordless sudo")

	// SLUICE_SKIP_K8S=1 is a skip outside CI only.
	out, code = plan(t, false, "PATH="+os.Getenv("PATH"), "CI=true", "SLUICE_SKIP_K8S=1")
	expect(t, out, code, 1, "SLUICE_SKIP_K8S=1 is refused under CI=true")
}

// As root under CI the plan runs everything, the real cluster included.
func TestRootUnderCIRunsEverything(t *testing.T) {
	out, code := plan(t, false, "PATH="+os.Getenv("PATH"), "CI=true")
	expect(t, out, code, 0, "real-cluster test (scripts/k8s-e2e.sh): run (as root)")
	if strings.Contains(out, "SKIPPED") {
		t.Errorf("root under CI skips something:\n%s", out)
	}
}
