package kafka

import (
	"math"
	"slices"
)

// This file holds the pure planning arithmetic: no I/O, no clocks.

// rateLimit is Spark 3.5's KafkaMicroBatchStream.rateLimit: it caps a
// batch at about limit offsets (maxOffsetsPerTrigger) split across the
// partitions with a backlog in proportion to it. For partition i, reading
// from from[i] up to end[i] (size = end[i] - from[i]):
//
//	total   = float64(sum of the positive sizes)
//	prorate = float64(limit) * (float64(size) / total)
//	n       = ceil(prorate) when prorate < 1, else floor(prorate)
//	off     = from[i] + n, or MaxInt64 when that would overflow (SPARK-26718)
//	result  = min(end[i], off)
//
// Partitions with no backlog (size <= 0) get end[i], and so does every
// partition when the total is below 1. As in Spark, the rounding up of
// small shares can take a batch past the cap (by at most one offset per
// partition whose share is below one), and the floor of the others can
// leave it below the cap: the batches are Spark's, offset for offset.
// limit <= 0 means no cap. It returns the batch's end offsets.
func rateLimit(limit int64, from, end []int64) []int64 {
	out := slices.Clone(end)
	if limit <= 0 {
		return out
	}
	var sum int64 // a Long sum in Spark: it wraps the same way
	for i := range end {
		if size := end[i] - from[i]; size > 0 {
			sum += size
		}
	}
	total := float64(sum)
	if total < 1 {
		return out
	}
	for i := range end {
		size := end[i] - from[i]
		if size <= 0 {
			continue
		}
		prorate := float64(limit) * (float64(size) / total)
		var n int64
		if prorate < 1 {
			n = jvmDoubleToLong(math.Ceil(prorate))
		} else {
			n = jvmDoubleToLong(math.Floor(prorate))
		}
		off := int64(math.MaxInt64)
		if n <= math.MaxInt64-from[i] {
			off = from[i] + n
		}
		out[i] = min(end[i], off)
	}
	return out
}

// jvmDoubleToLong converts as the JVM's d2l (Scala's Double.toLong) does:
// NaN is 0 and values beyond the long range saturate. Go's conversion is
// implementation-defined there.
func jvmDoubleToLong(f float64) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= math.MaxInt64: // float64(MaxInt64) is 2^63
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}

// javaRound is java.lang.Math.round(double): the closest long, ties
// toward positive infinity, NaN 0, saturating.
func javaRound(f float64) int64 {
	if math.IsNaN(f) {
		return 0
	}
	r := math.Floor(f)
	if f-r >= 0.5 {
		r++
	}
	return jvmDoubleToLong(r)
}

// splitRanges is Spark 3.5's KafkaOffsetRangeCalculator.getRanges: empty
// ranges are dropped; when minPartitions is above the number of the
// others, each range is cut into parts:
//
//	partCount(size, total, m) = max(round(size / total * m), 1)
//	unsplit = the ranges with partCount(size, totalSize, minPartitions) == 1
//	a range of unsplit has 1 part; any other has
//	partCount(size, totalSize - unsplitSize, max(minPartitions - len(unsplit), 1))
//
// (round is Java's Math.round), and a range of p parts is cut in order
// into pieces of remaining/(p-k) offsets (k = 0..p-1, integer division, so
// the last pieces take the round-off). Empty pieces are dropped. The
// number of pieces is about minPartitions, sometimes more or fewer, as in
// Spark. The order of the input is kept.
func splitRanges(ranges []Range, minPartitions int) []Range {
	var nonEmpty []Range
	for _, r := range ranges {
		if r.Size() > 0 {
			nonEmpty = append(nonEmpty, r)
		}
	}
	if minPartitions <= len(nonEmpty) {
		return nonEmpty
	}
	partCount := func(size, total int64, minParts int) int64 {
		// Scala: math.max(math.round(size.toDouble / totalSize * minParts), 1).toInt
		return int64(int32(max(javaRound(float64(size)/float64(total)*float64(minParts)), 1)))
	}
	var totalSize int64
	for _, r := range nonEmpty {
		totalSize += r.Size()
	}
	unsplit := make([]bool, len(nonEmpty))
	var unsplitSize int64
	nUnsplit := 0
	for i, r := range nonEmpty {
		if partCount(r.Size(), totalSize, minPartitions) == 1 {
			unsplit[i] = true
			unsplitSize += r.Size()
			nUnsplit++
		}
	}
	splitSize := totalSize - unsplitSize
	splitMin := max(minPartitions-nUnsplit, 1)
	var out []Range
	for i, r := range nonEmpty {
		parts := int64(1)
		if !unsplit[i] {
			parts = partCount(r.Size(), splitSize, splitMin)
		}
		remaining := r.Size()
		from := r.From
		for k := int64(0); k < parts; k++ {
			n := remaining / (parts - k)
			remaining -= n
			to := min(from+n, r.To)
			if to > from {
				out = append(out, Range{Topic: r.Topic, Partition: r.Partition, From: from, To: to})
			}
			from = to
		}
	}
	return out
}

func sumNoOverflow(w []int64) (int64, bool) {
	var sum int64
	for _, x := range w {
		if x > math.MaxInt64-sum {
			return 0, false
		}
		sum += x
	}
	return sum, true
}

// DefaultMinOffsetsPerTask is minOffsetsPerTask when the spec leaves it
// out: about 50-100 ms of decoding and aggregating on one core. A task
// costs more than its launch and its fetches: its partial aggregates hold
// every group its rows touch, and with records spread over partitions
// every range of a batch touches about every group, so each extra task
// adds a batch's worth of groups to the shuffle and the reduce. Measured
// (bench -only partitions, 500,000-row batches over 512 partitions):
// 8,192 made 62 tasks and ran at 0.44x of 8 partitions in one process and
// far worse on 16 executors.
const DefaultMinOffsetsPerTask = 65536

// planTasks turns a batch's ranges into read tasks. A task should carry
// enough offsets to be worth a task, and a batch should still have as
// many tasks as minPartitions asks and as its offsets fill:
//
//   - with more minPartitions than non-empty ranges, ranges are cut
//     (splitRanges) and each piece is a task, as Spark does;
//   - otherwise k = ceil(total / minPerTask) tasks (Spark makes one per
//     range: docs/spark-differences.md#kafka-task-grouping), at least
//     minPartitions and at most one per range; ranges go to tasks largest
//     first, each to the task with the fewest offsets so far (ties to the
//     lower task), so tasks are balanced and a range larger than
//     minPerTask keeps a task of its own when there are enough tasks.
//
// Within a task, ranges keep their input order; tasks are ordered by
// their first range. Empty ranges are dropped. The result depends only on
// the inputs, so a re-run of a batch gets the same tasks.
func planTasks(ranges []Range, minPartitions int, minPerTask int64) [][]Range {
	var nonEmpty []Range
	var sizes []int64
	for _, r := range ranges {
		if r.Size() > 0 {
			nonEmpty = append(nonEmpty, r)
			sizes = append(sizes, r.Size())
		}
	}
	if minPartitions > len(nonEmpty) {
		var out [][]Range
		for _, r := range splitRanges(nonEmpty, minPartitions) {
			out = append(out, []Range{r})
		}
		return out
	}
	n := len(nonEmpty)
	if n == 0 {
		return nil
	}
	k := n
	if minPerTask > 0 {
		total, ok := sumNoOverflow(sizes)
		if !ok {
			total = math.MaxInt64
		}
		want := total / minPerTask
		if total%minPerTask != 0 {
			want++
		}
		k = int(min(int64(n), max(want, int64(max(minPartitions, 1)))))
	}
	if k >= n {
		out := make([][]Range, n)
		for i, r := range nonEmpty {
			out[i] = []Range{r}
		}
		return out
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case sizes[a] > sizes[b]:
			return -1
		case sizes[a] < sizes[b]:
			return 1
		}
		return a - b
	})
	load := make([]int64, k)
	members := make([][]int, k)
	for _, i := range order {
		// k is at most the number of ranges (a few thousand): a linear
		// scan for the least loaded task is simpler than a heap and cheap.
		b := 0
		for j := 1; j < k; j++ {
			if load[j] < load[b] {
				b = j
			}
		}
		load[b] += sizes[i]
		members[b] = append(members[b], i)
	}
	for _, m := range members {
		slices.Sort(m)
	}
	slices.SortFunc(members, func(a, b []int) int { return a[0] - b[0] })
	out := make([][]Range, k)
	for t, m := range members {
		for _, i := range m {
			out[t] = append(out[t], nonEmpty[i])
		}
	}
	return out
}
