//go:build !linux

package parquet

import (
	"context"
	"errors"
	"io"

	"github.com/sluicehq/sluice/objstore"
)

// exchangeSupported: no atomic directory exchange here; a local sink is
// compacted with hidden staged files renamed at completion, like S3.
const exchangeSupported = false

var errNoExchange = errors.New("atomic directory exchange needs Linux (renameat2)")

func replaceByExchange(context.Context, *objstore.FS, logLayout, *Replacement, func(int, io.Writer) error, func(string)) error {
	return errNoExchange
}

func finishExchange(context.Context, *objstore.FS, logLayout, *Replacement, func(string)) error {
	return errNoExchange
}
