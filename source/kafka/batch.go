package kafka

import (
	"encoding/binary"
	"hash/crc32"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Plain record batches are read here, straight into the read's records,
// instead of through kgo.ProcessFetchPartition, which builds a kgo.Record
// (about 150 bytes with pointers the collector scans) for every record and
// a slice of pointers to them: on a catch-up that was a fifth of a read's
// CPU and most of its garbage. A partition's response is read here only
// when every complete batch in it is plain: magic 2 (the only format since
// Kafka 0.11), neither transactional nor a control batch, with a valid
// CRC, decompressed by the source's decompressor, and every record
// decoding. Anything else (an error code, an old message format, a
// transaction, a corrupt or undecodable batch) declines the whole
// partition, and takeFetch hands it to kgo.ProcessFetchPartition, which
// gives those cases their errors and rules. Where this path answers, it
// gives exactly kgo's records and next offset (batch_test.go compares the
// two on the broker's responses and in a fuzz target).

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// Record batch v2 layout: first offset (8), length (4), partition leader
// epoch (4), magic (1), CRC (4) over the rest, attributes (2), last offset
// delta (4), first timestamp (8), max timestamp (8), producer id (8),
// producer epoch (2), first sequence (4), record count (4), records.
const (
	batchHeaderLen     = 61
	attrCompression    = 0x07
	attrTimestampType  = 0x08
	attrTransactional  = 0x10
	attrControl        = 0x20
	batchMagicAt       = 16
	batchCRCAt         = 17
	batchAttrsAt       = 21
	batchLastDeltaAt   = 23
	batchFirstTSAt     = 27
	batchMaxTSAt       = 35
	batchNumRecordsAt  = 57
	batchLengthFieldAt = 8
)

// plainRecords appends to dst the records of rp at or after offset, in
// offset order, when every complete batch in it is plain (see above), and
// returns the offset to fetch next, as kgo.ProcessFetchPartition does
// (past the last complete batch, even when compaction removed its last
// records). ok false: rp is not plain, dst is unchanged.
func (s *Source) plainRecords(dst []record, rp *kmsg.FetchResponseTopicPartition, offset int64) (recs []record, next int64, ok bool) {
	if rp.ErrorCode != 0 {
		return dst, 0, false
	}
	start := len(dst)
	decline := func() ([]record, int64, bool) {
		clear(dst[start:]) // nothing kept points into rp
		return dst[:start], 0, false
	}
	be := binary.BigEndian
	in := rp.RecordBatches
	next = offset
	for len(in) > batchMagicAt+1 {
		first := int64(be.Uint64(in))
		length := int32(be.Uint32(in[batchLengthFieldAt:])) + 12
		if length < 0 || len(in) < int(length) {
			break // the last batch, cut short by the fetch's size limit
		}
		if in[batchMagicAt] != 2 || length < batchHeaderLen {
			return decline()
		}
		b := in[:length]
		in = in[length:]
		if int32(crc32.Checksum(b[batchAttrsAt:], crc32c)) != int32(be.Uint32(b[batchCRCAt:])) {
			return decline()
		}
		attrs := int16(be.Uint16(b[batchAttrsAt:]))
		if attrs&(attrTransactional|attrControl) != 0 || first < 0 {
			return decline()
		}
		lastOffset := first + int64(int32(be.Uint32(b[batchLastDeltaAt:])))
		if lastOffset < next {
			continue // wholly before the offset asked for
		}
		raw := b[batchHeaderLen:]
		if codec := attrs & attrCompression; codec != 0 {
			var err error
			if raw, err = s.decompressor.Decompress(raw, kgo.CompressionCodecType(codec)); err != nil {
				return decline()
			}
		}
		num := int(int32(be.Uint32(b[batchNumRecordsAt:])))
		if num < 0 || num > len(raw) {
			return decline()
		}
		firstTS, maxTS := int64(be.Uint64(b[batchFirstTSAt:])), int64(be.Uint64(b[batchMaxTSAt:]))
		for range num {
			// As kgo's readRawRecordsDirect decodes a record.
			l, used := kbin.Varint(raw)
			total := used + int(l)
			if used <= 0 || l < 0 || len(raw) < total {
				return decline()
			}
			r := kbin.Reader{Src: raw[used:total]}
			r.Int8() // record attributes, unused
			tsDelta := r.Varlong()
			offsetDelta := r.Varint()
			key := r.VarintBytes()
			value := r.VarintBytes()
			if nh := int(r.VarintArrayLen()); nh > 0 {
				for range nh {
					r.VarintBytes() // header key (a string to kgo)
					r.VarintBytes()
				}
			}
			if !r.Ok() {
				return decline()
			}
			raw = raw[total:]
			off := first + int64(offsetDelta)
			if off < next {
				continue // before the offset asked for, in the same batch
			}
			ms := maxTS
			if attrs&attrTimestampType == 0 {
				ms = firstTS + tsDelta
			}
			dst = append(dst, record{offset: off, timestamp: time.Unix(0, ms*1e6).UnixMicro(), key: key, value: value})
			next = off + 1
		}
		// KAFKA-5443: compaction keeps a batch's last offset even when its
		// last records are gone.
		next = max(next, lastOffset+1)
	}
	return dst, next, true
}
