package progress

import (
	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/ids"
)

// Observer is told what one query's batch loop did, from the loop's own
// goroutine, in order. It is the loop's only output besides the
// checkpoint and the sink: the tracker, metrics, progress files and the
// CLI's printers implement it. An Observer must not block for long: the
// loop waits for it.
type Observer interface {
	// BatchStarted: batch's offsets are logged (or, for a batch re-run
	// as logged, found in the log) and its tasks start.
	BatchStarted(batch ids.BatchID)
	// Retrying: attempt of batch failed for a reason that retrying can
	// fix, and it will be tried again (attempt 0: planning batch failed).
	// The query is recovering, not failed.
	Retrying(batch ids.BatchID, attempt int, err error)
	// Idle: the loop found nothing to run (no new data and no no-data
	// batch due): once when a run starts idle, and again each time it
	// becomes idle after running batches. With availableNow or once it is
	// told only when the run stops without having run a batch.
	Idle(Idle)
	// Committed: a batch committed; r is its report.
	Committed(r *Report)
}

// Idle says where an idle query stands.
type Idle struct {
	// LastCommitted is the last committed batch id (-1 for none).
	LastCommitted ids.BatchID
	// Watermark is the watermark the next batch will use.
	Watermark eventtime.Watermark
}

// Funcs is an Observer of whichever callbacks are set.
type Funcs struct {
	OnBatchStarted func(batch ids.BatchID)
	OnRetrying     func(batch ids.BatchID, attempt int, err error)
	OnIdle         func(Idle)
	OnCommitted    func(*Report)
}

func (f Funcs) BatchStarted(batch ids.BatchID) {
	if f.OnBatchStarted != nil {
		f.OnBatchStarted(batch)
	}
}

func (f Funcs) Retrying(batch ids.BatchID, attempt int, err error) {
	if f.OnRetrying != nil {
		f.OnRetrying(batch, attempt, err)
	}
}

func (f Funcs) Idle(i Idle) {
	if f.OnIdle != nil {
		f.OnIdle(i)
	}
}

func (f Funcs) Committed(r *Report) {
	if f.OnCommitted != nil {
		f.OnCommitted(r)
	}
}

// Observers tells each of its observers (nil ones skipped), in order.
type Observers []Observer

func (os Observers) BatchStarted(batch ids.BatchID) {
	for _, o := range os {
		if o != nil {
			o.BatchStarted(batch)
		}
	}
}

func (os Observers) Retrying(batch ids.BatchID, attempt int, err error) {
	for _, o := range os {
		if o != nil {
			o.Retrying(batch, attempt, err)
		}
	}
}

func (os Observers) Idle(i Idle) {
	for _, o := range os {
		if o != nil {
			o.Idle(i)
		}
	}
}

func (os Observers) Committed(r *Report) {
	for _, o := range os {
		if o != nil {
			o.Committed(r)
		}
	}
}

// Committed is an Observer of committed batches only.
func Committed(fn func(*Report)) Observer { return Funcs{OnCommitted: fn} }
