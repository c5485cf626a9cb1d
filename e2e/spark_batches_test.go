package e2e

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/internal/testutil/tiletest"
	"github.com/sluicehq/sluice/query"
)

// sparkRecord is one record of the capped-backlog case, as the oracle
// sees it: its partition, its event time and its course.
type sparkRecord struct {
	part   int
	t      time.Time
	course string
}

// sparkRateLimit is the oracle's copy of Spark 3.5's
// KafkaMicroBatchStream.rateLimit, written from Spark's source, not from
// Sluice's: prorate = limit * (size / total) in doubles, ceil below 1 and
// floor otherwise, never past the end.
func sparkRateLimit(limit int64, from, until []int64) []int64 {
	total := 0.0
	for i := range until {
		if s := until[i] - from[i]; s > 0 {
			total += float64(s)
		}
	}
	out := append([]int64(nil), until...)
	if total < 1 {
		return out
	}
	for i := range until {
		size := until[i] - from[i]
		if size <= 0 {
			continue
		}
		prorate := float64(limit) * (float64(size) / total)
		n := math.Floor(prorate)
		if prorate < 1 {
			n = math.Ceil(prorate)
		}
		out[i] = min(until[i], from[i]+int64(n))
	}
	return out
}

// largestRemainder is another plausible split (Sluice's before it followed
// Spark): floors, then the units left to the largest remainders, never
// above the cap. The case must tell the two apart.
func largestRemainder(limit int64, from, until []int64) []int64 {
	var total int64
	for i := range until {
		total += until[i] - from[i]
	}
	out := append([]int64(nil), until...)
	if total <= limit {
		return out
	}
	given := int64(0)
	rem := make([]int64, len(until))
	for i := range until {
		s := until[i] - from[i]
		out[i] = from[i] + limit*s/total
		rem[i] = limit * s % total
		given += limit * s / total
	}
	for ; given < limit; given++ {
		best := -1
		for i := range rem {
			if out[i] < until[i] && (best < 0 || rem[i] > rem[best]) {
				best = i
			}
		}
		out[best]++
		rem[best] = -1
	}
	return out
}

type plannedBatch struct {
	end            []int64
	lateWM, evictW int64 // ms
}

// sparkOracle runs Spark's micro-batch rules over the partitions' records:
// batches planned by split from the earliest offsets to the end; batch N
// evicts with W(N) = max(W(N-1), max event time of batches < N - delay)
// (W(0) = 0) and drops a row whose window ends at or before W(N-1) (0 for
// batch 0); a last no-data batch emits with the final watermark. It
// returns the batches, the windows an append-mode tile writes and the
// number of rows dropped as late.
func sparkOracle(parts [][]sparkRecord, limit int64, size, delay time.Duration,
	split func(int64, []int64, []int64) []int64) ([]plannedBatch, []tiletest.Window, int) {
	from := make([]int64, len(parts))
	until := make([]int64, len(parts))
	for p := range parts {
		until[p] = int64(len(parts[p]))
	}
	counts := map[tiletest.Window]int64{}
	dropped := 0
	var batches []plannedBatch
	var wm, prevWM, maxMs int64
	for {
		end := split(limit, from, until)
		if slices64Equal(end, from) {
			break
		}
		late := int64(0)
		if len(batches) > 0 {
			late = prevWM
		}
		batches = append(batches, plannedBatch{end: end, lateWM: late, evictW: wm})
		for p := range parts {
			for _, r := range parts[p][from[p]:end[p]] {
				ms := r.t.UnixMilli()
				maxMs = max(maxMs, ms)
				start := r.t.Truncate(size)
				if start.Add(size).UnixMilli() <= late {
					dropped++
					continue // late
				}
				counts[tiletest.Window{Start: start, Course: r.course}]++
			}
		}
		prevWM = wm
		wm = max(wm, maxMs-delay.Milliseconds())
		from = end
	}
	var out []tiletest.Window
	for k, n := range counts {
		if k.Start.Add(size).UnixMilli() <= wm {
			out = append(out, tiletest.Window{Start: k.Start, Course: k.Course, Count: n})
		}
	}
	tiletest.Sort(out)
	return batches, out, dropped
}

func slices64Equal(a, b []int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A capped Kafka backlog whose late rows depend on how each batch is
// split: partitions of 3, 10, 100 and 1,000 records read under
// maxOffsetsPerTrigger 50 (Spark's first batch: 1, 1, 4 and 44), events
// out of order by up to three times the watermark delay. On a driver and
// two executor processes, every batch's end offsets and watermarks, and
// the rows written, equal what Spark's rules give, computed by an oracle
// in this file; with another split the rows would differ. The values mix
// the conversions Spark's parser makes: event times as epoch seconds and
// as strings without a zone in the session time zone (Europe/Paris), a
// course as a JSON number.
func TestCappedKafkaBacklogGivesSparksBatchesAndRows(t *testing.T) {
	const (
		topic = "spark.batches"
		limit = 50
	)
	size, delay := time.Minute, time.Minute
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int{3, 10, 100, 1000}
	rng := rand.New(rand.NewPCG(19, 3))
	span := 100 * time.Minute
	parts := make([][]sparkRecord, len(sizes))
	var recs []*kgo.Record
	for p, n := range sizes {
		for k := 0; k < n; k++ {
			at := tiletest.Base.Add(span * time.Duration(k) / time.Duration(n)).
				Add(-time.Duration(rng.Int64N(int64(3 * delay)))).Truncate(time.Second)
			course := fmt.Sprint(rng.IntN(3))
			parts[p] = append(parts[p], sparkRecord{part: p, t: at, course: course})
			var ts, c string
			if k%2 == 0 {
				ts = fmt.Sprint(at.Unix()) // epoch seconds
			} else {
				ts = `"` + at.In(paris).Format("2006-01-02 15:04:05") + `"` // no zone: the session's
			}
			if k%3 == 0 {
				c = course // a number in a string column keeps its text
			} else {
				c = `"` + course + `"`
			}
			v := fmt.Sprintf(`{"event_id":"p%d-%d","course_id":%s,"event_time":%s}`, p, k, c, ts)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte(v)})
		}
	}
	batches, want, dropped := sparkOracle(parts, limit, size, delay, sparkRateLimit)
	if dropped == 0 {
		t.Fatal("the case drops no late row")
	}
	if got := batches[0].end; !slices64Equal(got, []int64{1, 1, 4, 44}) {
		t.Fatalf("oracle's first batch %v, want Spark's 1, 1, 4, 44", got)
	}
	if _, other, _ := sparkOracle(parts, limit, size, delay, largestRemainder); tiletest.Diff(want, other) == "" {
		t.Fatal("the case does not depend on the split: make the events more out of order")
	}

	broker := kafkatest.Start(t)
	broker.CreateTopic(topic, int32(len(sizes)))
	broker.Produce(recs...)

	l := localLocations(t, "spark")
	spec := tiletest.Spec("", l.Sink, l.Checkpoint)
	spec.Source.File = nil
	spec.Source.Kafka = &query.KafkaSource{BootstrapServers: broker.Addr, Subscribe: topic, StartingOffsets: "earliest",
		MaxOffsetsPerTrigger: limit}
	spec.Watermark.Delay = query.Duration(delay)
	spec.Aggregate.Window.Size = query.Duration(size)
	spec.SessionTimeZone = "Europe/Paris"
	c := startCluster(t, l, 2, []string{"--exit-when-done"}, writeSpec(t, spec))
	if err := c.driver.Wait(180 * time.Second); err != nil {
		t.Fatalf("driver serve failed: %v\n%s", err, c.logs())
	}

	log := checkpoint.New(l.store(t, l.Checkpoint))
	ctx := context.Background()
	for n, b := range batches {
		e, err := log.Offsets(ctx, ids.BatchID(n))
		if err != nil {
			t.Fatalf("offsets/%d: %v", n, err)
		}
		var ends []string
		for p, off := range b.end {
			ends = append(ends, fmt.Sprintf(`"%d":%d`, p, off))
		}
		wantEnd := fmt.Sprintf(`{%q:{%s}}`, topic, strings.Join(ends, ","))
		if e.NoData || len(e.Sources) != 1 || string(e.Sources[0].End) != wantEnd {
			t.Fatalf("batch %d ends at %s, want Spark's %s", n, e.Sources[0].End, wantEnd)
		}
		if e.LateWatermark.Millis() != b.lateWM || e.BatchWatermark.Millis() != b.evictW {
			t.Fatalf("batch %d watermarks late %d, evict %d ms; want %d, %d", n, e.LateWatermark.Millis(), e.BatchWatermark.Millis(), b.lateWM, b.evictW)
		}
	}
	if e, err := log.Offsets(ctx, ids.BatchID(len(batches))); err != nil || !e.NoData {
		t.Fatalf("batch %d after the %d data batches: %+v, %v; want the no-data batch", len(batches), len(batches), e, err)
	}
	if d := sinkDiff(t, l, want); d != "" {
		t.Fatalf("the rows differ from Spark's:\n%s", d)
	}
	t.Logf("%d batches; %d windows; %d late rows dropped", len(batches), len(want), dropped)
}
