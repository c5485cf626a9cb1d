package main

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/query"
)

func TestContractRetentionIsRecoveryPlusWatermarkPlusOutage(t *testing.T) {
	f := false
	spec := query.Spec{
		Name:               "tile",
		Source:             query.Source{Kafka: &query.KafkaSource{BootstrapServers: "k:9092", Subscribe: "events", MaxOffsetsPerTrigger: 1000, FailOnDataLoss: &f}, Schema: []query.Field{{Name: "t", Type: "timestamp", Nullable: &f}}},
		Watermark:          &query.Watermark{Column: "t", Delay: query.Duration(2 * time.Hour)},
		CheckpointLocation: "s3://b/cp", Sink: query.Sink{Parquet: &query.ParquetSink{Path: "s3://b/out"}},
	}
	c := buildContract(spec.WithDefaults(), 24*time.Hour, 48*time.Hour)
	if c.NeededRetention != "74h" || c.Topics != "events" || c.EventTimeField != "t" || c.MaxPerTrigger != "1000" || c.FailOnDataLoss == nil || *c.FailOnDataLoss {
		t.Fatalf("contract: %+v", c)
	}
	var b strings.Builder
	if err := writeContract(&b, c); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"retention.ms of the topic must be at least 266400000", "needed retention:", "s3://b/cp", "parquet s3://b/out", "failOnDataLoss is false"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("contract lacks %q:\n%s", want, b.String())
		}
	}
}
