//go:build linux

package main

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A child started from a large process reports the parent's peak as its
// own ru_maxrss on Linux; the launcher reports its child's own peak.
func TestLauncherReportsTheChildsOwnPeakNotThisProcesses(t *testing.T) {
	big := make([]byte, 300<<20)
	for i := range len(big) / 4096 {
		big[i*4096] = 1
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	direct := exec.Command("/bin/sh", "-c", "true")
	if err := direct.Run(); err != nil {
		t.Fatal(err)
	}
	t.Logf("direct child ru_maxrss %d KiB (this process holds 300 MiB)", childMaxRSS(direct.ProcessState))

	cmd := exec.Command(self, "/bin/sh", "-c", "true")
	cmd.Env = append(os.Environ(), rssLaunchEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("launcher: %v", err)
	}
	var pid, maxrss int64 = -1, -1
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if v, ok := strings.CutPrefix(l, "pid "); ok {
			pid, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(l, "maxrss "); ok {
			maxrss, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if pid <= 0 || maxrss <= 0 {
		t.Fatalf("launcher printed %q, want pid and maxrss lines", out)
	}
	if maxrss > 100<<10 {
		t.Errorf("launched sh reports ru_maxrss %d KiB: the launcher's parent's 300 MiB leaked into it", maxrss)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	if ru.Maxrss < 300<<10 {
		t.Errorf("this process peaked at %d KiB, the test wants at least 300 MiB to prove anything", ru.Maxrss)
	}
	runtime.KeepAlive(big)
}
