package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
)

// driver replay --run starts the query on the new checkpoint from the
// chosen offsets, on a real (kfake) broker over TCP: it reads exactly the
// records at and after them, and the new checkpoint records the replay's
// ticket.
func TestCLIReplayRunsFromTheChosenOffsets(t *testing.T) {
	const topic = "learning.progress"
	c := kafkatest.Start(t)
	c.CreateTopic(topic, 2)
	events := tiletest.Events(3, 400, 2*time.Second, 30*time.Second, 5)
	recs := make([]*kgo.Record, 0, len(events))
	for i, e := range events {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Key: []byte(e.Course), Value: []byte(e.JSON())})
	}
	c.Produce(recs...)

	dir := t.TempDir()
	b, err := os.ReadFile("../../examples/tile-kafka.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec := strings.NewReplacer("environment: production", "environment: lab",
		"bootstrapServers: kafka:9092", "bootstrapServers: "+c.Addr,
		"s3://warehouse/course_activity_tile/", "out", "s3://checkpoints/prod/course-activity-tile/", "cp1",
		"trigger: {processingTime: 1m}", "trigger: {availableNow: true}").Replace(string(b))
	write(t, filepath.Join(dir, "q.yaml"), spec)

	// Partition 0 from offset 150, partition 1 from its earliest: 50 + 200.
	r := runDriver(t, dir, "replay", "-f", "q.yaml", "--checkpoint", "cp2", "--starting-offsets", `{"learning.progress":{"0":150,"1":-2}}`,
		"--ticket", "INC-31", "--approved-by", "oncall@ops", "--run")
	r.expect(t, 0)
	var read int64
	for _, m := range regexp.MustCompile(`batch \d+: (\d+) rows`).FindAllStringSubmatch(r.stderr, -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		read += n
	}
	if read != 250 {
		t.Fatalf("the replay read %d records, want 250 (partition 0 from 150, partition 1 from earliest):\n%s", read, r.stderr)
	}
	ins := runDriver(t, dir, "checkpoint", "inspect", "cp2")
	ins.expect(t, 0)
	if !strings.Contains(ins.stdout, "approval           replay: ticket INC-31, by oncall@ops") {
		t.Fatalf("inspect cp2:\n%s", ins.stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "cp1")); err == nil {
		t.Fatal("the replay touched the old checkpoint")
	}
}
