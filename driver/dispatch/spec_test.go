package dispatch

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source/catalog"
)

// Executors rebuild the query from the JSON the runner sends: every kind of
// spec must survive the trip unchanged.
func TestSpecSurvivesTheTripToExecutors(t *testing.T) {
	for _, y := range []string{
		`name: k
source:
  kafka: {bootstrapServers: "a:9092", subscribe: t, startingOffsets: '{"t":{"0":5}}', kafka.security.protocol: SASL_SSL, kafka.sasl.mechanism: PLAIN, kafka.sasl.username: u, kafka.sasl.password: p, maxOffsetsPerTrigger: 10, minPartitions: 4, failOnDataLoss: false}
  schema: [{name: event_time, type: timestamp, nullable: false}, {name: c, type: string}, {name: v, type: double}]
watermark: {column: event_time, delay: 10 minutes}
aggregate: {window: {column: event_time, size: 5m, slide: 1m}, groupBy: [c], measures: [{name: cnt, fn: count}, {name: s, fn: sum, column: v}]}
outputMode: update
sink: {jsonBatches: {path: /tmp/x}}
checkpointLocation: s3://b/cp
trigger: {processingTime: 30s}
stateStore: pebble
badRecordsPath: /tmp/bad
`,
		`name: g
source: {generator: {rowsPerSecond: 100, seed: 4, jitter: 30s}}
outputMode: append
sink: {console: {}}
checkpointLocation: /tmp/cp
trigger: {availableNow: true}
noDataMicroBatches: false
`,
	} {
		s, err := query.Parse([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		s = s.WithDefaults()
		if err := catalog.Validate(s); err != nil {
			t.Fatal(err)
		}
		js, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		back, err := query.Parse(js)
		if err != nil {
			t.Fatalf("executor cannot parse %s: %v", js, err)
		}
		if back = back.WithDefaults(); !reflect.DeepEqual(back, s) {
			t.Fatalf("spec changed on the way:\nsent %+v\ngot  %+v", s, back)
		}
	}
}
