package cluster

import (
	"sync"
	"sync/atomic"
	"time"
)

// NodeStats are an executor's figures since it started, for its metrics.
type NodeStats struct {
	MapTasks, ReduceTasks int64 // completed
	TaskFailures          int64
	RunningTasks          int
	ShuffleBytes          int64 // pushed by this executor's map tasks
	StateRows             int64 // in the state partitions it holds
	Registered            bool  // registered, with a valid lease
}

// nodeCounters are updated by the task handlers.
type nodeCounters struct {
	maps, reduces, failures, shuffle atomic.Int64

	mu        sync.Mutex
	stateRows map[stateKey]int64
}

type stateKey struct {
	query     string
	partition int
}

func (c *nodeCounters) setStateRows(query string, partition int, rows int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stateRows == nil {
		c.stateRows = map[stateKey]int64{}
	}
	c.stateRows[stateKey{query, partition}] = rows
}

// Stats returns the node's figures.
func (n *Node) Stats() NodeStats {
	c := &n.counters
	s := NodeStats{
		MapTasks: c.maps.Load(), ReduceTasks: c.reduces.Load(), TaskFailures: c.failures.Load(),
		RunningTasks: int(n.running.Load()), ShuffleBytes: c.shuffle.Load(),
		Registered: n.ID() != "" && n.lease.valid(time.Now()),
	}
	c.mu.Lock()
	for _, r := range c.stateRows {
		s.StateRows += r
	}
	c.mu.Unlock()
	return s
}
