package query

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// kafkaOptionPrefix marks a Kafka client option among the source options, as
// in Spark ("kafka.security.protocol").
const kafkaOptionPrefix = "kafka."

// UnmarshalJSON reads source.kafka. Keys starting with "kafka." are Kafka
// client options and go into Options with the prefix removed
// ("kafka.security.protocol: SASL_SSL" becomes Options["security.protocol"]);
// numbers and booleans are kept as their text. "kafka.bootstrap.servers",
// Spark's spelling, fills BootstrapServers. The "options" key (the form
// json.Marshal writes) is read too, so a marshalled spec reads back the same.
// startingOffsets and assign may be strings or mappings; a mapping, or a
// string holding a JSON object, is stored as compact JSON with sorted keys.
// Any other key must be one of the struct's JSON names, matched exactly.
func (k *KafkaSource) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("source.kafka: %w", describeDecodeError(err))
	}
	type plain KafkaSource // no methods: decodes field by field
	fields := jsonFields(kafkaSourceType)
	rest := map[string]json.RawMessage{}
	opts := map[string]string{}
	var bootstrap, startingOffsets, assign string
	setOpt := func(name, value string) error {
		if name == "" {
			return errors.New("source.kafka: empty option name after \"kafka.\"")
		}
		if name == "bootstrap.servers" {
			if bootstrap != "" && bootstrap != value {
				return fmt.Errorf("source.kafka: bootstrap servers given twice, as %q and %q", bootstrap, value)
			}
			bootstrap = value
			return nil
		}
		if old, ok := opts[name]; ok && old != value {
			if secretOption(name) {
				return fmt.Errorf("source.kafka: option %q given twice, with different values (not shown: it is a secret)", "kafka."+name)
			}
			return fmt.Errorf("source.kafka: option %q given twice, as %q and %q", "kafka."+name, old, value)
		}
		opts[name] = value
		return nil
	}
	for _, key := range slices.Sorted(maps.Keys(raw)) {
		v := raw[key]
		switch {
		case strings.HasPrefix(key, kafkaOptionPrefix):
			x, err := decodeAny(v)
			if err != nil {
				return fmt.Errorf("source.kafka.%s: %w", key, err)
			}
			s, err := optionString(x)
			if err != nil {
				return fmt.Errorf("source.kafka.%s: %w", key, err)
			}
			if err := setOpt(strings.TrimPrefix(key, kafkaOptionPrefix), s); err != nil {
				return err
			}
		case key == "options":
			var m map[string]any
			d := json.NewDecoder(bytes.NewReader(v))
			d.UseNumber()
			if err := d.Decode(&m); err != nil {
				return fmt.Errorf("source.kafka.options: want a mapping of Kafka client options: %w", err)
			}
			for _, name := range slices.Sorted(maps.Keys(m)) {
				s, err := optionString(m[name])
				if err != nil {
					return fmt.Errorf("source.kafka.options.%s: %w", name, err)
				}
				if err := setOpt(name, s); err != nil {
					return err
				}
			}
		case key == "startingOffsets" || key == "assign":
			s, err := stringOrMapping(v)
			if err != nil {
				return fmt.Errorf("source.kafka.%s: %w", key, err)
			}
			if key == "assign" {
				assign = s
			} else {
				startingOffsets = s
			}
		default:
			if _, ok := fields[key]; !ok {
				return unknownField(key, "source.kafka", fieldNames(fields), "")
			}
			rest[key] = v
		}
	}
	restJSON, err := json.Marshal(rest)
	if err != nil {
		return fmt.Errorf("source.kafka: %w", err)
	}
	var p plain
	dec := json.NewDecoder(bytes.NewReader(restJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			c := *te
			c.Field = "source.kafka." + te.Field
			return describeDecodeError(&c)
		}
		return fmt.Errorf("source.kafka: %w", err)
	}
	if bootstrap != "" {
		if p.BootstrapServers != "" && p.BootstrapServers != bootstrap {
			return fmt.Errorf("source.kafka: bootstrap servers given twice, as bootstrapServers %q and kafka.bootstrap.servers %q", p.BootstrapServers, bootstrap)
		}
		p.BootstrapServers = bootstrap
	}
	p.StartingOffsets = startingOffsets
	p.Assign = assign
	p.Options = nil
	if len(opts) > 0 {
		p.Options = opts
	}
	*k = KafkaSource(p)
	return nil
}

// stringOrMapping reads a value that Spark takes as a string holding JSON
// but that YAML users write as a mapping. A mapping, or a string holding a
// JSON object or list, comes back as canonical JSON (compact, keys sorted,
// numbers as written); any other string comes back as is.
func stringOrMapping(v json.RawMessage) (string, error) {
	x, err := decodeAny(v)
	if err != nil {
		return "", err
	}
	switch t := x.(type) {
	case nil:
		return "", nil
	case string:
		trimmed := strings.TrimSpace(t)
		if strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, "[") {
			if y, err := decodeAny([]byte(trimmed)); err == nil {
				return canonicalJSON(y)
			}
		}
		return t, nil
	case map[string]any:
		return canonicalJSON(t)
	}
	return "", fmt.Errorf("got a %s, want a string or a mapping", jsonKind(x))
}

func canonicalJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func decodeAny(b []byte) (any, error) {
	var x any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&x); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("unexpected data after the value")
	}
	return x, nil
}

// SecretOption reports whether a Kafka client option (without the
// "kafka." prefix) holds a secret whose value must never appear in a
// message, a log or the fingerprint: passwords, JAAS configurations, keys,
// tokens.
func SecretOption(name string) bool { return secretOption(strings.TrimPrefix(name, "kafka.")) }

// RedactedValue stands for a secret's value wherever a spec is shown.
const RedactedValue = "[redacted]"

// Redacted returns a copy of s safe to log or show to a viewer: the value
// of every secret option (SecretOption) is RedactedValue. It is the one
// redactor of specs.
func (s Spec) Redacted() Spec {
	if k := s.Source.Kafka; k != nil && len(k.Options) > 0 {
		kc := *k
		kc.Options = make(map[string]string, len(k.Options))
		for name, v := range k.Options {
			if SecretOption(name) {
				v = RedactedValue
			}
			kc.Options[name] = v
		}
		s.Source.Kafka = &kc
	}
	return s
}

// SecretOptions returns the names of the secret options the spec sets
// ("kafka." prefixed, sorted).
func (s *Spec) SecretOptions() []string {
	var names []string
	if s.Source.Kafka != nil {
		for name := range s.Source.Kafka.Options {
			if secretOption(name) {
				names = append(names, "kafka."+name)
			}
		}
	}
	sort.Strings(names)
	return names
}

// secretOption reports client options whose values must never appear in a
// message: passwords, JAAS configurations, keys.
func secretOption(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"password", "jaas", "secret", "key", "token", "credential"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}
