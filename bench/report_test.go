package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestReportWritesTargetsWithStatusAndPlots(t *testing.T) {
	gen := &Pair{Name: "generator, in process"}
	gen.add(1e6, 0.9e6, 500, 550) // ratio 0.90, overhead 10 %
	gen.add(1e6, 0.8e6, 500, 700) // ratio 0.80, overhead 40 %
	gen.add(1e6, 0.95e6, 500, 560)
	file := &Pair{Name: "file source, in process"}
	file.add(1e6, 0.5e6, 500, 1000)
	proc := &Pair{Name: "file source, whole process"}
	proc.add(1e6, 0.9e6, 500, 550)
	proc.addBare(1.2e6, 400) // 0.75 of the bare loop
	res := &Results{Rows: 100, Runs: 3, GenPair: gen, FilePair: file, ProcessPair: proc,
		Scaling: []ScaleSeries{{Name: "courses", Points: []ScalePoint{{X: 100, Pair: gen}, {X: 10000, Pair: file}}}},
		Groups:  &GroupsResult{BytesPerGroup: 150},
	}
	dir := t.TempDir()
	rep := &Report{Machine: describeMachine(), Results: res, Targets: targets(res), Table: tableLines(res, config{})}
	rep.Machine.Load = []float64{0.5, 0.7, 0.6}
	if err := writeReport(dir, rep, "engine top\n", "reference top\n"); err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, tg := range rep.Targets {
		status[tg.Name] = tg.Status
	}
	for name, want := range map[string]string{
		"engine / fair reference, generator, in process":                                        "met",    // median 0.90
		"engine / fair reference, file source, in process":                                      "missed", // 0.50
		"engine / fair reference, Kafka (kfake), in process":                                    "not measured",
		"engine / fair reference, file source, whole `driver run` process":                      "met",
		"engine / bare loop, file source, whole `driver run` process":                           "missed", // 0.75
		"engine / bare loop, Kafka (kfake), whole `driver run` process":                         "not measured",
		"exactly-once overhead, CPU per event, generator, in process":                           "met", // median 12 %
		"exactly-once overhead, CPU per event, file source, in process":                         "missed",
		"bytes per open group in memory":                                                        "met",
		"engine throughput from the fewest to the most distinct courses (scaling), 100 → 10000": "missed", // 0.5 / 0.9
	} {
		if status[name] != want {
			t.Errorf("target %q: status %q, want %q", name, status[name], want)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Targets", "| engine / fair reference, file source, in process | ≥ 0.85 | 0.50 [0.50–0.50] | missed |", "engine top", "ratios.png", "scaling-courses.png",
		"**the bare loop**", "file source, whole process: engine / bare loop (within each round) | 0.75 [0.75–0.75]"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	var back map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	for _, png := range []string{"ratios.png", "cpu.png", "load.png", "scaling-courses.png"} {
		b, err := os.ReadFile(filepath.Join(dir, png))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), "\x89PNG") {
			t.Errorf("%s is not a PNG", png)
		}
	}
}

func TestParseNoDataBench(t *testing.T) {
	out := "goos: linux\nBenchmarkNoDataBatch/local-2         \t      60\t  12345 ns/op\t         1.000 ms/no-data-batch\t         5.000 ms/no-data-batch-closing-a-window\n" +
		"BenchmarkNoDataBatch/s3-2-executors-2 \t      60\t  12345 ns/op\t         5.000 ms/no-data-batch\t        15.00 ms/no-data-batch-closing-a-window\nPASS\n"
	got := parseNoDataBench(out)
	if len(got) != 2 || got[0] != (NoDataS3{"local", 1, 5}) || got[1] != (NoDataS3{"s3-2-executors", 5, 15}) {
		t.Errorf("parsed %+v", got)
	}
}

func TestReferenceProcessCountsWhatTheInProcessReferenceDoes(t *testing.T) {
	const n = 5000
	gopts := generatorOptions(n, 0)
	gopts.Courses = processCourses
	src := filepath.Join(t.TempDir(), "lines")
	if _, err := writeFiles(src, generateLines(gopts, n), 1000); err != nil {
		t.Fatal(err)
	}
	in, read, err := refFiles(fairRef, src, 2)
	if err != nil || read != n {
		t.Fatalf("in process: %d rows, %v", read, err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pr, err := launchProcess(context.Background(), []string{refProcessEnv + "=" + src}, self)
	if err != nil {
		t.Fatal(err)
	}
	want := "rows 5000 windows " + itoa(len(in.Counts))
	if got := lastLine(pr.Stdout, "rows "); got != want {
		t.Errorf("reference process printed %q, want %q", got, want)
	}
	if pr.MaxRSSKiB <= 0 || pr.CPU <= 0 {
		t.Errorf("launcher reported peak RSS %d KiB, CPU %v", pr.MaxRSSKiB, pr.CPU)
	}
	bare, err := launchProcess(context.Background(), []string{refProcessEnv + "=" + src, refBareEnv + "=1"}, self)
	if err != nil {
		t.Fatal(err)
	}
	if got := lastLine(bare.Stdout, "rows "); got != want {
		t.Errorf("bare loop process printed %q, want %q", got, want)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
