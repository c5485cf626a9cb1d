package microbatch

import (
	"time"

	"github.com/sluicehq/sluice/eventtime"
	"github.com/sluicehq/sluice/row"
)

func fmtWatermark(w eventtime.Watermark) string { return row.FormatTimestamp(int64(w)) }

func fmtMicros(us int64) string { return row.FormatTimestamp(us) }

func ms(d time.Duration) int64 { return d.Milliseconds() }
