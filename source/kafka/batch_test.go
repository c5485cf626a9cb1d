package kafka

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/query"
)

// kgoReading is what kgo.ProcessFetchPartition makes of a partition's
// response read from offset: the oracle plainRecords must equal.
func kgoReading(s *Source, rp *kmsg.FetchResponseTopicPartition, topic string, offset int64) ([]record, int64, error) {
	fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
		KeepControlRecords: true, Offset: offset, IsolationLevel: kgo.ReadUncommitted(), Topic: topic, Partition: rp.Partition,
	}, rp, s.decompressor, nil)
	return kgoRecords(fp.Records), next, fp.Err
}

// sameRecords compares two readings record by record, a null key or value
// apart from an empty one.
func sameRecords(got, want []record) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.offset != w.offset || g.timestamp != w.timestamp || (g.key == nil) != (w.key == nil) || (g.value == nil) != (w.value == nil) ||
			!bytes.Equal(g.key, w.key) || !bytes.Equal(g.value, w.value) {
			return fmt.Errorf("record %d = %+v, want %+v", i, g, w)
		}
	}
	return nil
}

// On what a broker sends (one partition per compression codec; null,
// empty and set keys and values; headers; several records per batch;
// reads from offsets inside batches and fetch sizes that cut the last
// batch short), the plain-batch reader answers and gives exactly kgo's
// records and next offset.
func TestPlainRecordsAreKgosOnTheBrokersResponses(t *testing.T) {
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}
	c := kafkatest.Start(t, kfake.SeedTopics(int32(len(codecs)), "plain"))
	const n = 1500
	base := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	for p, codec := range codecs {
		prod := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(codec),
			kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(16<<10))
		var recs []*kgo.Record
		for i := range n {
			r := &kgo.Record{Topic: "plain", Partition: int32(p), Timestamp: base.Add(time.Duration(i*37) * time.Millisecond)}
			switch {
			case i%3 == 0:
			case i%5 == 0:
				r.Key = []byte{}
			default:
				r.Key = fmt.Appendf(nil, "k-%d", i)
			}
			switch {
			case i%7 == 0:
			case i%11 == 0:
				r.Value = []byte{}
			default:
				r.Value = kafkatest.Value(i)
			}
			if i%13 == 0 {
				r.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte("v")}, {Key: "", Value: nil}}
			}
			recs = append(recs, r)
		}
		if err := prod.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ctx := testCtx(t)
	s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "plain"})
	answered := 0
	for _, partBytes := range []int32{1 << 20, 3000, 200} {
		s.set.client.partFetchBytes = partBytes
		for p := range int32(len(codecs)) {
			for _, from := range []int64{0, 1, 17, 499, n / 2, n - 1, n} {
				r := &rangeRead{Range: Range{Topic: "plain", Partition: p, From: from, To: n}, tp: TopicPartition{"plain", p}, next: from}
				call := s.startFetch(ctx, []*rangeRead{r})
				call.wg.Wait()
				call.cancel()
				if len(call.resps) != 1 || call.errs[0] != nil {
					t.Fatalf("fetch %s from %d: %v", r.tp, from, call.errs)
				}
				for _, rt := range call.resps[0].Topics {
					for i := range rt.Partitions {
						rp := &rt.Partitions[i]
						want, wantNext, err := kgoReading(s, rp, "plain", from)
						if err != nil {
							t.Fatalf("%s from %d: kgo: %v", r.tp, from, err)
						}
						got, next, ok := s.plainRecords(nil, rp, from)
						if !ok {
							t.Errorf("%s from %d, %d bytes (codec %d): the plain reader declined", r.tp, from, partBytes, p)
							continue
						}
						answered++
						if next != wantNext {
							t.Errorf("%s from %d, %d bytes: next offset %d, kgo's %d", r.tp, from, partBytes, next, wantNext)
						}
						if err := sameRecords(got, want); err != nil {
							t.Errorf("%s from %d, %d bytes: %v", r.tp, from, partBytes, err)
						}
					}
				}
			}
		}
	}
	if answered == 0 {
		t.Fatal("no response read")
	}
}

// testRecord is one record of a hand-built batch.
type testRecord struct {
	offsetDelta int32
	tsDelta     int64
	key, value  []byte
	headers     int
}

// appendBatch appends a record batch (v2, uncompressed) of recs at first.
func appendBatch(dst []byte, first int64, attrs int16, firstTS int64, recs []testRecord) []byte {
	var body []byte
	body = binary.BigEndian.AppendUint16(body, uint16(attrs))
	last := int32(0)
	for _, r := range recs {
		last = max(last, r.offsetDelta)
	}
	body = binary.BigEndian.AppendUint32(body, uint32(last))
	body = binary.BigEndian.AppendUint64(body, uint64(firstTS))
	body = binary.BigEndian.AppendUint64(body, uint64(firstTS+1000))
	body = binary.BigEndian.AppendUint64(body, ^uint64(0)) // producer id -1
	body = binary.BigEndian.AppendUint16(body, ^uint16(0))
	body = binary.BigEndian.AppendUint32(body, ^uint32(0))
	body = binary.BigEndian.AppendUint32(body, uint32(len(recs)))
	for _, r := range recs {
		rec := []byte{0}
		rec = kbin.AppendVarlong(rec, r.tsDelta)
		rec = kbin.AppendVarint(rec, r.offsetDelta)
		rec = kbin.AppendVarintBytes(rec, r.key)
		rec = kbin.AppendVarintBytes(rec, r.value)
		rec = kbin.AppendVarint(rec, int32(r.headers))
		for h := range r.headers {
			rec = kbin.AppendVarintBytes(rec, fmt.Appendf(nil, "h%d", h))
			rec = kbin.AppendVarintBytes(rec, []byte("v"))
		}
		body = kbin.AppendVarint(body, int32(len(rec)))
		body = append(body, rec...)
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(first))
	dst = binary.BigEndian.AppendUint32(dst, uint32(4+1+4+len(body)))
	dst = binary.BigEndian.AppendUint32(dst, 0) // partition leader epoch
	dst = append(dst, 2)
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(body, crc32c))
	return append(dst, body...)
}

func someRecords(n int) []testRecord {
	var recs []testRecord
	for i := range n {
		r := testRecord{offsetDelta: int32(i), tsDelta: int64(i * 10), key: fmt.Appendf(nil, "k%d", i), value: fmt.Appendf(nil, `{"i":%d}`, i), headers: i % 3}
		if i%4 == 0 {
			r.key = nil
		}
		recs = append(recs, r)
	}
	return recs
}

// What the plain reader must leave to kgo: it declines, and kgo's reading
// (an error, a transaction's rules, an old format) stands.
func TestPlainRecordsDeclineWhatOnlyKgoReads(t *testing.T) {
	s := &Source{decompressor: kgo.DefaultDecompressor()}
	plain := appendBatch(nil, 100, 0, 1000, someRecords(5))
	plain = appendBatch(plain, 105, 0x08, 2000, someRecords(3)) // log-append time
	rp := &kmsg.FetchResponseTopicPartition{RecordBatches: plain}
	got, next, ok := s.plainRecords(nil, rp, 102)
	want, wantNext, err := kgoReading(s, rp, "t", 102)
	if !ok || err != nil || next != wantNext || next != 108 {
		t.Fatalf("plain batches: ok %v, next %d; kgo: next %d, %v", ok, next, wantNext, err)
	}
	if err := sameRecords(got, want); err != nil {
		t.Fatal(err)
	}

	badCRC := bytes.Clone(plain)
	badCRC[len(badCRC)-1] ^= 1
	truncatedRecord := appendBatch(nil, 0, 0, 0, someRecords(3))
	binary.BigEndian.PutUint32(truncatedRecord[57:], 4) // claims a fourth record
	copy(truncatedRecord[17:], binary.BigEndian.AppendUint32(nil, crc32.Checksum(truncatedRecord[21:], crc32c)))
	oldFormat := bytes.Clone(plain)
	oldFormat[16] = 1
	for name, batches := range map[string][]byte{
		"transactional":           appendBatch(nil, 0, attrTransactional, 0, someRecords(2)),
		"control":                 appendBatch(nil, 0, attrTransactional|attrControl, 0, someRecords(1)),
		"plain then control":      appendBatch(bytes.Clone(plain), 108, attrControl, 0, someRecords(1)),
		"corrupt CRC":             badCRC,
		"fewer records than said": truncatedRecord,
		"message format v1":       oldFormat,
		"unknown codec":           appendBatch(nil, 0, 7, 0, someRecords(2)),
	} {
		if _, _, ok := s.plainRecords(nil, &kmsg.FetchResponseTopicPartition{RecordBatches: batches}, 0); ok {
			t.Errorf("%s: the plain reader answered", name)
		}
	}
	if _, _, ok := s.plainRecords(nil, &kmsg.FetchResponseTopicPartition{ErrorCode: 1, RecordBatches: plain}, 0); ok {
		t.Error("a partition error: the plain reader answered")
	}
	// A batch cut short by the fetch size ends the reading there, as in kgo.
	cut := plain[:len(plain)-5]
	got, next, ok = s.plainRecords(nil, &kmsg.FetchResponseTopicPartition{RecordBatches: cut}, 0)
	if !ok || next != 105 || len(got) != 5 {
		t.Errorf("cut short: ok %v, next %d, %d records; want the first batch's 5 and next 105", ok, next, len(got))
	}
}

// A record kept for the next batch keeps a null key or value null and an
// empty one empty.
func TestAheadCacheKeepsNullAndEmptyKeysApart(t *testing.T) {
	var c aheadCache
	c.max = 1 << 20
	tp := TopicPartition{"t", 0}
	c.put(tp, 10, 13, []record{{offset: 10, key: nil, value: []byte("a")}, {offset: 11, key: []byte{}, value: nil}, {offset: 12, key: []byte("k"), value: []byte{}}})
	r := &rangeRead{Range: Range{Topic: "t", From: 10, To: 13}, tp: tp, next: 10}
	if !c.take(r) || len(r.buf) != 3 {
		t.Fatalf("take: %d records", len(r.buf))
	}
	b := r.buf
	if b[0].key != nil || b[1].key == nil || len(b[1].key) != 0 || b[1].value != nil || b[2].value == nil || string(b[2].key) != "k" {
		t.Errorf("kept records %+v", b)
	}
}

// frameBatch frames a batch's bytes after its CRC (attributes onwards)
// as a v2 record batch at first, with a valid length and CRC, so that the
// fuzzer's mutations reach the attributes, counts and records.
func frameBatch(dst []byte, first int64, body []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(first))
	dst = binary.BigEndian.AppendUint32(dst, uint32(4+1+4+len(body)))
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = append(dst, 2)
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(body, crc32c))
	return append(dst, body...)
}

// FuzzPlainRecordsAgreeWithKgo: whenever the plain reader answers for a
// partition's bytes (two batches, framed with valid CRCs, and raw bytes
// after them), kgo.ProcessFetchPartition reads them without error into
// the same records and the same next offset.
func FuzzPlainRecordsAgreeWithKgo(f *testing.F) {
	body := func(b []byte) []byte { return b[batchAttrsAt:] }
	b1 := appendBatch(nil, 0, 0, 1000, someRecords(5))
	b2 := appendBatch(nil, 0, 0x08, 2000, someRecords(3))
	f.Add(int64(100), body(b1), body(b2), []byte(nil), int64(0))
	f.Add(int64(100), body(b1), body(b2), []byte(nil), int64(103))
	f.Add(int64(0), body(b1), body(b2), b1[:20], int64(152))
	f.Add(int64(7), body(appendBatch(nil, 0, attrTransactional, 0, someRecords(2))), body(b1), []byte(nil), int64(0))
	f.Add(int64(1<<40), body(b1), []byte{}, []byte{0, 0, 0}, int64(-1))
	s := &Source{decompressor: kgo.DefaultDecompressor()}
	f.Fuzz(func(t *testing.T, first int64, body1, body2, tail []byte, offset int64) {
		batches := frameBatch(nil, first, body1)
		batches = frameBatch(batches, first+50, body2)
		batches = append(batches, tail...)
		rp := &kmsg.FetchResponseTopicPartition{RecordBatches: batches}
		got, next, ok := s.plainRecords(nil, rp, offset)
		if !ok {
			return
		}
		want, wantNext, err := kgoReading(s, rp, "t", offset)
		if err != nil || next != wantNext {
			t.Fatalf("plain reader: next %d; kgo: next %d, %v", next, wantNext, err)
		}
		if err := sameRecords(got, want); err != nil {
			t.Fatal(err)
		}
	})
}
