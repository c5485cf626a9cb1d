package parquet

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice/objstore"
)

// Replacement states.
const (
	// StatePending: the record is written, the new files may not be
	// visible yet; a reader takes the replacement as in effect only if
	// every added file is there (else the removed files still are).
	StatePending = "pending"
	// StateDone: the new files are visible and the old ones deleted.
	StateDone = "done"
)

// Replacement is a replacement record, _sink_log/[<queryID>/]replace-<id>:
// driver compact's atomic swap of a date's files. It never takes a batch
// number (the query's driver owns those, and treats an existing N as its
// own committed batch); readers merge it with the batch entries, and the
// query's next compacted entry folds it in once done.
type Replacement struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	QueryID string `json:"queryId"` // the log's query
	// Date is the window_date= partition replaced.
	Date string `json:"date"`
	// Remove are the files replaced, Add the files replacing them.
	Remove []string `json:"remove"`
	Add    []string `json:"add"`
	// Uploads are the staged new files (a store without directory
	// exchange); Staging is the directory the exchange used (the local
	// filesystem), relative to the sink path.
	Uploads []Upload `json:"uploads,omitempty"`
	Staging string   `json:"staging,omitempty"`
	State   string   `json:"state"`
	Created string   `json:"created"`
}

func replacementKey(l logLayout, id string) string { return l.prefix + replacePrefix + id }

func readReplacement(ctx context.Context, store objstore.Store, l logLayout, id string) (*Replacement, error) {
	key := replacementKey(l, id)
	data, err := store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read sink log replacement: %w", err)
	}
	var r Replacement
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("read sink log replacement %s: %w", key, err)
	}
	if r.Version != compactVersion {
		return nil, fmt.Errorf("read sink log replacement %s: format version %d, this build reads %d", key, r.Version, compactVersion)
	}
	if r.ID != id {
		return nil, fmt.Errorf("read sink log replacement %s: it names id %q", key, r.ID)
	}
	return &r, nil
}

// checkReplacementID accepts ids made of letters, digits, '-' and '_'.
func checkReplacementID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("replacement id %q: want 1 to 128 characters", id)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("replacement id %q has character %q", id, r)
		}
	}
	return nil
}
