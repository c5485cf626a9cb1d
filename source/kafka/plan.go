package kafka

import (
	"math"
	"math/bits"
	"slices"
)

// This file holds the pure planning arithmetic: no I/O, no clocks.

// apportion divides total units among positive weights in proportion to
// them (largest-remainder method). Guarantees, for weights w and result s:
//
//   - s[i] <= w[i], and sum(s) == min(total, sum(w));
//   - when total >= len(w), every s[i] >= 1, so nothing starves;
//   - when total < len(w), one unit each goes to the total largest weights
//     (a batch then touches as many partitions as it can, and as the
//     largest backlogs shrink the units move on to the others);
//   - the result depends only on the inputs (ties go to the lower index).
func apportion(total int64, w []int64) []int64 {
	s := make([]int64, len(w))
	if total <= 0 || len(w) == 0 {
		return s
	}
	sum, ok := sumNoOverflow(w)
	if !ok {
		// Offsets this large do not occur; keep the guarantees anyway by
		// scaling the weights down (proportions are kept to 62 bits).
		scaled := make([]int64, len(w))
		shift := uint(0)
		for {
			shift++
			for i, x := range w {
				scaled[i] = max(x>>shift, 1)
			}
			if sum, ok = sumNoOverflow(scaled); ok {
				break
			}
		}
		s = apportion(min(total, sum), scaled)
		// Each share is <= its scaled weight <= its real weight; hand the
		// units lost to scaling out in order, within the real weights.
		left := total - sumOf(s)
		for i := 0; i < len(w) && left > 0; i++ {
			add := min(w[i]-s[i], left)
			s[i] += add
			left -= add
		}
		return s
	}
	if total >= sum {
		copy(s, w)
		return s
	}
	if total < int64(len(w)) {
		order := make([]int, len(w))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case w[a] > w[b]:
				return -1
			case w[a] < w[b]:
				return 1
			}
			return a - b
		})
		for _, i := range order[:total] {
			s[i] = 1
		}
		return s
	}
	rem := make([]uint64, len(w))
	given := int64(0)
	for i, x := range w {
		hi, lo := bits.Mul64(uint64(total), uint64(x))
		q, r := bits.Div64(hi, lo, uint64(sum)) // hi < sum since total < sum
		s[i] = int64(q)
		rem[i] = r
		given += s[i]
	}
	if left := total - given; left > 0 {
		order := make([]int, len(w))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case rem[a] > rem[b]:
				return -1
			case rem[a] < rem[b]:
				return 1
			}
			return a - b
		})
		for _, i := range order[:left] {
			s[i]++ // floor < weight because total < sum, so this stays <= w[i]
		}
	}
	if total >= int64(len(w)) {
		// No starvation: a zero share takes one unit from the largest share.
		// One exists with at least 2 because sum(s) = total >= len(w).
		for i := range s {
			if s[i] != 0 {
				continue
			}
			j := 0
			for k := range s {
				if s[k] > s[j] {
					j = k
				}
			}
			s[j]--
			s[i] = 1
		}
	}
	return s
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

func sumOf(w []int64) int64 {
	var sum int64
	for _, x := range w {
		sum += x
	}
	return sum
}

// rateLimit caps a batch at limit offsets (maxOffsetsPerTrigger) split
// across partitions in proportion to each partition's backlog, as Spark's
// KafkaMicroBatchStream.rateLimit does, but with the sum never above the
// cap and, when the cap is at least the number of partitions with a
// backlog, every such partition making progress. limit <= 0 means no cap.
// It returns how many offsets each partition advances.
func rateLimit(limit int64, backlog []int64) []int64 {
	adv := make([]int64, len(backlog))
	var idx []int
	var w []int64
	for i, b := range backlog {
		if b > 0 {
			idx = append(idx, i)
			w = append(w, b)
		}
	}
	if limit <= 0 {
		for _, i := range idx {
			adv[i] = backlog[i]
		}
		return adv
	}
	for k, share := range apportion(limit, w) {
		adv[idx[k]] = share
	}
	return adv
}

// splitRanges divides ranges into read tasks so that there are at least
// minPartitions of them when there are enough offsets, as Spark's
// KafkaOffsetRangeCalculator does: with fewer non-empty ranges than
// minPartitions, each range is cut into a number of pieces proportional to
// its size (at least one), pieces of one range as equal as possible.
// Empty ranges are dropped; the order of the input is kept.
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
	sizes := make([]int64, len(nonEmpty))
	for i, r := range nonEmpty {
		sizes[i] = r.Size()
	}
	total, ok := sumNoOverflow(sizes)
	if !ok {
		total = math.MaxInt64
	}
	counts := apportion(min(int64(minPartitions), total), sizes)
	out := make([]Range, 0, minPartitions)
	for i, r := range nonEmpty {
		parts := counts[i]
		remaining := r.Size()
		from := r.From
		for k := int64(0); k < parts; k++ {
			n := remaining / (parts - k) // the last pieces take the round-off
			remaining -= n
			out = append(out, Range{Topic: r.Topic, Partition: r.Partition, From: from, To: from + n})
			from += n
		}
	}
	return out
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
//   - otherwise k = ceil(total / minPerTask) tasks, at least
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
