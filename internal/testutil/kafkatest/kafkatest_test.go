package kafkatest

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

func TestClusterListensOnLoopbackAndProducesToExactPartitions(t *testing.T) {
	c := Start(t, kfake.SeedTopics(2, "events"))
	for _, a := range strings.Split(c.Addr, ",") {
		host, _, err := net.SplitHostPort(a)
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("broker address %q is not on 127.0.0.1", a)
		}
	}
	c.ProduceN("events", 1, 7, Value)
	c.AddPartitions("events", 1)
	c.ProduceN("events", 2, 3, Value)
	c.DeleteRecords("events", 1, 2)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := c.Admin().ListEndOffsets(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	starts, err := c.Admin().ListStartOffsets(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32][2]int64{0: {0, 0}, 1: {2, 7}, 2: {0, 3}}
	for p, w := range want {
		s, _ := starts.Lookup("events", p)
		e, _ := ends.Lookup("events", p)
		if s.Offset != w[0] || e.Offset != w[1] {
			t.Errorf("events-%d: offsets [%d, %d), want [%d, %d)", p, s.Offset, e.Offset, w[0], w[1])
		}
	}
}
