package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/query"
)

// The Kafka harness on a small backlog: the engine reads every record the
// raw loop reads, and its emitted windows carry the raw loop's counts;
// emitted plus open windows are exactly the raw loop's. No timing is
// asserted.
func TestKafkaEngineOutputMatchesTheReference(t *testing.T) {
	const n, perBatch, partitions = 20_000, 6_000, 8
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := kafkaTopic(n)
	b, err := startKafka(partitions, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	// 100 ms of event time per row: about 33 minutes, seven windows, of
	// which the final watermark closes four.
	gopts := generatorOptions(n, 0)
	gopts.RowsPerSecond, gopts.EventTimePerRow = 10, query.Duration(100*time.Millisecond)
	if _, err := produceTile(ctx, b.addr, topic, gopts, n, partitions); err != nil {
		t.Fatal(err)
	}
	ends, err := endOffsets(ctx, b.addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(ends) != partitions {
		t.Fatalf("topic has %d partitions, want %d", len(ends), partitions)
	}
	for p, e := range ends {
		if e != n/partitions {
			t.Errorf("partition %d ends at %d, want %d (round-robin)", p, e, n/partitions)
		}
	}
	// Three readers over the partitions: the merge is exercised with an
	// uneven share.
	raw, read, err := refKafka(ctx, fairRef, b.addr, topic, ends, 3)
	if err != nil {
		t.Fatal(err)
	}
	if read != n {
		t.Fatalf("reference read %d records, want %d", read, n)
	}
	var total int64
	for _, c := range raw.Counts {
		total += c
	}
	if total != n {
		t.Fatalf("reference counted %d events, want %d", total, n)
	}

	bare, read, err := refKafka(ctx, bareRef, b.addr, topic, ends, 3)
	if err != nil {
		t.Fatal(err)
	}
	if read != n {
		t.Fatalf("bare loop read %d records, want %d", read, n)
	}
	sameCounts(t, "kafka bare loop", bare, raw)
	// As processes (the whole-process pair), both count the same.
	job, err := json.Marshal(kafkaRefJob{Addr: b.addr, Topic: topic, Ends: ends})
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range [][]string{{refKafkaEnv + "=" + string(job)}, {refKafkaEnv + "=" + string(job), refBareEnv + "=1"}} {
		pr, err := launchProcess(ctx, env, self)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := lastLine(pr.Stdout, "rows "), fmt.Sprintf("rows %d windows %d", n, len(raw.Counts)); got != want {
			t.Errorf("%v: reference process printed %q, want %q", env[1:], got, want)
		}
	}

	er, err := runEngine(ctx, kafkaSpec(b.addr, topic, filepath.Join(t.TempDir(), "kafka"), perBatch, nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	checkAgainstRawLoop(t, er, raw, n)
	checkAgainstRawLoop(t, er, bare, n)
	if got := int(er.OutputRows + er.StateRows); got != len(raw.Counts) {
		t.Errorf("engine has %d windows (emitted + open), reference %d", got, len(raw.Counts))
	}
	data := collect(er.Batches, false)
	if data.count != 4 {
		t.Errorf("%d data batches, want 4 of at most %d records", data.count, perBatch)
	}
	for _, bt := range er.Batches {
		if bt.Progress.NumInputRows > perBatch {
			t.Errorf("batch %d read %d records, above maxOffsetsPerTrigger %d", bt.Progress.BatchID, bt.Progress.NumInputRows, perBatch)
		}
	}
}
