// Package syncbuf is a bytes.Buffer safe for concurrent writers and a
// reader: where tests and the benchmark collect the log of a logger or a
// child process while its goroutines still write.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is safe for concurrent use; its zero value is empty.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
