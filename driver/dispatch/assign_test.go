package dispatch

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/ids"
)

func executors(s ...string) []ids.ExecutorID {
	out := make([]ids.ExecutorID, len(s))
	for i, x := range s {
		out[i] = ids.ExecutorID(x)
	}
	return out
}

func counts(a []ids.ExecutorID) map[ids.ExecutorID]int {
	c := map[ids.ExecutorID]int{}
	for _, e := range a {
		c[e]++
	}
	return c
}

func TestAssignmentExamples(t *testing.T) {
	for _, tc := range []struct {
		name          string
		prev, members []ids.ExecutorID
		n             int
		want          []ids.ExecutorID
	}{
		{"first batch spreads evenly", nil, executors("a", "b", "c"), 4, executors("a", "a", "b", "c")},
		{"unchanged membership moves nothing", executors("c", "a", "b", "a"), executors("a", "b", "c"), 4, executors("c", "a", "b", "a")},
		{"a fourth member takes one from the member with two", executors("a", "a", "b", "c"), executors("a", "b", "c", "d"), 4, executors("a", "d", "b", "c")},
		{"a leaver's partition goes to a member below its share", executors("a", "a", "b", "c"), executors("a", "b"), 4, executors("a", "a", "b", "b")},
		{"more members than partitions", executors("a", "b"), executors("a", "b", "c"), 2, executors("a", "b")},
		{"no members", executors("a"), nil, 3, nil},
		{"more partitions than before", executors("a", "b"), executors("a", "b"), 4, executors("a", "b", "a", "b")},
		{"members given unsorted with duplicates", nil, executors("b", "a", "b"), 3, executors("a", "a", "b")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Assign(tc.prev, tc.members, tc.n); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Assign(%v, %v, %d) = %v, want %v", tc.prev, tc.members, tc.n, got, tc.want)
			}
		})
	}
}

// Over random histories of joins and leaves: every assignment is balanced
// and owned by members only; with unchanged membership nothing moves; and
// a partition moves only when its owner left or was above its share.
func TestAssignmentIsBalancedStickyAndMovesOnlyWhatItMust(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		n := 1 + r.IntN(40)
		pool := executors("a", "b", "c", "d", "e", "f", "g")
		var members []ids.ExecutorID
		for _, m := range pool {
			if r.IntN(2) == 0 {
				members = append(members, m)
			}
		}
		var prev []ids.ExecutorID
		for step := range 8 {
			next := Assign(prev, members, n)
			where := fmt.Sprintf("trial %d step %d: Assign(%v, %v, %d) = %v", trial, step, prev, members, n, next)
			if len(members) == 0 {
				if next != nil {
					t.Fatalf("%s: want nil", where)
				}
				prev = nil
			} else {
				c := counts(next)
				lo, hi := n, 0
				for _, m := range members {
					lo, hi = min(lo, c[m]), max(hi, c[m])
				}
				if hi-lo > 1 {
					t.Fatalf("%s: unbalanced %v", where, c)
				}
				for _, e := range next {
					if !slices.Contains(members, e) {
						t.Fatalf("%s: owner %s is not a member", where, e)
					}
				}
				if prev != nil {
					pc := counts(prev)
					share := counts(next)
					for p := range next {
						if next[p] == prev[p] {
							continue
						}
						// A move is allowed when the old owner left or
						// owned more than its new share.
						if slices.Contains(members, prev[p]) && pc[prev[p]] <= share[prev[p]] {
							t.Fatalf("%s: partition %d moved from %s, which stayed and was within its share", where, p, prev[p])
						}
					}
					if again := Assign(next, members, n); !reflect.DeepEqual(again, next) {
						t.Fatalf("%s: unchanged membership moved partitions: %v", where, again)
					}
				}
				prev = next
			}
			// Change membership: one joins or one leaves.
			m := pool[r.IntN(len(pool))]
			if i := slices.Index(members, m); i >= 0 {
				members = slices.Delete(members, i, i+1)
			} else {
				members = append(members, m)
			}
		}
	}
}

func TestJoiningMemberTakesOnlyItsShare(t *testing.T) {
	prev := Assign(nil, executors("a", "b", "c"), 12)
	next := Assign(prev, executors("a", "b", "c", "d"), 12)
	if got := Moves(prev, next); got != 3 {
		t.Fatalf("%d partitions moved, want the 3 that d takes: %v -> %v", got, prev, next)
	}
	if counts(next)["d"] != 3 {
		t.Fatalf("d owns %d", counts(next)["d"])
	}
}
