package statestore

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/objstore"
)

// streamSum streams the state file key and returns its checksum (the
// 4-byte trailer, as fileSum) and whether it is long enough to have one,
// holding one read buffer, never the whole file.
func streamSum(ctx context.Context, store objstore.Store, key string) (uint32, bool, error) {
	rc, err := objstore.GetReader(ctx, store, key)
	if err != nil {
		return 0, false, err
	}
	defer rc.Close()
	var tail [4]byte
	var n int64
	buf := make([]byte, 64<<10)
	for {
		k, err := rc.Read(buf)
		if k > 0 {
			if k >= 4 {
				copy(tail[:], buf[k-4:k])
			} else {
				copy(tail[:], append(tail[k:], buf[:k]...))
			}
			n += int64(k)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, false, fmt.Errorf("read %s: %w", key, err)
		}
	}
	return binary.BigEndian.Uint32(tail[:]), n >= 4, nil
}
