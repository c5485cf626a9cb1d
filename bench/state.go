package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/objstore"
	"github.com/sluicehq/sluice/statestore"
)

// The state measurement (-only state): one state partition holding N
// (window, key) groups on the pebble provider, in an executor-like child
// process limited by GOMEMLIMIT. Phase "write" commits the groups in
// batches (the last commit writes the snapshot); phase "restore" is a
// fresh executor (an empty data dir) that loads the snapshot, checks the
// row count and commits one more batch. Each phase is its own process, so
// its peak RSS (VmHWM) is its own. Phase "restore-memory" loads the same
// checkpoint with the in-memory provider, for contrast.

// StateConfig is the command line of the state measurement.
type StateConfig struct {
	Groups      []int // groups per run
	Batch       int   // groups per committed batch
	MemLimit    string
	MemoryToo   bool
	ValueBytes  int
	KeepWorkDir bool
}

// statePhaseEnv makes this program a state phase child (see init).
const statePhaseEnv = "SLUICEBENCH_STATE_PHASE"

// StatePhase is what a child reports.
type StatePhase struct {
	Phase      string  `json:"phase"`
	Groups     int     `json:"groups"`
	Rows       int64   `json:"rows"`
	Seconds    float64 `json:"seconds"`
	PeakRSSKiB int64   `json:"peakRssKiB"`
	SnapBytes  int64   `json:"snapshotBytes,omitempty"`
	LocalBytes int64   `json:"localBytes,omitempty"`
	Err        string  `json:"err,omitempty"`
}

func init() {
	phase := os.Getenv(statePhaseEnv)
	if phase == "" {
		return
	}
	groups, _ := strconv.Atoi(os.Getenv("SLUICEBENCH_STATE_GROUPS"))
	batch, _ := strconv.Atoi(os.Getenv("SLUICEBENCH_STATE_BATCH"))
	vbytes, _ := strconv.Atoi(os.Getenv("SLUICEBENCH_STATE_VALUE_BYTES"))
	res := runStatePhase(context.Background(), phase, os.Getenv("SLUICEBENCH_STATE_DIR"), groups, batch, vbytes)
	res.PeakRSSKiB = vmHWM()
	json.NewEncoder(os.Stdout).Encode(res)
	if res.Err != "" {
		os.Exit(1)
	}
	os.Exit(0)
}

// stateKey is group i's key: a window start and a course id, as the
// tile's (window, course) groups are, spread over 1,000 windows.
func stateKey(dst []byte, i int) []byte {
	dst = binary.BigEndian.AppendUint64(dst[:0], uint64(1_767_225_600_000_000+int64(i%1000)*300_000_000))
	return fmt.Appendf(dst, "course-%09d", i)
}

func stateValue(dst []byte, i, n int) []byte {
	dst = dst[:0]
	for len(dst) < n {
		dst = binary.BigEndian.AppendUint64(dst, uint64(i))
	}
	return dst[:n]
}

func runStatePhase(ctx context.Context, phase, dir string, groups, batch, vbytes int) StatePhase {
	res := StatePhase{Phase: phase, Groups: groups}
	fail := func(err error) StatePhase { res.Err = err.Error(); return res }
	cp, err := objstore.NewFS(filepath.Join(dir, "checkpoint"))
	if err != nil {
		return fail(err)
	}
	batches := (groups + batch - 1) / batch
	start := time.Now()
	switch phase {
	case "write":
		// Every batch adds new groups; the last commit (version batches)
		// writes the snapshot.
		pb, err := statestore.NewPebble(cp, statestore.PebbleOptions{DataDir: filepath.Join(dir, "write-data"), SnapshotInterval: batches})
		if err != nil {
			return fail(err)
		}
		defer pb.Close()
		var k, v []byte
		for b := 0; b < batches; b++ {
			st, err := pb.Open(ctx, 0, statestore.Version(b))
			if err != nil {
				return fail(err)
			}
			for i := b * batch; i < min(groups, (b+1)*batch); i++ {
				k, v = stateKey(k, i), stateValue(v, i, vbytes)
				if err := st.Put(k, v); err != nil {
					return fail(err)
				}
			}
			if _, err := st.Commit(ctx, ""); err != nil {
				return fail(err)
			}
		}
		res.Rows = int64(groups)
		res.LocalBytes = dirBytes(filepath.Join(dir, "write-data"))
	case "restore", "restore-memory":
		var prov statestore.Provider
		if phase == "restore" {
			pb, err := statestore.NewPebble(cp, statestore.PebbleOptions{DataDir: filepath.Join(dir, "restore-data"), SnapshotInterval: batches})
			if err != nil {
				return fail(err)
			}
			prov = pb
		} else {
			prov = statestore.NewMemory(cp, statestore.MemoryOptions{SnapshotInterval: 1 << 30})
		}
		defer prov.Close()
		st, err := prov.Open(ctx, 0, statestore.Version(batches))
		if err != nil {
			return fail(err)
		}
		res.Rows = st.NumRows()
		// One more batch on the restored state: update a few groups and
		// add one, as the next batch would.
		var k, v []byte
		for i := 0; i < 1000; i++ {
			k, v = stateKey(k, i*(groups/1000+1)%groups), stateValue(v, i+1, vbytes)
			if err := st.Put(k, v); err != nil {
				return fail(err)
			}
		}
		if err := st.Put([]byte("new-group"), []byte("1")); err != nil {
			return fail(err)
		}
		if _, err := st.Commit(ctx, ""); err != nil {
			return fail(err)
		}
		if phase == "restore" {
			res.LocalBytes = dirBytes(filepath.Join(dir, "restore-data"))
		}
	default:
		return fail(fmt.Errorf("unknown phase %q", phase))
	}
	res.Seconds = time.Since(start).Seconds()
	if fi, err := os.Stat(filepath.Join(dir, "checkpoint", "state", "0", "0", strconv.Itoa(batches)+".snapshot")); err == nil {
		res.SnapBytes = fi.Size()
	}
	return res
}

func dirBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// vmHWM is this process's peak resident set size in KiB, from
// /proc/self/status (0 where there is none).
func vmHWM() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// runState runs the phases for each group count and prints a table.
func runState(ctx context.Context, c StateConfig, dir string, out io.Writer) ([]StatePhase, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "state: one pebble partition, %d groups per batch, %d-byte values, GOMEMLIMIT=%s per phase process\n", c.Batch, c.ValueBytes, c.MemLimit)
	var all []StatePhase
	for _, n := range c.Groups {
		wd := filepath.Join(dir, fmt.Sprintf("state-%d", n))
		if err := os.MkdirAll(wd, 0o755); err != nil {
			return nil, err
		}
		phases := []string{"write", "restore"}
		if c.MemoryToo {
			phases = append(phases, "restore-memory")
		}
		for _, ph := range phases {
			cmd := exec.CommandContext(ctx, self)
			cmd.Env = append(os.Environ(), statePhaseEnv+"="+ph, "SLUICEBENCH_STATE_DIR="+wd,
				"SLUICEBENCH_STATE_GROUPS="+strconv.Itoa(n), "SLUICEBENCH_STATE_BATCH="+strconv.Itoa(c.Batch),
				"SLUICEBENCH_STATE_VALUE_BYTES="+strconv.Itoa(c.ValueBytes), "GOMEMLIMIT="+c.MemLimit)
			cmd.Stderr = os.Stderr
			b, runErr := cmd.Output()
			var r StatePhase
			if err := json.Unmarshal(b, &r); err != nil {
				return all, fmt.Errorf("state phase %s of %d groups: %v (output %q)", ph, n, runErr, b)
			}
			if r.Err != "" {
				return all, fmt.Errorf("state phase %s of %d groups: %s", ph, n, r.Err)
			}
			if r.Rows != int64(n) {
				return all, fmt.Errorf("state phase %s of %d groups: %d rows", ph, n, r.Rows)
			}
			all = append(all, r)
			fmt.Fprintf(out, "  %-15s %10d groups  %7.1f s  peak RSS %6.0f MiB  snapshot %6.0f MiB  local db %6.0f MiB\n",
				ph, n, r.Seconds, float64(r.PeakRSSKiB)/1024, float64(r.SnapBytes)/(1<<20), float64(r.LocalBytes)/(1<<20))
		}
		if !c.KeepWorkDir {
			os.RemoveAll(wd)
		}
	}
	return all, nil
}

// pebbleTargetName is the report's pebble target in the targets table.
const pebbleTargetName = "10 M groups on pebble (one partition, GOMEMLIMIT per phase) within a 1 GiB RSS: write, restore on a fresh executor"

// runStateMode is the state measurement as a report section: bytes per
// group on pebble (local database and snapshot) at each size, each
// phase's time and peak RSS, and the 10 M-group target.
func runStateMode(ctx context.Context, e *ModeEnv) (*Section, error) {
	c := e.Config.state
	c.KeepWorkDir = e.Config.dir != ""
	phases, err := runState(ctx, c, e.Dir, e.Out)
	return stateSection(c, phases), err
}

// stateSection is the state measurement's report section.
func stateSection(c StateConfig, phases []StatePhase) *Section {
	sec := &Section{
		Title: "State on pebble: bytes per group, batch commits, snapshot, restore (issues 13 and 14)",
		Text: fmt.Sprintf("One state partition of the pebble provider holding N (window, course) groups (%d-byte aggregates), each phase its own process with GOMEMLIMIT=%s, its peak RSS its own VmHWM. **write** commits the groups in batches of %d (the last commit writes the snapshot); **restore** is a fresh executor (empty data directory) loading that snapshot from the checkpoint, checking the row count and committing one more batch; **restore-memory** loads the same checkpoint with the in-memory provider (its peak RSS growth per group is the in-memory provider's bytes per group). Bytes per group on pebble: the snapshot object (the durable encoding) and the local database's files (after write: only what pebble flushed from its 32 MiB memtable; after restore: the snapshot ingested as an SST). Peak RSS growth per group is taken against the smallest size, so the process's own memory cancels out. Sizes run: %s.",
			c.ValueBytes, c.MemLimit, c.Batch, joinInts(c.Groups)),
		Table: &Table{Header: []string{"groups", "phase", "batches", "time s", "s per batch", "peak RSS MiB", "peak RSS growth per group over the smallest size, bytes", "snapshot MiB", "snapshot bytes/group", "local db MiB", "local db bytes/group"}},
		Data:  phases,
	}
	// The smallest size's peak per phase: growth per group is taken
	// against it, so the process's own memory cancels out.
	smallest := map[string]StatePhase{}
	for _, p := range phases {
		if q, ok := smallest[p.Phase]; !ok || p.Groups < q.Groups {
			smallest[p.Phase] = p
		}
	}
	var order []string
	bySize := map[string]*Series{}
	largest, largestPeak := 0, int64(0)
	for _, p := range phases {
		g := float64(p.Groups)
		db, dbPer := "–", "–"
		if p.LocalBytes > 0 {
			db, dbPer = fmt.Sprintf("%.1f", float64(p.LocalBytes)/(1<<20)), fmt.Sprintf("%.0f", float64(p.LocalBytes)/g)
		}
		nb := 1
		if p.Phase == "write" {
			nb = (p.Groups + c.Batch - 1) / c.Batch
		}
		batches := fmt.Sprint(nb)
		growth := "–"
		if q := smallest[p.Phase]; q.Groups < p.Groups {
			growth = fmt.Sprintf("%.0f", float64(p.PeakRSSKiB-q.PeakRSSKiB)*1024/float64(p.Groups-q.Groups))
		}
		sec.Table.Rows = append(sec.Table.Rows, []string{fmt.Sprint(p.Groups), p.Phase, batches, fmt.Sprintf("%.1f", p.Seconds), fmt.Sprintf("%.2f", p.Seconds/float64(nb)), fmt.Sprintf("%.0f", float64(p.PeakRSSKiB)/1024), growth,
			fmt.Sprintf("%.1f", float64(p.SnapBytes)/(1<<20)), fmt.Sprintf("%.0f", float64(p.SnapBytes)/g), db, dbPer})
		s := bySize[p.Phase]
		if s == nil {
			s = &Series{Name: p.Phase}
			bySize[p.Phase] = s
			order = append(order, p.Phase)
		}
		s.X, s.Y = append(s.X, g), append(s.Y, float64(p.PeakRSSKiB)/1024)
		if p.Phase == "write" || p.Phase == "restore" {
			if p.Groups > largest {
				largest, largestPeak = p.Groups, 0
			}
			if p.Groups == largest {
				largestPeak = max(largestPeak, p.PeakRSSKiB)
			}
		}
		if p.Phase == "restore" {
			sec.Rows = append(sec.Rows, Row{Name: fmt.Sprintf("pebble, %d groups: local db / snapshot bytes per group; restore on a fresh executor s, peak RSS MiB", p.Groups),
				Value: fmt.Sprintf("%s / %.0f; %.1f s, %.0f MiB", dbPer, float64(p.SnapBytes)/g, p.Seconds, float64(p.PeakRSSKiB)/1024)})
		}
	}
	var rss []Series
	for _, name := range order {
		rss = append(rss, *bySize[name])
	}
	if len(phases) > 0 {
		sec.Plots = []Plot{{File: "state-rss.png", Title: "peak RSS of each state phase against groups (pebble, GOMEMLIMIT " + c.MemLimit + ")", XLabel: "groups (log scale)", YLabel: "peak RSS MiB", LogX: true, Series: rss}}
	}
	t := Target{Name: pebbleTargetName, Want: "≤ 1024 MiB peak RSS in every phase"}
	switch {
	case largest >= 10_000_000:
		t.Measured = fmt.Sprintf("%.0f MiB at %d groups", float64(largestPeak)/1024, largest)
		if largestPeak <= 1024*1024 {
			t.Status, t.Gap = "met", fmt.Sprintf("%.0f MiB under", 1024-float64(largestPeak)/1024)
		} else {
			t.Status, t.Gap = "missed", fmt.Sprintf("%.0f MiB over", float64(largestPeak)/1024-1024)
			t.Why = "the write phase's peak follows the batch size (a batch's changes stay in memory until it commits) plus pebble's memtable and block cache; run `go run ./bench -only state` with a smaller -state-batch to see whether the batch or pebble holds it"
		}
	case largest > 0:
		t.Status = "not measured"
		t.Measured = fmt.Sprintf("only up to %d groups in this run: %.0f MiB", largest, float64(largestPeak)/1024)
	default:
		t.Status = "not measured"
	}
	sec.Targets = []Target{t}
	return sec
}

func joinInts(xs []int) string {
	var ss []string
	for _, x := range xs {
		ss = append(ss, strconv.Itoa(x))
	}
	return strings.Join(ss, ", ")
}
