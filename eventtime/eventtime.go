package eventtime

// Micros per millisecond.
const msMicros = 1000

// Spec describes Spark's window(column, size, slide, startTime) in
// microseconds. Slide equals Size for a tumbling window.
type Spec struct {
	Size, Slide, StartTime int64
}

// Windows returns the starts of every window [start, start+Size) containing
// t, earliest first, appended to dst. Starts are aligned to StartTime +
// k*Slide with k an integer (floored, also before the epoch); a time equal
// to a window's end belongs to the next window.
func (w Spec) Windows(t int64, dst []int64) []int64 {
	last := t - floorMod(t-w.StartTime, w.Slide) // greatest aligned start <= t
	n := (w.Size + w.Slide - 1) / w.Slide        // ceil(size/slide) candidates
	for i := n - 1; i >= 0; i-- {
		start := last - i*w.Slide
		if start <= t && t < start+w.Size {
			dst = append(dst, start)
		}
	}
	return dst
}

func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// Watermark is the event-time watermark, in microseconds (always a whole
// number of milliseconds). It starts at 0, the epoch.
type Watermark int64

// WatermarkFromMillis is the watermark ms milliseconds after the epoch, as
// the checkpoint's log entries write it.
func WatermarkFromMillis(ms int64) Watermark { return Watermark(ms * msMicros) }

// Millis is w in whole milliseconds (rounded down), as the checkpoint's
// log entries and progress reports write it: exact for every watermark
// Advance returns.
func (w Watermark) Millis() int64 { return floorDiv(int64(w), msMicros) }

// Advance returns the watermark after a batch whose rows had maximum event
// time maxEventTime (ok false: the batch had no rows with an event time):
// max(prev, truncateToMillis(maxEventTime) - delay), never below 0. The rows
// a batch drops as late still count toward maxEventTime.
func Advance(prev Watermark, maxEventTime int64, ok bool, delay int64) Watermark {
	if !ok {
		return prev
	}
	ms := floorDiv(maxEventTime, msMicros) * msMicros
	candidate := ms - floorDiv(delay, msMicros)*msMicros
	if candidate < 0 {
		candidate = 0
	}
	if Watermark(candidate) > prev {
		return Watermark(candidate)
	}
	return prev
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// Late reports whether a partial aggregate whose event-time bound is end
// (a window's end, or the raw event time when grouping by the event-time
// column) is dropped as late against the previous batch's watermark:
// end <= W_late.
func Late(end int64, wLate Watermark) bool { return end <= int64(wLate) }

// Evictable reports whether a group whose event-time bound is end is final
// against this batch's watermark: end <= W_evict. Append emits it and drops
// it; update drops it silently.
func Evictable(end int64, wEvict Watermark) bool { return end <= int64(wEvict) }

// Batch holds the two watermarks a batch uses (docs/semantics.md, "Late rows"):
// Late is the previous batch's watermark (rows at or before it are dropped),
// Evict is this batch's (groups at or before it are final).
type Batch struct {
	Late, Evict Watermark
}

// NeedsNoDataBatch reports whether a no-data batch should run after a batch
// that used watermark used and produced next (docs/semantics.md, "No-data batches"): the
// query has a stateful operator that evicts by watermark (append or update
// with a watermark), the setting is on, and the watermark rose.
func NeedsNoDataBatch(evictsByWatermark, enabled bool, used, next Watermark) bool {
	return evictsByWatermark && enabled && next > used
}

// MaxWindowsPerRow bounds size/slide: a window whose size is more than this
// many times its slide puts every row into that many windows (30 days
// sliding by 1 second is 2.6 million), which no batch can hold. Validation
// refuses it.
const MaxWindowsPerRow = 1000

// WindowsPerRow is how many windows one row falls into: ceil(size/slide).
func WindowsPerRow(size, slide int64) int64 {
	if slide <= 0 {
		return 1
	}
	return (size + slide - 1) / slide
}

// TooFarAhead reports whether an event time t (microseconds) is more than
// maxAhead (microseconds; 0 or less: the guard is off, as in Spark) ahead
// of the batch's processing time batchTimeMs (the batch timestamp fixed in
// its offset-log entry, so a re-run decides the same). Such a row is set
// aside as malformed instead of moving the watermark: one bad clock would
// otherwise push the watermark so far that every later row is late. A time
// exactly maxAhead ahead is kept, and so is every row when the batch's
// processing time is unknown (0).
func TooFarAhead(t, batchTimeMs, maxAhead int64) bool {
	if maxAhead <= 0 || batchTimeMs <= 0 {
		return false
	}
	return t > batchTimeMs*msMicros+maxAhead
}

// Jump is how far the watermark moved in one batch, in microseconds, and
// whether that is more than maxJump (0 or less: never). The first rise from
// the epoch (prev 0) is how every query starts and is not a jump.
func Jump(prev, next Watermark, maxJump int64) (int64, bool) {
	d := int64(next - prev)
	if prev <= 0 || maxJump <= 0 {
		return d, false
	}
	return d, d > maxJump
}
