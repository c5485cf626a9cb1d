package dispatch

import (
	"slices"
	"sort"

	"github.com/sluicehq/sluice/ids"
)

// Assign decides which executor owns each of n state partitions for the
// next batch, given last batch's owners (prev[p] owns p; prev may be
// shorter than n or name executors that left) and the executors available
// now. It is a pure function of its inputs:
//
//   - balanced: each member owns n/len(members) partitions, some one more;
//   - sticky: a partition stays with its owner while that owner is a
//     member and within its share, so with unchanged membership and a
//     balanced prev nothing moves;
//   - minimal: members already owning more get the larger shares, and only
//     partitions whose owner left or is over its share move, to the
//     members below their share, lowest partition and member first.
//
// It returns nil when members is empty.
func Assign(prev []ids.ExecutorID, members []ids.ExecutorID, n int) []ids.ExecutorID {
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	if len(ms) == 0 || n <= 0 {
		return nil
	}
	isMember := make(map[ids.ExecutorID]bool, len(ms))
	for _, m := range ms {
		isMember[m] = true
	}
	kept := make(map[ids.ExecutorID][]int, len(ms))
	for p := 0; p < n && p < len(prev); p++ {
		if isMember[prev[p]] {
			kept[prev[p]] = append(kept[prev[p]], p)
		}
	}
	base, extra := n/len(ms), n%len(ms)
	// The extra partitions go to the members that keep the most already.
	rank := slices.Clone(ms)
	sort.SliceStable(rank, func(i, j int) bool { return len(kept[rank[i]]) > len(kept[rank[j]]) })
	target := make(map[ids.ExecutorID]int, len(ms))
	for i, m := range rank {
		target[m] = base
		if i < extra {
			target[m]++
		}
	}
	out := make([]ids.ExecutorID, n)
	have := make(map[ids.ExecutorID]int, len(ms))
	for _, m := range ms {
		for _, p := range kept[m] {
			if have[m] < target[m] {
				out[p] = m
				have[m]++
			}
		}
	}
	var free []int
	for p := range out {
		if out[p] == "" {
			free = append(free, p)
		}
	}
	for _, m := range ms {
		for have[m] < target[m] {
			out[free[0]] = m
			free = free[1:]
			have[m]++
		}
	}
	return out
}

// Moves counts the partitions whose owner differs between two assignments.
func Moves(prev, next []ids.ExecutorID) int {
	n := 0
	for p := range next {
		if p >= len(prev) || prev[p] != next[p] {
			n++
		}
	}
	return n
}
