package e2e

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// bins holds the binaries TestMain built.
var bins struct {
	driver   string
	executor string
}

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Every test here runs the binaries as processes: the fast loop
		// (go test -short, scripts/test.sh --quick) builds nothing and
		// skips them all; the full suite runs them.
		fmt.Fprintln(os.Stderr, "e2e: every test runs processes; skipped under -short")
		if err := flag.Set("test.skip", "."); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "sluice-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins.driver = filepath.Join(dir, "driver")
	bins.executor = filepath.Join(dir, "executor")
	for bin, pkg := range map[string]string{bins.driver: "./cmd/driver", bins.executor: "./cmd/executor"} {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Dir = ".."
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", pkg+":", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Proc is a handle on one process run of a binary.
type Proc struct {
	t    testing.TB
	name string
	bin  string
	args []string
	env  []string
	dir  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	logs bytes.Buffer
	done chan struct{}
	err  error
}

// NewProc prepares a process; Start runs it. Each run gets a fresh working
// directory (another node), unless dir is set.
func NewProc(t testing.TB, name, bin string, args ...string) *Proc {
	return &Proc{t: t, name: name, bin: bin, args: args}
}

// Env adds environment variables (KEY=VALUE) for the next Start.
func (p *Proc) Env(kv ...string) *Proc { p.env = append(p.env, kv...); return p }

// Start runs the process in a fresh working directory.
func (p *Proc) Start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dir = p.t.TempDir()
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Dir = p.dir
	p.cmd.Env = append(os.Environ(), p.env...)
	p.cmd.Stdout = &lockedWriter{mu: &p.mu, w: &p.logs}
	p.cmd.Stderr = p.cmd.Stdout
	p.done = make(chan struct{})
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	go func() {
		err := p.cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	pid := p.cmd.Process.Pid
	p.t.Cleanup(func() {
		p.Kill()
		if p.t.Failed() { // every process's last lines, not only those the failing check printed
			p.t.Logf("--- last lines of %s (pid %d):\n%s", p.name, pid, lastLines(p.Logs(), 40))
		}
	})
}

// lastLines returns the last n lines of s that are not DEBUG records.
func lastLines(s string, n int) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if !strings.Contains(l, "level=DEBUG") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep[max(0, len(keep)-n):], "\n")
}

// Wait waits for the process to exit (up to timeout) and returns its exit
// error.
func (p *Proc) Wait(timeout time.Duration) error {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.Kill()
		p.t.Fatalf("%s did not exit within %v; logs:\n%s", p.name, timeout, p.Logs())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Stop sends SIGTERM and waits.
func (p *Proc) Stop(timeout time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	return p.Wait(timeout)
}

// Kill sends SIGKILL (no-op if exited).
func (p *Proc) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Logs returns what the process wrote to stdout and stderr.
func (p *Proc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// WaitForLog polls the logs until they contain s.
func (p *Proc) WaitForLog(s string, timeout time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if strings.Contains(p.Logs(), s) {
			return
		}
		select {
		case <-p.done:
			if strings.Contains(p.Logs(), s) {
				return
			}
			p.t.Fatalf("%s exited before logging %q; logs:\n%s", p.name, s, p.Logs())
		case <-time.After(20 * time.Millisecond):
		}
	}
	p.t.Fatalf("%s did not log %q within %v; logs:\n%s", p.name, s, timeout, p.Logs())
}

// killedBySignal reports whether err is an exit by SIGKILL.
func killedBySignal(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
