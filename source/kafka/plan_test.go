package kafka

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// Planning cases whose expected batches are computed by Spark 3.5's
// KafkaMicroBatchStream.rateLimit, the arithmetic written out per case:
// total = sum of positive sizes; prorate = limit * (size / total);
// n = ceil(prorate) if prorate < 1 else floor(prorate); end = min(end,
// from + n) (from + n saturating at MaxInt64, SPARK-26718).
func TestRateLimitIsSparks(t *testing.T) {
	const maxI = math.MaxInt64
	cases := []struct {
		name     string
		limit    int64
		from, to []int64
		want     []int64
	}{
		// The example. total 1113: 50*3/1113 = 0.13 -> 1;
		// 50*10/1113 = 0.45 -> 1; 50*100/1113 = 4.49 -> 4;
		// 50*1000/1113 = 44.92 -> 44.
		{"3/10/100/1000 under 50", 50, []int64{0, 0, 0, 0}, []int64{3, 10, 100, 1000}, []int64{1, 1, 4, 44}},
		// total 10100: 990.099 -> 990 and 9.90 -> 9 (the floor leaves the
		// batch one below the cap).
		{"skewed", 1000, []int64{0, 0}, []int64{10000, 100}, []int64{990, 9}},
		// total 1002: 3*1000/1002 = 2.99 -> 2; 3*1/1002 = 0.003 -> 1 each:
		// 4 offsets, one over the cap, as Spark.
		{"small shares round up past the cap", 3, []int64{0, 0, 0}, []int64{1000, 1, 1}, []int64{2, 1, 1}},
		// total 62: every share is below 1 -> 1 each; 3 offsets for a cap of 1.
		{"cap below partition count", 1, []int64{0, 0, 0}, []int64{5, 50, 7}, []int64{1, 1, 1}},
		// total 12: 10*4/12 = 3.33 -> 3 each, 9 in all.
		{"equal backlogs", 10, []int64{0, 0, 0}, []int64{4, 4, 4}, []int64{3, 3, 3}},
		// 3*(1/3.0) is exactly 1.0 in doubles: not below 1, floor 1.
		{"share of exactly one", 3, []int64{0, 0, 0}, []int64{1, 1, 1}, []int64{1, 1, 1}},
		// total 500: 1000*300/500 = 600 -> min(end 300); 400 -> min(200).
		{"under the cap takes everything", 1000, []int64{0, 0, 0}, []int64{300, 200, 0}, []int64{300, 200, 0}},
		{"no cap", 0, []int64{3, 0}, []int64{8, 7}, []int64{8, 7}},
		// Sizes are end - from: a new partition starts at its earliest
		// offset (here 500), an old one where the last batch ended. total
		// 150: 30*100/150 = 20; 30*50/150 = 10.
		{"offsets relative to each start", 30, []int64{500, 40}, []int64{600, 90}, []int64{520, 50}},
		// Partitions with nothing to read keep their end (Spark's getOrElse(end)).
		{"partitions with nothing to read", 10, []int64{7, 0, 9}, []int64{7, 100, 9}, []int64{7, 10, 9}},
		{"nothing to read at all", 10, []int64{7, 9}, []int64{7, 9}, []int64{7, 9}},
		// limit MaxInt64: prorate 9.2e18 * (5/15) = 3.07e18 would take
		// MaxInt64-5 past MaxInt64: the guard makes it MaxInt64, then
		// min(end). 9.2e18 * (10/15) -> 0 + 6.1e18, min(end 10) = 10.
		{"overflow guard", maxI, []int64{0, maxI - 5}, []int64{10, maxI}, []int64{10, maxI}},
		// limit*1.0 = 2^63 in doubles: toLong saturates to MaxInt64.
		{"share saturates", maxI, []int64{maxI - 10}, []int64{maxI}, []int64{maxI}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := rateLimit(c.limit, c.from, c.to)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("rateLimit(%d, %v, %v) = %v, want %v", c.limit, c.from, c.to, got, c.want)
			}
		})
	}
}

// Spark's guarantees, checked on random inputs: within [from, end], every
// partition with a backlog progresses, and the batch is at most the cap
// plus one per partition whose share is below one.
func TestRateLimitBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 20000; iter++ {
		n := 1 + rng.IntN(12)
		from := make([]int64, n)
		to := make([]int64, n)
		var total int64
		for i := range from {
			from[i] = rng.Int64N(1000)
			switch rng.IntN(4) {
			case 0:
				to[i] = from[i]
			case 1:
				to[i] = from[i] + 1 + rng.Int64N(3)
			default:
				to[i] = from[i] + 1 + rng.Int64N(100000)
			}
			total += to[i] - from[i]
		}
		limit := 1 + rng.Int64N(2*total+2)
		got := rateLimit(limit, from, to)
		var sum int64
		small := int64(0)
		for i := range got {
			if got[i] < from[i] || got[i] > to[i] {
				t.Fatalf("limit %d %v..%v: %v out of range", limit, from, to, got)
			}
			if to[i] > from[i] && got[i] == from[i] {
				t.Fatalf("limit %d %v..%v: partition %d starved: %v", limit, from, to, i, got)
			}
			if to[i] > from[i] && float64(limit)*float64(to[i]-from[i]) < float64(total) {
				small++
			}
			sum += got[i] - from[i]
		}
		if sum > limit+small || (limit >= total && sum != total) {
			t.Fatalf("limit %d %v..%v: batch of %d (%d small shares)", limit, from, to, sum, small)
		}
	}
}

// Cases computed by Spark 3.5's KafkaOffsetRangeCalculator.getRanges:
// pc(size, total, m) = max(round(size/total*m), 1); ranges with pc(size,
// totalSize, minPartitions) == 1 stay whole, the others get pc(size,
// splitTotal, max(minPartitions - #whole, 1)) pieces of remaining/(p-k).
func TestSplitRangesIsSparks(t *testing.T) {
	r := func(p int32, from, to int64) Range { return Range{"a", p, from, to} }
	cases := []struct {
		name string
		in   []Range
		minP int
		want []Range
	}{
		// total 1100: pc(1000) = round(7.27) = 7, pc(100) = round(0.73) = 1:
		// partition 2 whole; split total 1000 over max(8-1, 1) = 7:
		// pc(1000, 1000, 7) = 7 pieces: 142, then 858/6 = 143 six times.
		{"skewed", []Range{r(0, 0, 1000), r(1, 50, 50), r(2, 10, 110)}, 8, []Range{
			r(0, 0, 142), r(0, 142, 285), r(0, 285, 428), r(0, 428, 571), r(0, 571, 714), r(0, 714, 857), r(0, 857, 1000),
			r(2, 10, 110)}},
		// Spark's own suite case: total 24, pc(4) = round(0.67) = 1 whole;
		// pc(20, 20, 3) = 3 pieces: 20/3 = 6, 14/2 = 7, 7.
		{"one whole, one in three", []Range{r(1, 1, 5), r(2, 1, 21)}, 4, []Range{
			r(1, 1, 5), r(2, 1, 7), r(2, 7, 14), r(2, 14, 21)}},
		// round(1.5) = 2 (half up) for both: 4 pieces for minPartitions 3.
		{"half rounds up, more pieces than asked", []Range{r(0, 0, 5), r(1, 0, 5)}, 3, []Range{
			r(0, 0, 2), r(0, 2, 5), r(1, 0, 2), r(1, 2, 5)}},
		// pc(3, 3, 10) = 10 parts of a 3-offset range: the first seven are
		// empty (3/10 .. 3/4 = 0) and dropped, then 1, 1, 1.
		{"more parts than offsets", []Range{r(0, 7, 10)}, 10, []Range{r(0, 7, 8), r(0, 8, 9), r(0, 9, 10)}},
		{"enough ranges already", []Range{r(0, 0, 9), r(1, 3, 3), r(2, 0, 1)}, 2, []Range{r(0, 0, 9), r(2, 0, 1)}},
		{"no minPartitions", []Range{r(0, 0, 9)}, 0, []Range{r(0, 0, 9)}},
		{"nothing to read", []Range{r(0, 4, 4)}, 3, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := splitRanges(c.in, c.minP)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("splitRanges(%v, %d) =\n%v\nwant\n%v", c.in, c.minP, got, c.want)
			}
		})
	}
}

func TestSplitRangesCoversEveryOffsetExactlyOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 3000; iter++ {
		n := 1 + rng.IntN(6)
		var in []Range
		nonEmpty := 0
		for p := 0; p < n; p++ {
			from := rng.Int64N(1000)
			size := rng.Int64N(50)
			if rng.IntN(3) == 0 {
				size = 0
			}
			in = append(in, Range{"t", int32(p), from, from + size})
			if size > 0 {
				nonEmpty++
			}
		}
		minP := rng.IntN(20)
		out := splitRanges(in, minP)
		if len(out) < nonEmpty {
			t.Fatalf("minPartitions %d over %v: %d splits, fewer than the %d ranges", minP, in, len(out), nonEmpty)
		}
		// Pieces of each partition are contiguous and non-empty, and cover
		// exactly the input range.
		next := map[int32]int64{}
		for _, r := range in {
			next[r.Partition] = r.From
		}
		for _, r := range out {
			if r.Size() <= 0 || r.From != next[r.Partition] {
				t.Fatalf("minPartitions %d over %v: bad piece %v in %v", minP, in, r, out)
			}
			next[r.Partition] = r.To
		}
		for _, r := range in {
			if next[r.Partition] != r.To {
				t.Fatalf("minPartitions %d over %v: partition %d covered to %d, want %d", minP, in, r.Partition, next[r.Partition], r.To)
			}
		}
	}
}

func TestOffsetsEncodeIsCanonicalWithNumericPartitionOrder(t *testing.T) {
	o := Offsets{"b": {10: 5, 2: 7, 0: 1}, "a": {0: 42}}
	got := string(o.Encode())
	want := `{"a":{"0":42},"b":{"0":1,"2":7,"10":5}}`
	if got != want {
		t.Fatalf("Encode = %s, want %s", got, want)
	}
	back, err := DecodeOffsets([]byte(` {"b": {"2":7, "10":5, "0":1}, "a":{"0":42}} `))
	if err != nil {
		t.Fatal(err)
	}
	if string(back.Encode()) != want {
		t.Fatalf("round trip = %s, want %s", back.Encode(), want)
	}
	if got := string(Offsets{}.Encode()); got != "{}" {
		t.Fatalf("empty encodes as %s", got)
	}
	for _, bad := range []string{`{"a":{"x":1}}`, `{"a":{"-1":1}}`, `[1]`, `{"a":{"0":"1"}}`} {
		if _, err := DecodeOffsets([]byte(bad)); err == nil {
			t.Errorf("DecodeOffsets(%s) succeeded, want an error", bad)
		}
	}
}
