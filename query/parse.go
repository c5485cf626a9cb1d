package query

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Load reads a query spec from a YAML or JSON file. It does not validate
// the spec: call Validate.
func Load(path string) (Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, fmt.Errorf("load query: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return Spec{}, fmt.Errorf("load query %s: %w", path, err)
	}
	return s, nil
}

// Parse reads a query spec written in YAML or JSON. Keys are matched
// exactly (case-sensitively); an unknown key, a key given twice or a value of
// the wrong type is an error naming the key and where it is. Inside
// source.kafka, keys starting with "kafka." are Kafka client options (see
// KafkaSource.UnmarshalJSON). Parse does not apply defaults or validate the
// spec: call Validate.
func Parse(data []byte) (Spec, error) {
	js, err := toJSON(data)
	if err != nil {
		return Spec{}, fmt.Errorf("parse query: %w", err)
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return Spec{}, fmt.Errorf("parse query: %w", err)
	}
	if generic == nil {
		return Spec{}, errors.New("parse query: the document is empty")
	}
	if _, ok := generic.(map[string]any); !ok {
		return Spec{}, fmt.Errorf("parse query: the document is a %s, want a mapping of fields (name, source, ...)", jsonKind(generic))
	}
	if errs := checkKeys(generic, reflect.TypeFor[Spec](), ""); len(errs) > 0 {
		return Spec{}, fmt.Errorf("parse query: %w", errors.Join(errs...))
	}
	var s Spec
	dec = json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Spec{}, fmt.Errorf("parse query: %w", describeDecodeError(err))
	}
	return s, nil
}

// toJSON returns data as JSON: a valid JSON object is taken as is and
// checked for duplicate keys; anything else (including a YAML flow mapping
// such as {name: a}) is read as YAML, where a duplicate key is an error too.
func toJSON(data []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, errors.New("the document is empty")
	}
	if trimmed[0] == '{' && json.Valid(trimmed) {
		if err := checkDuplicateKeys(trimmed); err != nil {
			return nil, err
		}
		return trimmed, nil
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("read YAML: %w", err)
	}
	return js, nil
}

// checkDuplicateKeys reports the first object key given twice in a JSON
// document (encoding/json would silently keep the last one).
func checkDuplicateKeys(js []byte) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dupWalk(dec, ""); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("read JSON: unexpected data after the top-level object")
	}
	return nil
}

func dupWalk(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("read JSON: %w", err)
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return fmt.Errorf("read JSON: %w", err)
			}
			k, _ := kt.(string)
			if seen[k] {
				return fmt.Errorf("key %q is given twice%s", k, inPath(path))
			}
			seen[k] = true
			if err := dupWalk(dec, joinPath(path, k)); err != nil {
				return err
			}
		}
	case '[':
		for i := 0; dec.More(); i++ {
			if err := dupWalk(dec, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // closing delimiter
		return fmt.Errorf("read JSON: %w", err)
	}
	return nil
}

var (
	durationType    = reflect.TypeFor[Duration]()
	kafkaSourceType = reflect.TypeFor[KafkaSource]()
)

// checkKeys walks a decoded JSON document against the Go type it will be
// decoded into and reports every key that type does not have, matching keys
// exactly (encoding/json alone matches them case-insensitively and does not
// say where a key is). It also parses durations so that a bad one is
// reported with its path.
func checkKeys(v any, t reflect.Type, path string) []error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == durationType:
		if v == nil {
			return nil
		}
		raw, _ := json.Marshal(v)
		var d Duration
		if err := d.UnmarshalJSON(raw); err != nil {
			return []error{fmt.Errorf("%s: %w", path, err)}
		}
		return nil
	case t == kafkaSourceType:
		return checkKafkaKeys(v, path)
	}
	if v == nil {
		return nil // null leaves the zero value
	}
	if err := checkScalar(v, t, path); err != nil {
		return []error{err}
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return []error{fmt.Errorf("%s: got a %s, want a mapping", pathOrTop(path), jsonKind(v))}
		}
		fields := jsonFields(t)
		var errs []error
		for _, k := range slices.Sorted(maps.Keys(m)) {
			f, ok := fields[k]
			if !ok {
				errs = append(errs, unknownField(k, path, fieldNames(fields), ""))
				continue
			}
			errs = append(errs, checkKeys(m[k], f.Type, joinPath(path, k))...)
		}
		return errs
	case reflect.Slice:
		a, ok := v.([]any)
		if !ok {
			return []error{fmt.Errorf("%s: got a %s, want a list", path, jsonKind(v))}
		}
		var errs []error
		for i, e := range a {
			errs = append(errs, checkKeys(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return errs
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return []error{fmt.Errorf("%s: got a %s, want a mapping", path, jsonKind(v))}
		}
		var errs []error
		for _, k := range slices.Sorted(maps.Keys(m)) {
			errs = append(errs, checkKeys(m[k], t.Elem(), joinPath(path, k))...)
		}
		return errs
	}
	return nil
}

// checkScalar checks a value meant for a string, boolean or number field,
// so that the error names the field with its list index (encoding/json's
// does not) and explains YAML's unquoted booleans.
func checkScalar(v any, t reflect.Type, path string) error {
	switch t.Kind() {
	case reflect.String:
		switch x := v.(type) {
		case string:
			return nil
		case bool:
			return fmt.Errorf("%s: got the boolean %t, want a string (YAML reads unquoted y, n, yes, no, on, off, true and false as booleans: quote the value)", path, x)
		case json.Number:
			return fmt.Errorf("%s: got the number %s, want a string (quote the value)", path, x)
		}
		return fmt.Errorf("%s: got a %s, want a string", path, jsonKind(v))
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: got %s, want true or false", path, describeValue(v))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			return fmt.Errorf("%s: got %s, want a whole number", path, describeValue(v))
		}
		if _, err := strconv.ParseInt(n.String(), 10, t.Bits()); err != nil {
			return fmt.Errorf("%s: got %s, want a whole number that fits in %d bits", path, n, t.Bits())
		}
	case reflect.Float32, reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			return fmt.Errorf("%s: got %s, want a number", path, describeValue(v))
		}
	}
	return nil
}

func describeValue(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", x)
	case json.Number:
		return "the number " + x.String()
	case bool:
		return fmt.Sprintf("the boolean %t", x)
	}
	return "a " + jsonKind(v)
}

func pathOrTop(path string) string {
	if path == "" {
		return "the document"
	}
	return path
}

// checkKafkaKeys checks source.kafka: its own keys exactly, "kafka."
// options as scalars, startingOffsets and assign as a string or a mapping.
func checkKafkaKeys(v any, path string) []error {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return []error{fmt.Errorf("%s: got a %s, want a mapping", path, jsonKind(v))}
	}
	fields := jsonFields(kafkaSourceType)
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(m)) {
		p := joinPath(path, k)
		switch {
		case strings.HasPrefix(k, kafkaOptionPrefix):
			if _, err := optionString(m[k]); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p, err))
			}
		case k == "startingOffsets" || k == "assign":
			switch m[k].(type) {
			case string, map[string]any, nil:
			default:
				errs = append(errs, fmt.Errorf("%s: got a %s, want a string or a mapping", p, jsonKind(m[k])))
			}
		case k == "options":
			om, ok := m[k].(map[string]any)
			if !ok {
				errs = append(errs, fmt.Errorf("%s: got a %s, want a mapping of Kafka client options", p, jsonKind(m[k])))
				continue
			}
			for _, ok := range slices.Sorted(maps.Keys(om)) {
				if _, err := optionString(om[ok]); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", joinPath(p, ok), err))
				}
			}
		default:
			f, ok := fields[k]
			if !ok {
				hint := ""
				if strings.Contains(k, ".") {
					hint = "Kafka client options take the prefix \"kafka.\", e.g. kafka." + k
				}
				errs = append(errs, unknownField(k, path, fieldNames(fields), hint))
				continue
			}
			errs = append(errs, checkKeys(m[k], f.Type, p)...)
		}
	}
	return errs
}

// jsonFields maps the JSON names of a struct's fields to the fields.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

func fieldNames(fields map[string]reflect.StructField) []string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func unknownField(key, path string, known []string, hint string) error {
	msg := fmt.Sprintf("unknown field %q%s", key, inPath(path))
	switch s := suggest(key, known); {
	case s != "" && hint != "":
		msg += fmt.Sprintf(" (did you mean %q? %s)", s, hint)
	case s != "":
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	case hint != "":
		msg += " (" + hint + ")"
	default:
		msg += fmt.Sprintf(" (known fields: %s)", strings.Join(known, ", "))
	}
	return errors.New(msg)
}

// suggest returns the known name closest to key: equal ignoring case, or
// within two edits.
func suggest(key string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if strings.EqualFold(k, key) {
			return k
		}
		if d := editDistance(strings.ToLower(key), strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// describeDecodeError names the field of a type mismatch in the spec's terms.
func describeDecodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("%s: got a JSON %s, want %s", te.Field, te.Value, goTypeWord(te.Type))
	}
	return err
}

func goTypeWord(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "a mapping"
	}
	return t.String()
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case []any:
		return "list"
	case map[string]any:
		return "mapping"
	}
	return fmt.Sprintf("%T", v)
}

// optionString renders a scalar Kafka client option as the string the
// client takes (YAML reads 30000 as a number and true as a boolean).
func optionString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case json.Number:
		return x.String(), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	}
	return "", fmt.Errorf("got a %s, want a string, number or boolean", jsonKind(v))
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func inPath(path string) string {
	if path == "" {
		return ""
	}
	return " in " + path
}
