package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/row"
	"github.com/sluicehq/sluice/source"
)

// Kind is the Kafka source as the catalog lists it (source.kafka).
type Kind struct{}

var _ source.Kind = Kind{}

// The metadata columns of a Kafka record, in Record.Meta's order: Spark's
// Kafka source columns key, topic, partition, offset and timestamp.
const (
	MetaKey = iota
	MetaTopic
	MetaPartition
	MetaOffset
	MetaTimestamp
)

var metaColumns = []source.MetaColumn{
	MetaKey:       {Name: "kafka.key", Type: row.String},
	MetaTopic:     {Name: "kafka.topic", Type: row.String},
	MetaPartition: {Name: "kafka.partition", Type: row.Long},
	MetaOffset:    {Name: "kafka.offset", Type: row.Long},
	MetaTimestamp: {Name: "kafka.timestamp", Type: row.Timestamp},
}

func (Kind) Name() string                           { return "kafka" }
func (Kind) Configured(src *query.Source) bool      { return src.Kafka != nil }
func (Kind) MetaColumns() []source.MetaColumn       { return metaColumns }
func (Kind) FixedSchema() []query.Field             { return nil }
func (Kind) Validate(s *query.Spec) []query.Problem { _, p := check(*s.Source.Kafka); return p }

// Open builds the source, sharing a client through env.Shared.
func (Kind) Open(ctx context.Context, s *query.Spec, env source.Env) (source.Source, error) {
	src, err := New(Config{Kafka: *s.Source.Kafka, Logger: env.Logger, Clients: env.Shared})
	if err != nil {
		return nil, fmt.Errorf("source.kafka: %w", err)
	}
	return src, nil
}

// Explain says how the source plans, caps and splits batches.
func (Kind) Explain(src *query.Source) source.Explanation {
	k := src.Kafka
	topics := "subscribe " + k.Subscribe
	switch {
	case k.SubscribePattern != "":
		topics = "subscribePattern " + k.SubscribePattern
	case k.Assign != "":
		topics = "assign " + k.Assign
	}
	starting := k.StartingOffsets
	if starting == "" {
		starting = "latest"
	}
	title := fmt.Sprintf("KafkaSource [%s] bootstrapServers %s", topics, k.BootstrapServers)
	detail := []string{
		fmt.Sprintf("start: the checkpoint's last offsets; startingOffsets %s only when the checkpoint has none", starting),
		"plan: read each partition's latest offset, the batch is [last end, latest) per partition, logged in offsets/N before any task runs",
	}
	if k.MaxOffsetsPerTrigger > 0 {
		detail = append(detail, fmt.Sprintf("cap: maxOffsetsPerTrigger %d records per batch, split over partitions in proportion to their backlog (Spark's rateLimit)", k.MaxOffsetsPerTrigger))
	} else {
		detail = append(detail, "cap: none (maxOffsetsPerTrigger unset): a batch takes every record available when it is planned")
	}
	if k.MinPartitions > 0 {
		detail = append(detail, fmt.Sprintf("tasks: one per topic-partition range, ranges split until there are at least minPartitions %d", k.MinPartitions))
	} else {
		detail = append(detail, "tasks: one per topic-partition range")
	}
	if k.FailsOnDataLoss() {
		detail = append(detail, "failOnDataLoss true: an offset the checkpoint needs that the broker no longer has stops the query, naming topic, partition and offsets")
	} else {
		detail = append(detail, "failOnDataLoss false: offsets the broker no longer has are skipped with a warning")
	}
	if k.CommitOffsetsToGroup != "" {
		detail = append(detail, fmt.Sprintf("after each commit, offsets are published to consumer group %s for display (never read back)", k.CommitOffsetsToGroup))
	}
	cap := ""
	if k.MaxOffsetsPerTrigger > 0 {
		cap = fmt.Sprintf("%d records (maxOffsetsPerTrigger)", k.MaxOffsetsPerTrigger)
	}
	return source.Explanation{Title: title, Detail: detail, Cap: cap}
}

// Locations are the topics the source reads and the local files its
// kafka.*.location options name.
func (Kind) Locations(src *query.Source) []source.Location {
	k := src.Kafka
	var out []source.Location
	for _, t := range strings.Split(k.Subscribe, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, source.Location{Field: field + "subscribe", Value: t, Use: source.Topic})
		}
	}
	if k.SubscribePattern != "" {
		out = append(out, source.Location{Field: field + "subscribePattern", Value: k.SubscribePattern, Use: source.TopicPattern})
	}
	var assigned map[string]json.RawMessage
	if json.Unmarshal([]byte(k.Assign), &assigned) == nil {
		for _, t := range slices.Sorted(maps.Keys(assigned)) {
			out = append(out, source.Location{Field: field + "assign", Value: t, Use: source.Topic})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(k.Options)) {
		if strings.HasSuffix(name, ".location") {
			out = append(out, source.Location{Field: field + "kafka." + strings.TrimPrefix(name, "kafka."), Value: k.Options[name], Use: source.ReadsFile})
		}
	}
	return out
}

// Description is progress's sources[].description.
func (s *Source) Description() string {
	return "KafkaV2[" + s.desc + "]"
}

// recordMeta is a record's metadata columns (source.Metadata): the
// range's topic and partition, built once per range, and the current
// record's key, offset and timestamp.
type recordMeta struct {
	topic, partition row.Value
	key              []byte
	offset, ts       int64
}

func (m *recordMeta) Column(i int) row.Value {
	switch i {
	case MetaKey:
		if m.key == nil {
			return row.Value{}
		}
		return row.StringValue(string(m.key))
	case MetaTopic:
		return m.topic
	case MetaPartition:
		return m.partition
	case MetaOffset:
		return row.LongValue(m.offset)
	case MetaTimestamp:
		return row.TimestampValue(m.ts)
	}
	return row.Value{}
}
