package kafka

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestRateLimitSplitsCapInProportionToBacklog(t *testing.T) {
	cases := []struct {
		name    string
		limit   int64
		backlog []int64
		want    []int64
	}{
		// 1000*10000/10100 = 990.1 and 1000*100/10100 = 9.9: floors 990 and 9,
		// the spare unit goes to the larger remainder (0.9).
		{"skewed", 1000, []int64{10000, 100}, []int64{990, 10}},
		{"under cap takes everything", 1000, []int64{300, 200, 0}, []int64{300, 200, 0}},
		{"no cap", 0, []int64{5, 7}, []int64{5, 7}},
		{"equal backlogs, ties to lower index", 10, []int64{4, 4, 4}, []int64{4, 3, 3}},
		// 3*1000/1002 = 2.99, 3*1/1002 ~ 0: the small partitions are not starved.
		{"tiny partitions still progress", 3, []int64{1000, 1, 1}, []int64{1, 1, 1}},
		{"cap below partition count goes to the largest", 2, []int64{5, 50, 7}, []int64{0, 1, 1}},
		{"zero backlog gets nothing", 10, []int64{0, 100, 0}, []int64{0, 10, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := rateLimit(c.limit, c.backlog)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("rateLimit(%d, %v) = %v, want %v", c.limit, c.backlog, got, c.want)
			}
		})
	}
}

// The guarantees, checked on many random inputs against their definitions.
func TestRateLimitNeverExceedsCapAndStarvesNoPartition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 20000; iter++ {
		n := 1 + rng.IntN(12)
		backlog := make([]int64, n)
		var total int64
		withBacklog := 0
		for i := range backlog {
			switch rng.IntN(4) {
			case 0:
				backlog[i] = 0
			case 1:
				backlog[i] = 1 + rng.Int64N(3)
			default:
				backlog[i] = 1 + rng.Int64N(100000)
			}
			total += backlog[i]
			if backlog[i] > 0 {
				withBacklog++
			}
		}
		limit := 1 + rng.Int64N(2*total+2)
		adv := rateLimit(limit, backlog)
		var sum int64
		for i := range adv {
			if adv[i] < 0 || adv[i] > backlog[i] {
				t.Fatalf("limit %d backlog %v: advance %v out of [0, backlog]", limit, backlog, adv)
			}
			if limit >= int64(withBacklog) && backlog[i] > 0 && adv[i] == 0 {
				t.Fatalf("limit %d backlog %v: partition %d starved: %v", limit, backlog, i, adv)
			}
			sum += adv[i]
		}
		if want := min(limit, total); sum != want {
			t.Fatalf("limit %d backlog %v: sum %d, want %d (%v)", limit, backlog, sum, want, adv)
		}
		// Proportionality: no share is more than one unit (plus the
		// starvation floor) away from its exact proportional value.
		if limit < total {
			for i := range adv {
				exact := float64(limit) * float64(backlog[i]) / float64(total)
				if d := math.Abs(float64(adv[i]) - exact); d > float64(withBacklog)+1 {
					t.Fatalf("limit %d backlog %v: share %d of partition %d is far from %.1f", limit, backlog, adv[i], i, exact)
				}
			}
		}
		if again := rateLimit(limit, backlog); !reflect.DeepEqual(again, adv) {
			t.Fatalf("not deterministic: %v then %v", adv, again)
		}
	}
}

func TestApportionHandlesOffsetsNearInt64Max(t *testing.T) {
	w := []int64{math.MaxInt64 / 2, math.MaxInt64 / 2, 10}
	got := apportion(1000, w)
	if s := sumOf(got); s != 1000 {
		t.Fatalf("sum %d, want 1000: %v", s, got)
	}
	for i := range got {
		if got[i] < 1 || got[i] > w[i] {
			t.Fatalf("share %d out of range: %v", i, got)
		}
	}
}

func TestSplitRangesCutsLargeRangesToReachMinPartitions(t *testing.T) {
	in := []Range{
		{Topic: "a", Partition: 0, From: 0, To: 1000},
		{Topic: "a", Partition: 1, From: 50, To: 50}, // empty: dropped
		{Topic: "a", Partition: 2, From: 10, To: 110},
	}
	got := splitRanges(in, 8)
	// 8*1000/1100 = 7.27 and 8*100/1100 = 0.73: floors 7 and 0, the spare
	// unit to the larger remainder (0.73) gives 7 and 1.
	var want []Range
	from := int64(0)
	for k := int64(0); k < 7; k++ {
		n := (1000 - from) / (7 - k)
		want = append(want, Range{"a", 0, from, from + n})
		from += n
	}
	want = append(want, Range{"a", 2, 10, 110})
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("splitRanges = %v\nwant %v", got, want)
	}
}

func TestSplitRangesCoversEveryOffsetExactlyOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 3000; iter++ {
		n := 1 + rng.IntN(6)
		var in []Range
		var total int64
		nonEmpty := 0
		for p := 0; p < n; p++ {
			from := rng.Int64N(1000)
			size := rng.Int64N(50)
			if rng.IntN(3) == 0 {
				size = 0
			}
			in = append(in, Range{"t", int32(p), from, from + size})
			total += size
			if size > 0 {
				nonEmpty++
			}
		}
		minP := rng.IntN(20)
		out := splitRanges(in, minP)
		if want := max(nonEmpty, int(min(int64(minP), total))); len(out) != want {
			t.Fatalf("minPartitions %d over %v: %d splits, want %d", minP, in, len(out), want)
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
