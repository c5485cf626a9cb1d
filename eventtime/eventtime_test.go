package eventtime

import (
	"reflect"
	"testing"
	"time"
)

func us(d time.Duration) int64 { return d.Microseconds() }

func TestWindowsAreHalfOpenAndAligned(t *testing.T) {
	five := us(5 * time.Minute)
	tumbling := Spec{Size: five, Slide: five}
	cases := []struct {
		name string
		w    Spec
		t    int64
		want []int64
	}{
		{"inside", tumbling, us(7 * time.Minute), []int64{five}},
		{"at start", tumbling, five, []int64{five}},
		{"at end belongs to next", tumbling, 2 * five, []int64{2 * five}},
		{"before epoch floors", tumbling, -1, []int64{-five}},
		{"sliding 10m/5m", Spec{Size: 2 * five, Slide: five}, us(7 * time.Minute), []int64{0, five}},
		{"sliding size not multiple", Spec{Size: us(7 * time.Minute), Slide: us(3 * time.Minute)}, us(7 * time.Minute), []int64{us(3 * time.Minute), us(6 * time.Minute)}},
		{"startTime offset", Spec{Size: five, Slide: five, StartTime: us(2 * time.Minute)}, us(3 * time.Minute), []int64{us(2 * time.Minute)}},
		{"startTime offset before", Spec{Size: five, Slide: five, StartTime: us(2 * time.Minute)}, us(1 * time.Minute), []int64{us(-3 * time.Minute)}},
		{"gap windows (slide > size)", Spec{Size: us(time.Minute), Slide: five}, us(2 * time.Minute), nil},
	}
	for _, c := range cases {
		got := c.w.Windows(c.t, nil)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: Windows(%d) = %v, want %v", c.name, c.t, got, c.want)
		}
	}
}

func TestWatermarkTruncatesToMillisOnlyRisesAndStartsAtEpoch(t *testing.T) {
	delay := us(10 * time.Minute)
	w := Advance(0, us(5*time.Minute), true, delay)
	if w != 0 {
		t.Fatalf("watermark below epoch = %d, want 0", w)
	}
	w = Advance(0, us(20*time.Minute)+1999, true, delay) // 1.999 ms truncated to 1 ms
	if want := Watermark(us(10*time.Minute) + 1000); w != want {
		t.Fatalf("watermark = %d, want %d", w, want)
	}
	if w2 := Advance(w, us(15*time.Minute), true, delay); w2 != w {
		t.Fatalf("watermark fell to %d", w2)
	}
	if w3 := Advance(w, 0, false, delay); w3 != w {
		t.Fatalf("empty batch moved watermark to %d", w3)
	}
}

func TestLateAndEvictableUseLessOrEqual(t *testing.T) {
	if !Late(100, 100) || Late(101, 100) {
		t.Fatal("Late must be end <= watermark")
	}
	if !Evictable(100, 100) || Evictable(101, 100) {
		t.Fatal("Evictable must be end <= watermark")
	}
}

func TestTooFarAheadIsOffByDefaultAndKeepsTheBound(t *testing.T) {
	batchMs := int64(1_700_000_000_000)
	now := batchMs * 1000
	hour := us(time.Hour)
	cases := []struct {
		name     string
		t, ahead int64
		want     bool
	}{
		{"off: far future kept", now + 100*365*24*hour, 0, false},
		{"off: negative setting", now + 100*hour, -1, false},
		{"behind now", now - hour, hour, false},
		{"exactly the bound is kept", now + hour, hour, false},
		{"one microsecond past the bound", now + hour + 1, hour, true},
		{"year 2099", us(129 * 365 * 24 * time.Hour), hour, true},
	}
	if TooFarAhead(now+100*hour, 0, hour) {
		t.Error("a batch without a processing time set a row aside")
	}
	for _, c := range cases {
		if got := TooFarAhead(c.t, batchMs, c.ahead); got != c.want {
			t.Errorf("%s: TooFarAhead(%d, %d, %d) = %v, want %v", c.name, c.t, batchMs, c.ahead, got, c.want)
		}
	}
}

func TestJumpIgnoresTheFirstRiseAndReportsBeyondTheBound(t *testing.T) {
	day := us(24 * time.Hour)
	cases := []struct {
		name       string
		prev, next Watermark
		max        int64
		wantD      int64
		want       bool
	}{
		{"first rise from the epoch", 0, Watermark(20000 * day), day, 20000 * day, false},
		{"no move", Watermark(day), Watermark(day), day, 0, false},
		{"exactly the bound", Watermark(day), Watermark(2 * day), day, day, false},
		{"past the bound", Watermark(day), Watermark(2*day + 1000), day, day + 1000, true},
		{"off", Watermark(day), Watermark(900 * day), 0, 899 * day, false},
	}
	for _, c := range cases {
		d, got := Jump(c.prev, c.next, c.max)
		if d != c.wantD || got != c.want {
			t.Errorf("%s: Jump = %d, %v; want %d, %v", c.name, d, got, c.wantD, c.want)
		}
	}
}

func TestWindowsPerRow(t *testing.T) {
	cases := []struct{ size, slide, want int64 }{
		{us(5 * time.Minute), us(5 * time.Minute), 1},
		{us(10 * time.Minute), us(5 * time.Minute), 2},
		{us(7 * time.Minute), us(3 * time.Minute), 3},
		{us(30 * 24 * time.Hour), us(time.Second), 2_592_000},
	}
	for _, c := range cases {
		if got := WindowsPerRow(c.size, c.slide); got != c.want {
			t.Errorf("WindowsPerRow(%d, %d) = %d, want %d", c.size, c.slide, got, c.want)
		}
	}
}

func TestWatermarkMillisRoundTripsWholeMilliseconds(t *testing.T) {
	for _, ms := range []int64{0, 1, 60_000, 1_772_442_060_000} {
		w := WatermarkFromMillis(ms)
		if int64(w) != ms*1000 || w.Millis() != ms {
			t.Errorf("%d ms: watermark %d µs, back %d ms", ms, w, w.Millis())
		}
	}
	if got := Advance(0, 1_772_442_060_123_456, true, 0); WatermarkFromMillis(got.Millis()) != got {
		t.Errorf("Advance gave %d µs, not a whole number of milliseconds", got)
	}
	if got := Watermark(1500).Millis(); got != 1 {
		t.Errorf("1500 µs is %d ms, want 1 (rounded down)", got)
	}
}
