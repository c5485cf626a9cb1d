package executor

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/ids"
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
	stateRows map[stateKey]stateRows
	lastBatch map[string]ids.BatchID // per query: the newest batch reduced here
}

type stateRows struct {
	batch ids.BatchID
	rows  int64
}

type stateKey struct {
	query     string
	partition ids.PartitionID
}

// setStateRows records a partition's state rows after a reduce task of
// batch. Every batch reduces every partition, so partitions not reduced
// here in the query's newest batch have moved to another executor and no
// longer count (a scrape while a batch's reduces run may briefly count
// only those already done).
func (c *nodeCounters) setStateRows(query string, partition ids.PartitionID, batch ids.BatchID, rows int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stateRows == nil {
		c.stateRows, c.lastBatch = map[stateKey]stateRows{}, map[string]ids.BatchID{}
	}
	c.stateRows[stateKey{query, partition}] = stateRows{batch: batch, rows: rows}
	c.lastBatch[query] = max(c.lastBatch[query], batch)
}

func (c *nodeCounters) heldStateRows() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for k, r := range c.stateRows {
		if r.batch == c.lastBatch[k.query] {
			n += r.rows
		} else {
			delete(c.stateRows, k)
		}
	}
	return n
}

// Stats returns the node's figures.
func (n *Node) Stats() NodeStats {
	c := &n.counters
	s := NodeStats{
		MapTasks: c.maps.Load(), ReduceTasks: c.reduces.Load(), TaskFailures: c.failures.Load(),
		RunningTasks: int(n.running.Load()), ShuffleBytes: c.shuffle.Load(),
		Registered: n.ID() != "" && n.lease.valid(time.Now()),
		StateRows:  c.heldStateRows(),
	}
	return s
}
