package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/query"
)

// lockedBuffer collects a child's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// procCPU returns a process's user+system CPU time from /proc (Linux).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+2:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // USER_HZ is 100 on Linux
}

func buildBinary(ctx context.Context, dir, name string) (string, error) {
	bin := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/sluicehq/sluice/cmd/"+name)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s: %w", name, err)
	}
	return bin, nil
}

var listenAddrRE = regexp.MustCompile(`msg="driver listening" address=(\S+)`)

// partitionsScale runs `driver serve` and ScaleExecutors executor
// processes (one slot each) over a topic of ScalePartitions partitions.
func partitionsScale(ctx context.Context, pc PartitionsConfig, b *kafkaBroker, out io.Writer) error {
	dir := filepath.Join(pc.Dir, "scale")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	driverBin, err := buildBinary(ctx, dir, "driver")
	if err != nil {
		return err
	}
	execBin, err := buildBinary(ctx, dir, "executor")
	if err != nil {
		return err
	}
	parts := int32(pc.ScalePartitions)
	topic := partitionsTopic("scale", parts)
	if err := createTopic(ctx, b.addr, topic, parts); err != nil {
		return err
	}
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("bench-scale-token\n"), 0o600); err != nil {
		return err
	}
	spec := kafkaSpec(b.addr, topic, dir, 20000, nil)
	spec.ShufflePartitions = pc.ScaleExecutors
	spec.Trigger = query.Trigger{ProcessingTime: query.Duration(200 * time.Millisecond)}
	js, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	specFile := filepath.Join(dir, "query.json")
	if err := os.WriteFile(specFile, js, 0o644); err != nil {
		return err
	}
	progressFile := filepath.Join(dir, "progress.jsonl")
	var dlog lockedBuffer
	driver := exec.CommandContext(ctx, driverBin, "serve", "--listen", "127.0.0.1:0", "--token-file", token,
		"--query", specFile, "--min-executors", strconv.Itoa(pc.ScaleExecutors), "--progress-json", progressFile, "--registry", filepath.Join(dir, "registry"))
	driver.Stderr = &dlog
	if err := driver.Start(); err != nil {
		return err
	}
	var execs []*exec.Cmd
	defer func() {
		for _, e := range execs {
			_ = e.Process.Signal(syscall.SIGKILL)
			_ = e.Wait()
		}
		_ = driver.Process.Signal(syscall.SIGKILL)
		_ = driver.Wait()
	}()
	addr, err := waitFor(ctx, &dlog, listenAddrRE, 30*time.Second)
	if err != nil {
		return err
	}
	// Idle, no executor yet: the query polls the empty topic (Latest and
	// Next over every partition every 200 ms).
	pid := driver.Process.Pid
	cpu0, t0 := procCPU(pid), time.Now()
	time.Sleep(pc.ScaleIdle)
	polling := float64(procCPU(pid)-cpu0) / float64(time.Since(t0))
	startAll := time.Now()
	for i := range pc.ScaleExecutors {
		e := exec.CommandContext(ctx, execBin, "--driver", addr, "--token-file", token, "--slots", "1", "--log-level", "warn",
			"--data-dir", filepath.Join(dir, fmt.Sprintf("executor-%d", i)))
		if err := e.Start(); err != nil {
			return err
		}
		execs = append(execs, e)
	}
	registered := regexp.MustCompile(`msg="executor registered"`)
	deadline := time.Now().Add(5 * time.Minute)
	for len(registered.FindAllStringIndex(dlog.String(), -1)) < pc.ScaleExecutors {
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d executors registered:\n%s", len(registered.FindAllStringIndex(dlog.String(), -1)), pc.ScaleExecutors, tail(dlog.String(), 2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintf(out, "\nscale: driver and %d executor processes (1 slot each), topic of %d partitions, %d state partitions; all registered in %v\n",
		pc.ScaleExecutors, parts, pc.ScaleExecutors, time.Since(startAll).Round(time.Millisecond))

	// Idle: the executors heartbeat, the query polls an empty topic.
	time.Sleep(2 * time.Second) // registrations settle
	cpu0, t0 = procCPU(pid), time.Now()
	time.Sleep(pc.ScaleIdle)
	idle := float64(procCPU(pid)-cpu0) / float64(time.Since(t0))
	st, _ := procStatus(pid)
	fmt.Fprintf(out, "scale: idle driver, 200 ms trigger polling the empty topic of %d partitions: %.1f%% of a core with no executor, %.1f%% with %d executors heartbeating every 1 s: %.0f µs of driver CPU per heartbeat; RSS %.0f MiB\n",
		parts, 100*polling, 100*idle, pc.ScaleExecutors, max(0, idle-polling)*1e6/float64(pc.ScaleExecutors), float64(st.rss)/1024)

	ppCtx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	progress := make(chan seenProgress, 1024)
	go followProgress(ppCtx, progressFile, progress)
	if err := preloadExisting(ctx, b, topic, pc.ScaleRows, parts); err != nil {
		return err
	}
	var (
		read        int64
		lastCPU     = procCPU(pid)
		cpuPerBatch []float64
		rssPerBatch []float64
		msPerBatch  []float64
		left        bool
		leftAt      time.Time
		reassigned  atomic.Int64 // unix ns when the driver logged the new assignment
		afterLeave  time.Duration
	)
	after := regexp.MustCompile(fmt.Sprintf(`partitions assigned.*executors=%d `, pc.ScaleExecutors-pc.ScaleLeave))
	for read < int64(pc.ScaleRows) {
		var sp seenProgress
		select {
		case sp = <-progress:
		case <-time.After(3 * time.Minute):
			return fmt.Errorf("no batch for 3 minutes; read %d of %d:\n%s", read, pc.ScaleRows, tail(dlog.String(), 3000))
		}
		if sp.p.NumInputRows == 0 {
			continue
		}
		read += sp.p.NumInputRows
		c := procCPU(pid)
		st, _ := procStatus(pid)
		cpuPerBatch = append(cpuPerBatch, float64(c-lastCPU)/float64(time.Millisecond))
		rssPerBatch = append(rssPerBatch, float64(st.rss)/1024)
		msPerBatch = append(msPerBatch, float64(sp.p.DurationMs["triggerExecution"]))
		lastCPU = c
		if ra := reassigned.Load(); left && ra != 0 && afterLeave == 0 && sp.at.UnixNano() > ra {
			afterLeave = sp.at.Sub(leftAt)
		}
		if !left && read >= int64(pc.ScaleRows)/2 && pc.ScaleLeave > 0 {
			left, leftAt = true, time.Now()
			for _, e := range execs[:pc.ScaleLeave] {
				_ = e.Process.Signal(syscall.SIGTERM)
			}
			go func() {
				for ppCtx.Err() == nil {
					if loc := after.FindStringIndex(dlog.String()); loc != nil {
						reassigned.Store(time.Now().UnixNano())
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
		}
	}
	fmt.Fprintf(out, "scale: %d data batches of up to 20000 rows: driver CPU per batch median %.0f ms [%.0f-%.0f], batch median %.0f ms, driver RSS median %.0f MiB (max %.0f)\n",
		len(cpuPerBatch), median(cpuPerBatch), minOf(cpuPerBatch), maxOf(cpuPerBatch), median(msPerBatch), median(rssPerBatch), maxOf(rssPerBatch))
	if left {
		ra := "not seen"
		if at := reassigned.Load(); at != 0 {
			ra = time.Unix(0, at).Sub(leftAt).Round(time.Millisecond).String()
		}
		fmt.Fprintf(out, "scale: %d executors left at once (SIGTERM, drain): partitions reassigned to %d executors after %s; first batch on them done %v after the signal\n",
			pc.ScaleLeave, pc.ScaleExecutors-pc.ScaleLeave, ra, afterLeave.Round(time.Millisecond))
	}
	return nil
}

func preloadExisting(ctx context.Context, b *kafkaBroker, topic string, rows int, partitions int32) error {
	_, err := produceTile(ctx, b.addr, topic, generatorOptions(int64(rows), 0), rows, partitions)
	return err
}

func waitFor(ctx context.Context, l *lockedBuffer, re *regexp.Regexp, d time.Duration) (string, error) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if m := re.FindStringSubmatch(l.String()); m != nil {
			return m[1], nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "", fmt.Errorf("no %s within %v:\n%s", re, d, tail(l.String(), 2000))
}

func minOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	m := xs[0]
	for _, x := range xs {
		m = min(m, x)
	}
	return m
}

func maxOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	m := xs[0]
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
