package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/progress"
)

func TestOffsetPositionReadsKafkaAndGeneratorOffsets(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want int64
		ok   bool
	}{
		{`{"events":{"0":10,"1":32}}`, 42, true},
		{`{"a":{"0":1},"b":{"3":2}}`, 3, true},
		{`{"row":500,"startedAtMs":1}`, 500, true},
		{`{"seen":["x.jsonl"],"newestMs":5}`, 0, false},
		{``, 0, false},
	} {
		got, ok := offsetPosition(json.RawMessage(c.raw))
		if got != c.want || ok != c.ok {
			t.Errorf("offsetPosition(%s) = %d, %v; want %d, %v", c.raw, got, ok, c.want, c.ok)
		}
	}
}

func TestDrainBarCountsOffsetsDoneOfTheRunsTarget(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	var b drainBar
	batch := func(start, end, latest string, rows int64) *progress.Report {
		return &progress.Report{Timestamp: t0.Format(time.RFC3339Nano), NumInputRows: rows, Sources: []progress.Source{{
			StartOffset: json.RawMessage(start), EndOffset: json.RawMessage(end), LatestOffset: json.RawMessage(latest)}}}
	}
	b.observe(batch(`{"t":{"0":100,"1":100}}`, `{"t":{"0":350,"1":350}}`, `{"t":{"0":1100,"1":1100}}`, 500), t0.Add(time.Second))
	got := b.line(t0.Add(time.Second), 10)
	if want := "[==        ]  25% 500/2000 offsets, 500 rows/s, ETA 3s"; got != want {
		t.Fatalf("after batch 0:\n got %q\nwant %q", got, want)
	}
	b.observe(batch(`{"t":{"0":350,"1":350}}`, `{"t":{"0":1100,"1":1100}}`, `{"t":{"0":1100,"1":1100}}`, 1500), t0.Add(4*time.Second))
	got = b.line(t0.Add(4*time.Second), 10)
	if !strings.HasPrefix(got, "[==========] 100% 2000/2000 offsets") || !strings.HasSuffix(got, "ETA 0s") {
		t.Fatalf("at the end: %q", got)
	}
}

func TestDrainBarWithoutNumericOffsetsShowsRowsOnly(t *testing.T) {
	t0 := time.Unix(0, 0)
	var b drainBar
	b.observe(&progress.Report{NumInputRows: 2000, Sources: []progress.Source{{StartOffset: json.RawMessage(`{"seen":[]}`)}}}, t0)
	if got := b.line(t0.Add(2*time.Second), 10); got != "2000 rows, 1.0k rows/s" {
		t.Fatalf("got %q", got)
	}
}
