package kafka

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/source"
)

// Offsets maps topic → partition → the next offset to read (an exclusive
// end, as in Spark). It is the decoded form of the source's offset JSON,
// {"topic":{"0":42,"1":7}}.
type Offsets map[string]map[int32]int64

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String is the "topic-3" form used for record parts and lag keys.
func (tp TopicPartition) String() string {
	return tp.Topic + "-" + strconv.FormatInt(int64(tp.Partition), 10)
}

func compareTP(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// Get returns the offset of a partition and whether it is present.
func (o Offsets) Get(tp TopicPartition) (int64, bool) {
	v, ok := o[tp.Topic][tp.Partition]
	return v, ok
}

// Set stores the offset of a partition.
func (o Offsets) Set(tp TopicPartition, off int64) {
	ps := o[tp.Topic]
	if ps == nil {
		ps = make(map[int32]int64)
		o[tp.Topic] = ps
	}
	ps[tp.Partition] = off
}

// Partitions returns the partitions present, sorted by topic then
// partition number.
func (o Offsets) Partitions() []TopicPartition {
	var tps []TopicPartition
	for t, ps := range o {
		for p := range ps {
			tps = append(tps, TopicPartition{t, p})
		}
	}
	slices.SortFunc(tps, compareTP)
	return tps
}

// Encode returns the canonical JSON: topics sorted by name, partitions in
// numeric order (as Spark writes them), no spaces. The same offsets always
// give the same bytes. Empty offsets encode as {}.
func (o Offsets) Encode() source.Offset {
	topics := make([]string, 0, len(o))
	for t := range o {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	var b bytes.Buffer
	b.WriteByte('{')
	for i, t := range topics {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(t) // a string always marshals
		b.Write(name)
		b.WriteString(":{")
		ps := make([]int32, 0, len(o[t]))
		for p := range o[t] {
			ps = append(ps, p)
		}
		slices.Sort(ps)
		for j, p := range ps {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('"')
			b.WriteString(strconv.FormatInt(int64(p), 10))
			b.WriteString(`":`)
			b.WriteString(strconv.FormatInt(o[t][p], 10))
		}
		b.WriteByte('}')
	}
	b.WriteByte('}')
	return b.Bytes()
}

// DecodeOffsets reads offset JSON. Empty input or null gives empty offsets.
// Partition keys must be non-negative decimal integers; offsets may be any
// integer (startingOffsets uses -2 for earliest and -1 for latest).
func DecodeOffsets(b source.Offset) (Offsets, error) {
	out := Offsets{}
	t := bytes.TrimSpace(b)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return out, nil
	}
	var raw map[string]map[string]int64
	if err := json.Unmarshal(t, &raw); err != nil {
		return nil, fmt.Errorf("decode kafka offsets %s: want {\"topic\":{\"partition\":offset}}: %w", clip(t), err)
	}
	for topic, ps := range raw {
		if topic == "" {
			return nil, fmt.Errorf("decode kafka offsets %s: empty topic name", clip(t))
		}
		m := make(map[int32]int64, len(ps))
		for k, v := range ps {
			p, err := strconv.ParseInt(k, 10, 32)
			if err != nil || p < 0 {
				return nil, fmt.Errorf("decode kafka offsets %s: topic %s: partition %q is not a non-negative integer", clip(t), topic, k)
			}
			m[int32(p)] = v
		}
		out[topic] = m
	}
	return out, nil
}

func clip(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// Range is one read task: the records of one partition with offsets in
// [From, To). It is the Desc of a Split, as JSON.
type Range struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	From      int64  `json:"from"`
	To        int64  `json:"to"`
}

// TP returns the range's partition.
func (r Range) TP() TopicPartition { return TopicPartition{r.Topic, r.Partition} }

// Size is the number of offsets in the range.
func (r Range) Size() int64 { return r.To - r.From }

// ID is a split id unique within a batch: topic-partition-from.
func (r Range) ID() string {
	return r.TP().String() + "-" + strconv.FormatInt(r.From, 10)
}

// Split returns the range as a source.Split.
func (r Range) Split() source.Split {
	desc, _ := json.Marshal(r) // plain struct, always marshals
	return source.Split{ID: r.ID(), Desc: desc}
}

// groupDesc is the Desc of a split of several ranges.
type groupDesc struct {
	Ranges []Range `json:"ranges"`
}

// GroupSplit returns ranges as one source.Split (one read task). One range
// gives exactly Range.Split. The ID is the first range's ID and the number
// of ranges ("t-3-100+12"): unique within a batch, as ranges do not
// overlap.
func GroupSplit(rs []Range) source.Split {
	if len(rs) == 1 {
		return rs[0].Split()
	}
	desc, _ := json.Marshal(groupDesc{Ranges: rs}) // plain structs, always marshal
	return source.Split{ID: rs[0].ID() + "+" + strconv.Itoa(len(rs)-1), Desc: desc}
}

// DecodeRange reads a split's Desc of one range.
func DecodeRange(desc []byte) (Range, error) {
	var r Range
	if err := json.Unmarshal(desc, &r); err != nil {
		return Range{}, fmt.Errorf("decode kafka split %s: %w", clip(desc), err)
	}
	if err := r.check(); err != nil {
		return Range{}, fmt.Errorf("decode kafka split %s: %w", clip(desc), err)
	}
	return r, nil
}

func (r Range) check() error {
	if r.Topic == "" || r.Partition < 0 || r.From < 0 || r.To < r.From {
		return errors.New("want a topic, a partition >= 0 and 0 <= from <= to")
	}
	return nil
}

// DecodeRanges reads a split's Desc: one range (Range.Split) or several
// (GroupSplit). A partition may appear only once.
func DecodeRanges(desc []byte) ([]Range, error) {
	t := bytes.TrimSpace(desc)
	if !bytes.Contains(t, []byte(`"ranges"`)) {
		r, err := DecodeRange(t)
		if err != nil {
			return nil, err
		}
		return []Range{r}, nil
	}
	var g groupDesc
	if err := json.Unmarshal(t, &g); err != nil {
		return nil, fmt.Errorf("decode kafka split %s: %w", clip(desc), err)
	}
	if len(g.Ranges) == 0 {
		return nil, fmt.Errorf("decode kafka split %s: no ranges", clip(desc))
	}
	seen := map[TopicPartition]bool{}
	for _, r := range g.Ranges {
		if err := r.check(); err != nil {
			return nil, fmt.Errorf("decode kafka split %s: %w", clip(desc), err)
		}
		if seen[r.TP()] {
			return nil, fmt.Errorf("decode kafka split %s: partition %s appears twice", clip(desc), r.TP())
		}
		seen[r.TP()] = true
	}
	return g.Ranges, nil
}
