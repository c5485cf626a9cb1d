package kafka

import "github.com/sluicehq/sluice/source"

// Record metadata as the tests read it.
func recTopic(r *source.Record) string       { return r.Meta.Column(MetaTopic).S }
func recPartition(r *source.Record) int32    { return int32(r.Meta.Column(MetaPartition).I) }
func recTimestamp(r *source.Record) int64    { return r.Meta.Column(MetaTimestamp).I }
func recKey(r *source.Record) string         { return r.Meta.Column(MetaKey).S }
func recOffsetColumn(r *source.Record) int64 { return r.Meta.Column(MetaOffset).I }
