package policy

import (
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/query"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/source/catalog"
)

// Locations are the prefixes (or, for topics, names) of one kind each a
// query may use. An empty list allows nothing of that kind.
type Locations struct {
	// Sources are the directories a file source's path and a join's
	// dimension (join.path) may be in.
	Sources []string `json:"sources,omitempty"`
	// Topics are Kafka topic names a source may read; a name ending in *
	// is a prefix ("team-a.*"), "*" alone is every topic (and the only
	// way to allow subscribePattern).
	Topics []string `json:"topics,omitempty"`
	// Sinks are the directories a sink (and a file source's
	// sourceArchiveDir) may write.
	Sinks []string `json:"sinks,omitempty"`
	// Checkpoints are the directories a checkpointLocation may be in.
	Checkpoints []string `json:"checkpoints,omitempty"`
	// BadRecords are the directories a badRecordsPath may be in. The
	// default badRecordsPath (under the checkpoint) is always allowed
	// when the checkpoint is.
	BadRecords []string `json:"badRecords,omitempty"`
}

// Policy is the location policy of a driver.
type Policy struct {
	// Lab allows local paths (directories on the driver's and executors'
	// disks); without it only object-store URIs are allowed, in rules
	// and in specs.
	Lab bool `json:"lab,omitempty"`
	// Allow applies to every principal.
	Allow Locations `json:"allow"`
	// Principals adds locations per principal (a token's name, a client
	// certificate's common name): a principal may use Allow's and its
	// own.
	Principals map[string]Locations `json:"principals,omitempty"`
}

// Load reads a policy file (YAML or JSON) and checks it.
func Load(file string) (*Policy, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--policy: %w", err)
	}
	return Parse(b)
}

// Parse parses a policy (YAML or JSON), refusing unknown fields, and
// checks it.
func Parse(b []byte) (*Policy, error) {
	var p Policy
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if err := p.check(); err != nil {
		return nil, err
	}
	return &p, nil
}

func (p *Policy) check() error {
	var errs []string
	each := func(who string, l Locations) {
		for kind, list := range map[string][]string{"sources": l.Sources, "sinks": l.Sinks, "checkpoints": l.Checkpoints, "badRecords": l.BadRecords} {
			for _, pre := range list {
				switch {
				case strings.TrimSpace(pre) == "":
					errs = append(errs, fmt.Sprintf("%s.%s: an empty prefix: must be a directory URI or path", who, kind))
				case !isURI(pre) && !p.Lab:
					errs = append(errs, fmt.Sprintf("%s.%s: %q is a local path: local paths are allowed only with lab: true", who, kind, pre))
				case !isURI(pre) && !filepath.IsAbs(pre):
					errs = append(errs, fmt.Sprintf("%s.%s: %q: a local prefix must be an absolute path", who, kind, pre))
				case isURI(pre) && strings.Trim(strings.SplitN(pre, "://", 2)[1], "/") == "":
					errs = append(errs, fmt.Sprintf("%s.%s: %q names no bucket", who, kind, pre))
				}
			}
		}
		for _, t := range l.Topics {
			if strings.TrimSpace(t) == "" {
				errs = append(errs, fmt.Sprintf("%s.topics: an empty topic: must be a name, a prefix ending in *, or *", who))
			}
		}
	}
	each("allow", p.Allow)
	for _, name := range slices.Sorted(maps.Keys(p.Principals)) {
		each("principals."+name, p.Principals[name])
	}
	sort.Strings(errs)
	if len(errs) > 0 {
		return fmt.Errorf("policy: %s", strings.Join(errs, "; "))
	}
	return nil
}

// locations returns the locations principal may use.
func (p *Policy) locations(principal string) Locations {
	l := p.Allow
	if own, ok := p.Principals[principal]; ok {
		l = Locations{
			Sources:     append(append([]string(nil), l.Sources...), own.Sources...),
			Topics:      append(append([]string(nil), l.Topics...), own.Topics...),
			Sinks:       append(append([]string(nil), l.Sinks...), own.Sinks...),
			Checkpoints: append(append([]string(nil), l.Checkpoints...), own.Checkpoints...),
			BadRecords:  append(append([]string(nil), l.BadRecords...), own.BadRecords...),
		}
	}
	return l
}

// Check returns every field of spec outside the policy for principal:
// the field, the value and the rule (which prefixes are allowed). A nil
// policy allows everything (lab freedom).
func (p *Policy) Check(spec query.Spec, principal string) []query.Problem {
	if p == nil {
		return nil
	}
	l := p.locations(principal)
	var out []query.Problem
	who := "for everyone"
	if _, ok := p.Principals[principal]; ok {
		who = "for " + principal
	}
	dir := func(field, value, kind string, allowed []string) {
		if value == "" {
			return
		}
		if !isURI(value) && !p.Lab {
			out = append(out, query.Problem{Field: field, Value: value, Rule: "is a local path: the driver's policy allows local paths only in lab mode; use an object-store URI"})
			return
		}
		for _, pre := range allowed {
			if Under(value, pre) {
				return
			}
		}
		out = append(out, query.Problem{Field: field, Value: value, Rule: fmt.Sprintf("is outside the driver's policy: %s must be under one of %s (%s)", kind, list(allowed), who)})
	}
	topic := func(field, t string) {
		if !topicAllowed(t, l.Topics) {
			out = append(out, query.Problem{Field: field, Value: t, Rule: fmt.Sprintf("is outside the driver's policy: topics must be one of %s (%s)", list(l.Topics), who)})
		}
	}
	// The source says what it reads and writes (source.Kind.Locations).
	for _, loc := range catalog.Locations(&spec.Source) {
		switch loc.Use {
		case source.ReadsDir:
			dir(loc.Field, loc.Value, "sources", l.Sources)
		case source.WritesDir:
			dir(loc.Field, loc.Value, "sinks", l.Sinks)
		case source.Topic:
			topic(loc.Field, loc.Value)
		case source.TopicPattern:
			if !topicAllowed("*", l.Topics) {
				out = append(out, query.Problem{Field: loc.Field, Value: loc.Value, Rule: fmt.Sprintf("is outside the driver's policy: a pattern may match any topic, and topics are limited to %s (%s); list the topics in subscribe", list(l.Topics), who)})
			}
		case source.ReadsFile:
			// A credential file on the executors' own disks (a PEM
			// truststore): not data the policy governs.
		}
	}
	if spec.Join != nil {
		dir("join.path", spec.Join.Path, "sources", l.Sources)
	}
	switch {
	case spec.Sink.Parquet != nil:
		dir("sink.parquet.path", spec.Sink.Parquet.Path, "sinks", l.Sinks)
	case spec.Sink.JSONBatches != nil:
		dir("sink.jsonBatches.path", spec.Sink.JSONBatches.Path, "sinks", l.Sinks)
	}
	dir("checkpointLocation", spec.CheckpointLocation, "checkpoints", l.Checkpoints)
	if spec.BadRecordsPath != "" && !Under(spec.BadRecordsPath, spec.CheckpointLocation) {
		dir("badRecordsPath", spec.BadRecordsPath, "bad-record locations", l.BadRecords)
	}
	return out
}

func list(allowed []string) string {
	if len(allowed) == 0 {
		return "nothing (none allowed)"
	}
	q := make([]string, len(allowed))
	for i, a := range allowed {
		q[i] = fmt.Sprintf("%q", a)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func topicAllowed(t string, allowed []string) bool {
	for _, a := range allowed {
		switch {
		case a == "*":
			return true
		case strings.HasSuffix(a, "*") && t != "*" && strings.HasPrefix(t, strings.TrimSuffix(a, "*")):
			return true
		case a == t:
			return true
		}
	}
	return false
}

// assignTopics returns the topics of an assign JSON map, sorted; a value
// that does not parse yields nothing (Validate refuses it).
func isURI(s string) bool {
	scheme, _, ok := strings.Cut(s, "://")
	return ok && scheme != "file" && scheme != ""
}

// Clean returns a location in the form Under compares: a URI's path part
// cleaned of ., .. and doubled slashes (scheme and bucket kept), a local
// path (or file:// URI) made absolute and cleaned, without a trailing
// slash.
func Clean(loc string) string {
	if isURI(loc) {
		scheme, rest, _ := strings.Cut(loc, "://")
		bucket, p, _ := strings.Cut(rest, "/")
		p = path.Clean("/" + p)
		if p == "/" {
			p = ""
		}
		return strings.ToLower(scheme) + "://" + bucket + p
	}
	loc = strings.TrimPrefix(loc, "file://")
	if abs, err := filepath.Abs(loc); err == nil {
		loc = abs
	}
	return filepath.ToSlash(filepath.Clean(loc))
}

// Under reports whether loc is dir or inside it, path-aware: s3://a/team
// does not contain s3://a/team-b, and .. is resolved before comparing.
func Under(loc, dir string) bool {
	if loc == "" || dir == "" {
		return false
	}
	l, d := Clean(loc), Clean(dir)
	if l == d {
		return true
	}
	if !strings.HasSuffix(d, "/") {
		d += "/"
	}
	return strings.HasPrefix(l, d)
}

// Overlap reports whether a and b are the same location or one is inside
// the other.
func Overlap(a, b string) bool { return Under(a, b) || Under(b, a) }
