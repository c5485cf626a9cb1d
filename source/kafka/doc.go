// Package kafka is the Kafka source: it plans offset ranges of Kafka
// partitions on the driver and reads exact ranges in map tasks, with
// Spark's Kafka source options and semantics, on franz-go (kgo for reads,
// kadm for offset look-ups).
//
// # What it owns
//
//   - Options (options.go): bootstrapServers; subscribe (a topic or a comma
//     list), subscribePattern (a regular expression matched against whole
//     topic names, as Kafka does; topics are discovered as they appear) or
//     assign ({"topic":[0,1]}); startingOffsets; failOnDataLoss;
//     maxOffsetsPerTrigger; minPartitions; minOffsetsPerTask (Sluice's:
//     ranges smaller than this share a read task); commitOffsetsToGroup; and the
//     kafka.* client options it maps to franz-go (security.protocol,
//     sasl.mechanism PLAIN/SCRAM-SHA-256/SCRAM-SHA-512 with sasl.jaas.config
//     or sasl.username/sasl.password, OAUTHBEARER with
//     sasl.oauthbearer.token.file (re-read at every authentication; a
//     Sluice option), AWS_MSK_IAM with credentials from the AWS chain the
//     S3 store uses (sasl.go), PEM ssl.truststore/ssl.keystore,
//     ssl.endpoint.identification.algorithm, isolation.level, client.id and
//     fetch sizes). Unknown kafka.* options are refused with the list of
//     supported ones. Secrets never appear in errors or logs; Redacted
//     gives a copy of the options safe to log.
//   - Offsets (offsets.go): Spark's JSON, {"topic":{"0":42,"1":7}}, topics
//     sorted by name and partitions in numeric order, no spaces, so one
//     position always has one encoding. An offset is the next offset to
//     read: an exclusive end.
//   - Planning (kafka.go, plan.go): Initial (startingOffsets), Latest (high
//     watermarks of every subscribed partition), Next (the end of the next
//     batch, capped by maxOffsetsPerTrigger in proportion to each
//     partition's backlog with Spark's rateLimit arithmetic, so batches are
//     Spark's offset for offset), Splits (read tasks: one
//     per partition range, cut further when minPartitions asks for more,
//     as Spark's KafkaOffsetRangeCalculator, and small ranges grouped so
//     that a task carries about minOffsetsPerTask offsets), Lag, and
//     CommitToGroup. The arithmetic (rateLimit, splitRanges, planTasks) is
//     pure and tested on its own.
//   - Reading (read.go): Read reads a task's ranges with Fetch requests it
//     builds itself (one per broker per round, carrying every partition of
//     the task that the broker leads, at exact offsets), through the
//     source's one client, never a consumer group. A gone offset answers
//     OFFSET_OUT_OF_RANGE, which is checked against the listed offsets, so
//     a range deleted after it was planned fails with a *DataLossError. A
//     partition leaves the requests at the end of its range (no read waits
//     for a fetch timeout); records reach the callback range by range in
//     offset order; records fetched past a range's end are kept (bounded)
//     for the next batch's range. Transaction markers are consumed (not
//     delivered) so that a range ending on one finishes; compaction gaps
//     are passed over.
//   - Clients (clients.go): a process's cache of clients keyed by the
//     connection settings, so that queries and batches share connections.
//
// # Data loss
//
// An offset the query needs that is below the partition's earliest offset
// (retention, DeleteRecords) or above its latest offset (the topic was
// deleted and recreated) is data loss. It is checked when planning (Next),
// when splitting (Splits, which also serves re-runs of logged batches) and
// when reading (Read). With failOnDataLoss (the default) the query fails
// with a *DataLossError that names the topic, partition, wanted offset and
// earliest offset, and matches ErrDataLoss. Without it, a warning is logged
// and reading continues from the earliest available offset (for a
// recreated topic: from the new topic's start).
//
// Skip counts: the offsets stay exactly in Spark's format, so the number of
// offsets skipped is not written into them. Next and Splits record it in
// memory, keyed by the batch's (start, end), and SkippedOffsets reports it;
// a restarted driver recomputes it when it calls Splits for the re-run.
// Offsets lost while a map task reads (after Splits) are logged by that
// task and not counted.
//
// # Partitions and topics that appear
//
// A partition in the latest offsets but not in a batch's start offsets (a
// partition added with CreatePartitions, or a new topic matching
// subscribePattern) is read from its earliest offset. Each planning call
// asks a broker for fresh metadata, so they are seen at the next trigger.
//
// # Consumer groups
//
// The checkpoint is the only cursor: group offsets are never read. With
// commitOffsetsToGroup set, the engine may call CommitToGroup after a batch
// commits, so that Kafka tools show the query's progress; this is for
// display only.
//
// # What it must not do
//
// It does not decode record values (the engine does, with the query's
// schema), keep any package-level state, join consumer groups, or interpret
// the engine's checkpoint. It does not sleep to wait, except a short pause
// before retrying a fetch that failed (leader moving, broker away); reads
// are bounded by the context and the poll timeout.
package kafka
