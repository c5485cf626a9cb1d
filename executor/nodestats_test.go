package executor

import "testing"

func TestHeldStateRowsCountOnlyPartitionsReducedInTheNewestBatch(t *testing.T) {
	var c nodeCounters
	c.setStateRows("q", 0, 5, 10)
	c.setStateRows("q", 1, 5, 20)
	c.setStateRows("other", 0, 2, 7)
	if got := c.heldStateRows(); got != 37 {
		t.Fatalf("held = %d, want 37", got)
	}
	// Batch 6 reduces only partition 1 here: partition 0 moved away.
	c.setStateRows("q", 1, 6, 25)
	if got := c.heldStateRows(); got != 32 {
		t.Fatalf("held after partition 0 moved = %d, want 25 + 7", got)
	}
}
