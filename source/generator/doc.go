// Package generator is the synthetic source: course events (event_id,
// course_id, lesson_id, event_time) as JSON lines, for labs, demos, tests
// and benchmarks.
//
// Row i's content is a pure function of (options, i): a splitmix64 hash of
// the seed and i picks the course (skewed toward a few hot courses), the
// lesson, the event-time jitter and whether the row is late. There is no
// shared random state, so any split can be generated anywhere, any number of
// times, with the same bytes.
//
// An offset is {"row":N,"startedAtMs":T}: N rows have been planned, and T is
// the wall-clock start of the query (ms), which paces an unbounded generator
// at rowsPerSecond. The package does no I/O and reads no clock: "now" is an
// argument of Latest.
package generator
