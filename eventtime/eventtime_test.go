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
