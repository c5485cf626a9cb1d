package kafka

import (
	"github.com/sluicehq/sluice/source"

	"fmt"
)

// ErrDataLoss means an offset the query needs is no longer on the broker:
// retention or DeleteRecords removed it, or the topic was deleted and
// recreated. Match it with errors.Is; the details are in a *DataLossError.
var ErrDataLoss = source.ErrDataLoss

// DataLossError says which offset of which partition is gone. It matches
// ErrDataLoss.
type DataLossError struct {
	Topic     string
	Partition int32
	// Wanted is the next offset the query needs.
	Wanted int64
	// Earliest is the partition's earliest available offset (log start),
	// or -1 when the partition no longer exists.
	Earliest int64
	// Latest is the partition's latest offset (high watermark) when known,
	// otherwise -1. Wanted > Latest means the topic was recreated.
	Latest int64
}

func (e *DataLossError) Error() string {
	if e.Earliest < 0 {
		return fmt.Sprintf("kafka data loss: topic %s partition %d no longer exists (was the topic deleted?); "+
			"wanted offset %d, earliest available offset %d; failOnDataLoss is true, set it to false to skip lost data",
			e.Topic, e.Partition, e.Wanted, e.Earliest)
	}
	if e.Latest >= 0 && e.Wanted > e.Latest {
		return fmt.Sprintf("kafka data loss: topic %s partition %d: wanted offset %d is beyond the latest offset %d "+
			"(was the topic deleted and recreated?); earliest available offset is %d; "+
			"failOnDataLoss is true, set it to false to skip lost data",
			e.Topic, e.Partition, e.Wanted, e.Latest, e.Earliest)
	}
	return fmt.Sprintf("kafka data loss: topic %s partition %d: wanted offset %d is no longer available, "+
		"earliest available offset is %d; failOnDataLoss is true, set it to false to skip lost data",
		e.Topic, e.Partition, e.Wanted, e.Earliest)
}

// Is reports whether target is ErrDataLoss.
func (e *DataLossError) Is(target error) bool { return target == ErrDataLoss }
