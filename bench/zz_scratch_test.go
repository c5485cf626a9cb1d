package main

import (
	"fmt"
	"testing"
)

func TestScratchBreakdown(t *testing.T) {
	d := "/work/report/full-2026-12-02/"
	c := compareCosts(d+"engine-file.pprof", d+"reference-file.pprof", 3000000)
	if c == nil {
		t.Fatal("nil")
	}
	fmt.Println(c.Engine.NsPerEvent, c.Engine.Total)
	fmt.Println(c.Reference.NsPerEvent, c.Reference.Total)
	fmt.Println(c.Why(1.84, 2))
}
