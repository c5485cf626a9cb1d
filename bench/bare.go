package main

import (
	"fmt"
	"time"

	"github.com/valyala/fastjson"

	"github.com/sluicehq/sluice/query"
)

// The bare loop: the program a user writes first, without the engine and
// without its rules, to see how fast the tile could go. Each event is
// parsed with fastjson (GetStringBytes of course_id and event_time),
// the event time read with time.Parse(time.RFC3339Nano), its five-minute
// window computed by flooring, and the event counted in a Go map per
// (window, course); one goroutine per core (one franz-go reader per core
// for Kafka), each with its own maps, merged at the end.
//
// It checks nothing the tile does not need: no schema (other columns are
// not looked at, a missing lesson_id or a number in event_id pass), no
// Spark conversion (only RFC 3339, no epoch seconds, no zones by name, no
// session time zone), no malformed-record handling (the first bad event
// stops it). So engine / bare loop is what the engine costs against the
// cheapest program that gets the tile's counts on well-formed input, where
// engine / fair reference (the engine's own decoder, see reference.go) is
// what exactly-once and the engine around the decoder cost.

// counter counts one event value (a JSON line or a Kafka record value)
// into its window; result gives what it counted.
type counter interface {
	add(value []byte) error
	result() *RawResult
}

// refKind names a reference's way of decoding and counting.
type refKind uint8

const (
	fairRef refKind = iota // the engine's decoder and field list (tileCounter)
	bareRef                // fastjson and time.Parse (bareCounter)
)

func (k refKind) String() string {
	if k == bareRef {
		return "bare loop"
	}
	return "fair reference"
}

func (k refKind) newCounter() counter {
	if k == bareRef {
		return newBareCounter()
	}
	return newTileCounter()
}

// bareCounter is the bare loop's body: counts per window start (µs) and
// course, the course's string made once per (window, course).
type bareCounter struct {
	p       fastjson.Parser
	size    int64
	windows map[int64]map[string]*int64
	maxTime int64
}

func newBareCounter() *bareCounter {
	return &bareCounter{size: windowSize.Microseconds(), windows: map[int64]map[string]*int64{}}
}

// decode is the bare loop's parsing: the course and the event time, µs.
func (c *bareCounter) decode(value []byte) (course []byte, us int64, err error) {
	v, err := c.p.ParseBytes(value)
	if err != nil {
		return nil, 0, err
	}
	course = v.GetStringBytes(query.GeneratorCourseID)
	ts := v.GetStringBytes(query.GeneratorEventTime)
	if course == nil || ts == nil {
		return nil, 0, fmt.Errorf("no %s or %s string in %s", query.GeneratorCourseID, query.GeneratorEventTime, value)
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return nil, 0, err
	}
	return course, t.UnixMicro(), nil
}

func (c *bareCounter) add(value []byte) error {
	course, us, err := c.decode(value)
	if err != nil {
		return err
	}
	c.maxTime = max(c.maxTime, us)
	start := us - us%c.size
	if us%c.size < 0 {
		start -= c.size
	}
	w := c.windows[start]
	if w == nil {
		w = map[string]*int64{}
		c.windows[start] = w
	}
	if n := w[string(course)]; n != nil {
		*n++
		return nil
	}
	n := int64(1)
	w[string(course)] = &n
	return nil
}

func (c *bareCounter) result() *RawResult {
	res := &RawResult{Counts: map[WindowKey]int64{}}
	for start, w := range c.windows {
		for course, n := range w {
			res.Counts[WindowKey{start, course}] = *n
		}
	}
	res.MaxTime = c.maxTime
	return res
}
