package syncbuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Concurrent writers lose nothing and a reader may read meanwhile (run
// with -race to check the locking).
func TestConcurrentWritesAreAllKept(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				fmt.Fprintf(&b, "w%d-%d\n", w, i)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 800 {
		t.Fatalf("%d lines, want 800", n)
	}
}
