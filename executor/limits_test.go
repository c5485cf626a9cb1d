package executor

import (
	"testing"

	"github.com/sluicehq/sluice/executor/shuffle"
	"github.com/sluicehq/sluice/wire"
	"github.com/sluicehq/sluice/wire/rpcauth"
)

// Every piece size leaves room for the message's other fields under the
// limit.
func TestPiecesFitUnderTheMessageLimit(t *testing.T) {
	const headroom = 64 << 10
	for name, n := range map[string]int{
		"wire.DefaultChunkBytes":    wire.DefaultChunkBytes,
		"shuffle.DefaultPieceBytes": shuffle.DefaultPieceBytes,
		"reduceRowChunkBytes":       reduceRowChunkBytes,
	} {
		if n+headroom > rpcauth.MaxMessageBytes {
			t.Errorf("%s = %d leaves less than %d bytes under MaxMessageBytes %d", name, n, headroom, rpcauth.MaxMessageBytes)
		}
	}
}
