package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluicehq/sluice/query"
)

// settings are the source options after parsing. Parsing does no I/O;
// files named by ssl.* options are read by clientOpts.
type settings struct {
	seeds         []string
	topics        []string           // subscribe, sorted
	pattern       *regexp.Regexp     // subscribePattern, anchored
	assign        map[string][]int32 // assign, partitions sorted
	starting      string             // "earliest", "latest" or "specific"
	startOffsets  Offsets            // for "specific"
	failOnLoss    bool
	maxPerTrigger int64
	minPartitions int
	minPerTask    int64 // minOffsetsPerTask, default applied
	commitGroup   string
	client        clientSettings
}

// clientSettings are the kafka.* options Sluice understands.
type clientSettings struct {
	protocol       string // PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
	mechanism      string // PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM
	user, pass     string
	tokenFile      string // OAUTHBEARER: re-read at every authentication
	trustFile      string
	trustPEM       string
	keystoreFile   string
	certChainPEM   string
	keyPEM         string
	verifyHostname bool
	clientID       string
	readCommitted  bool
	fetchMaxBytes  int32
	partFetchBytes int32
	fetchMaxWait   time.Duration
}

// The tables below are read-only.

// Kafka client options (the part after "kafka.") that Sluice maps to the
// client. Anything else is refused with this list.
var supportedOptions = []string{
	"client.id",
	"fetch.max.bytes",
	"fetch.max.wait.ms",
	"isolation.level",
	"max.partition.fetch.bytes",
	"sasl.jaas.config",
	"sasl.mechanism",
	"sasl.oauthbearer.token.file",
	"sasl.password",
	"sasl.username",
	"security.protocol",
	"ssl.endpoint.identification.algorithm",
	"ssl.keystore.certificate.chain",
	"ssl.keystore.key",
	"ssl.keystore.location",
	"ssl.keystore.type",
	"ssl.truststore.certificates",
	"ssl.truststore.location",
	"ssl.truststore.type",
}

// Options refused, with the rule, as Spark refuses them.
var refusedOptions = map[string]string{
	"group.id":                "is not supported: the source never joins a consumer group; offsets live in the checkpoint (commitOffsetsToGroup publishes them for display)",
	"auto.offset.reset":       "is not used: set startingOffsets (it applies only when the checkpoint has no offsets), and failOnDataLoss for offsets that are gone",
	"enable.auto.commit":      "is not used: the checkpoint is the query's cursor and offsets are never committed to Kafka as one (commitOffsetsToGroup publishes them for display)",
	"key.deserializer":        "is not used: records are read as bytes and decoded with source.format and source.schema",
	"value.deserializer":      "is not used: records are read as bytes and decoded with source.format and source.schema",
	"interceptor.classes":     "is not supported: interceptors are Java classes",
	"ssl.key.password":        "is not supported: encrypted private keys are not; give an unencrypted PEM key",
	"ssl.keystore.password":   "is not supported: only PEM keystores are, and they take no password",
	"ssl.truststore.password": "is not supported: only PEM truststores are, and they take no password",
}

// tokenSourceHelp says where each token-based mechanism gets its
// credentials.
var tokenSourceHelp = map[string]string{
	"OAUTHBEARER": "the token is read from kafka.sasl.oauthbearer.token.file at every authentication, so a sidecar or a projected volume can refresh it",
	"AWS_MSK_IAM": "credentials come from the standard AWS chain, as for S3: environment, shared files, web identity, instance role",
}

// Validate checks the Kafka source options without contacting a broker or
// reading files, and reports every problem it finds, each naming the
// option, the value (never a secret) and the rule, as a
// *query.ValidationError. It is the one check of these options: the query
// validator gets the same problems through Kind.
func Validate(k query.KafkaSource) error {
	_, err := parse(k)
	return err
}

// parse checks the options (Problems) and, when they hold, returns the
// settings a Source runs with.
func parse(k query.KafkaSource) (*settings, error) {
	s, problems := check(k)
	if len(problems) > 0 {
		return nil, &query.ValidationError{Problems: problems}
	}
	return s, nil
}

const field = "source.kafka."

// topicRE is Kafka's rule for topic names.
var topicRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// check parses and checks every option, returning the settings (meaningful
// only without problems) and every problem.
func check(k query.KafkaSource) (*settings, []query.Problem) {
	var problems []query.Problem
	bad := func(f, value, rule string, args ...any) {
		problems = append(problems, query.Problem{Field: f, Value: value, Rule: fmt.Sprintf(rule, args...)})
	}
	s := &settings{
		failOnLoss:    k.FailsOnDataLoss(),
		maxPerTrigger: k.MaxOffsetsPerTrigger,
		minPartitions: k.MinPartitions,
		minPerTask:    k.MinOffsetsPerTask,
		commitGroup:   k.CommitOffsetsToGroup,
	}
	if s.minPerTask == 0 {
		s.minPerTask = DefaultMinOffsetsPerTask
	}

	if strings.TrimSpace(k.BootstrapServers) == "" {
		bad(field+"bootstrapServers", "", "required: host:port of the brokers, comma-separated")
	} else {
		for _, h := range strings.Split(k.BootstrapServers, ",") {
			if h = strings.TrimSpace(h); h == "" {
				bad(field+"bootstrapServers", k.BootstrapServers, "has an empty entry: write host:port[,host:port...]")
				s.seeds = nil
				break
			}
			s.seeds = append(s.seeds, h)
		}
	}

	var modes []string
	if k.Subscribe != "" {
		modes = append(modes, "subscribe")
		seen := map[string]bool{}
		for _, t := range strings.Split(k.Subscribe, ",") {
			t = strings.TrimSpace(t)
			if !topicRE.MatchString(t) {
				bad(field+"subscribe", k.Subscribe, "has an invalid topic name %q: a topic name is 1-249 of a-z A-Z 0-9 . _ -; separate topics with commas", t)
				continue
			}
			if !seen[t] {
				seen[t] = true
				s.topics = append(s.topics, t)
			}
		}
		slices.Sort(s.topics)
	}
	if k.SubscribePattern != "" {
		modes = append(modes, "subscribePattern")
		// Kafka matches the whole topic name (Java's Matcher.matches).
		if _, err := regexp.Compile(k.SubscribePattern); err != nil {
			bad(field+"subscribePattern", k.SubscribePattern, "is not a valid regular expression: %v", err)
		} else {
			s.pattern = regexp.MustCompile("^(?:" + k.SubscribePattern + ")$")
		}
	}
	if k.Assign != "" {
		modes = append(modes, "assign")
		var m map[string][]int64
		if err := json.Unmarshal([]byte(k.Assign), &m); err != nil || len(m) == 0 {
			bad(field+"assign", k.Assign, `is not a JSON map of topic to partitions, e.g. {"learning.progress":[0,1]}`)
		} else {
			s.assign = map[string][]int32{}
			for _, t := range slices.Sorted(maps.Keys(m)) {
				if !topicRE.MatchString(t) {
					bad(field+"assign", k.Assign, "has an invalid topic name %q", t)
					continue
				}
				if len(m[t]) == 0 {
					bad(field+"assign", k.Assign, "gives topic %s no partition: list at least one", t)
					continue
				}
				var ps []int32
				for _, p := range m[t] {
					if p < 0 || p > math.MaxInt32 {
						bad(field+"assign", k.Assign, "has partition %d of topic %s: partitions are 0 or more", p, t)
						continue
					}
					ps = append(ps, int32(p))
				}
				slices.Sort(ps)
				s.assign[t] = slices.Compact(ps)
			}
		}
	}
	switch len(modes) {
	case 0:
		bad("source.kafka", "", "names no topics: set exactly one of subscribe, subscribePattern or assign")
	case 1:
	default:
		bad("source.kafka", strings.Join(modes, ", "), "sets more than one subscription: set exactly one of subscribe, subscribePattern or assign")
	}

	s.starting = startingOffsets(k, s, bad)

	if k.MaxOffsetsPerTrigger < 0 {
		bad(field+"maxOffsetsPerTrigger", strconv.FormatInt(k.MaxOffsetsPerTrigger, 10), "must be >= 0 (0 means no cap)")
	}
	if k.MinPartitions < 0 {
		bad(field+"minPartitions", strconv.Itoa(k.MinPartitions), "must be >= 0 (0 means one task per topic-partition)")
	}
	if k.MinOffsetsPerTask < 0 {
		bad(field+"minOffsetsPerTask", strconv.FormatInt(k.MinOffsetsPerTask, 10), "must be >= 0 (0 means %d, 1 one task per topic-partition)", DefaultMinOffsetsPerTask)
	}

	c, cprobs := parseClient(k.Options)
	s.client = c
	problems = append(problems, cprobs...)
	return s, problems
}

// startingOffsets checks startingOffsets against the subscription in s
// and returns "earliest", "latest" or "specific" (with s.startOffsets set).
func startingOffsets(k query.KafkaSource, s *settings, bad func(f, value, rule string, args ...any)) string {
	const f = field + "startingOffsets"
	so := strings.TrimSpace(k.StartingOffsets)
	switch strings.ToLower(so) {
	case "", "latest": // Spark's default for streaming queries
		return "latest"
	case "earliest":
		return "earliest"
	}
	var m map[string]map[string]int64
	if err := json.Unmarshal([]byte(so), &m); err != nil || len(m) == 0 {
		bad(f, so, `is not earliest, latest or a JSON map of topic to partition to offset, e.g. {"learning.progress":{"0":42}}`)
		return "specific"
	}
	ok := true
	for _, t := range slices.Sorted(maps.Keys(m)) {
		switch {
		case s.topics != nil && !slices.Contains(s.topics, t):
			bad(f, so, "names topic %s, which subscribe does not list", t)
			ok = false
		case s.pattern != nil && !s.pattern.MatchString(t):
			bad(f, so, "names topic %s, which subscribePattern does not match", t)
			ok = false
		case s.assign != nil && s.assign[t] == nil:
			bad(f, so, "names topic %s, which assign does not list", t)
			ok = false
		}
		for _, ps := range slices.Sorted(maps.Keys(m[t])) {
			part, err := strconv.ParseInt(ps, 10, 32)
			if err != nil || part < 0 {
				bad(f, so, "has partition %q of topic %s: partitions are whole numbers, 0 or more", ps, t)
				ok = false
				continue
			}
			if off := m[t][ps]; off < -2 {
				bad(f, so, "has offset %d for %s-%s: offsets are 0 or more, or -2 (earliest) or -1 (latest)", off, t, ps)
				ok = false
			}
			if s.assign[t] != nil && !slices.Contains(s.assign[t], int32(part)) {
				bad(f, so, "names %s-%d, which assign does not list", t, part)
				ok = false
			}
		}
	}
	for _, t := range slices.Sorted(maps.Keys(s.assign)) {
		for _, p := range s.assign[t] {
			if _, given := m[t][strconv.Itoa(int(p))]; !given {
				bad(f, so, "gives no offset for assigned partition %s-%d: give one for every assigned partition (-2 earliest, -1 latest)", t, p)
				ok = false
			}
		}
	}
	if ok {
		o, err := DecodeOffsets([]byte(so))
		if err != nil {
			bad(f, so, "%v", err)
		}
		s.startOffsets = o
	}
	return "specific"
}

func parseClient(raw map[string]string) (clientSettings, []query.Problem) {
	var problems []query.Problem
	c := clientSettings{protocol: "PLAINTEXT", verifyHostname: true}
	opts := map[string]string{}
	for name, v := range raw {
		opts[strings.TrimPrefix(name, "kafka.")] = v
	}
	// opt is a problem with option name, its value shown unless it is a
	// secret; all is a problem of several options together.
	opt := func(name, rule string, args ...any) {
		v := opts[name]
		if query.SecretOption(name) {
			v = query.RedactedValue
		}
		problems = append(problems, query.Problem{Field: field + "kafka." + name, Value: v, Rule: fmt.Sprintf(rule, args...)})
	}
	all := func(rule string, args ...any) {
		problems = append(problems, query.Problem{Field: "source.kafka", Rule: fmt.Sprintf(rule, args...)})
	}
	var unknown []string
	for _, name := range slices.Sorted(maps.Keys(opts)) {
		if name == "bootstrap.servers" {
			continue
		}
		if why, ok := refusedOptions[name]; ok {
			opt(name, "%s", why)
			continue
		}
		if !slices.Contains(supportedOptions, name) {
			unknown = append(unknown, "kafka."+name)
		}
	}
	if len(unknown) > 0 {
		sup := make([]string, len(supportedOptions))
		for i, n := range supportedOptions {
			sup[i] = "kafka." + n
		}
		all("unsupported Kafka client option(s) %s; supported: %s",
			strings.Join(unknown, ", "), strings.Join(sup, ", "))
	}

	if v, ok := opts["security.protocol"]; ok {
		c.protocol = strings.ToUpper(strings.TrimSpace(v))
		switch c.protocol {
		case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
		default:
			opt("security.protocol", "is not a protocol: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
		}
	}
	saslOn := strings.HasPrefix(c.protocol, "SASL_")
	tlsOn := c.protocol == "SSL" || c.protocol == "SASL_SSL"

	for _, name := range []string{"sasl.mechanism", "sasl.jaas.config", "sasl.username", "sasl.password", "sasl.oauthbearer.token.file"} {
		if _, ok := opts[name]; ok && !saslOn {
			opt(name, "needs kafka.security.protocol SASL_PLAINTEXT or SASL_SSL (it is %s)", c.protocol)
		}
	}
	for _, name := range []string{"ssl.truststore.location", "ssl.truststore.certificates", "ssl.truststore.type",
		"ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.type",
		"ssl.endpoint.identification.algorithm"} {
		if _, ok := opts[name]; ok && !tlsOn {
			opt(name, "needs kafka.security.protocol SSL or SASL_SSL (it is %s)", c.protocol)
		}
	}

	if saslOn {
		c.mechanism = strings.ToUpper(strings.TrimSpace(opts["sasl.mechanism"]))
		switch c.mechanism {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM":
		case "":
			opt("security.protocol", "needs kafka.sasl.mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM")
		default:
			opt("sasl.mechanism", "is not supported: want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM")
		}
		_, hasTokenFile := opts["sasl.oauthbearer.token.file"]
		if hasTokenFile && c.mechanism != "OAUTHBEARER" {
			opt("sasl.oauthbearer.token.file", "needs kafka.sasl.mechanism OAUTHBEARER (it is %s)", c.mechanism)
		}
		if c.mechanism == "OAUTHBEARER" || c.mechanism == "AWS_MSK_IAM" {
			for _, name := range []string{"sasl.jaas.config", "sasl.username", "sasl.password"} {
				if _, ok := opts[name]; ok {
					opt(name, "does not apply to kafka.sasl.mechanism %s (%s)", c.mechanism, tokenSourceHelp[c.mechanism])
				}
			}
			switch {
			case c.mechanism == "AWS_MSK_IAM" && c.protocol != "SASL_SSL":
				opt("sasl.mechanism", "needs kafka.security.protocol SASL_SSL (MSK serves IAM on its TLS listener)")
			case c.mechanism == "OAUTHBEARER":
				c.tokenFile = strings.TrimSpace(opts["sasl.oauthbearer.token.file"])
				if c.tokenFile == "" {
					opt("sasl.mechanism", "needs kafka.sasl.oauthbearer.token.file (%s)", tokenSourceHelp[c.mechanism])
				}
			}
		}
		jaas, hasJAAS := opts["sasl.jaas.config"]
		user, hasUser := opts["sasl.username"]
		pass, hasPass := opts["sasl.password"]
		switch {
		case c.mechanism == "OAUTHBEARER" || c.mechanism == "AWS_MSK_IAM":
		case hasJAAS && (hasUser || hasPass):
			all("give the SASL credentials either in kafka.sasl.jaas.config or in kafka.sasl.username and kafka.sasl.password, not both")
		case hasJAAS:
			module, kv, err := parseJAAS(jaas)
			if err != nil {
				opt("sasl.jaas.config", "is not a JAAS login line: %v", err)
				break
			}
			wantModule := "org.apache.kafka.common.security.plain.PlainLoginModule"
			if strings.HasPrefix(c.mechanism, "SCRAM-") {
				wantModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
			}
			if c.mechanism != "" && module != wantModule {
				opt("sasl.jaas.config", "uses login module %s; kafka.sasl.mechanism %s needs %s", module, c.mechanism, wantModule)
			}
			c.user, c.pass = kv["username"], kv["password"]
			if c.user == "" || c.pass == "" {
				opt("sasl.jaas.config", "needs username=\"...\" and password=\"...\"")
			}
		default:
			c.user, c.pass = user, pass
			if c.user == "" || c.pass == "" {
				all("SASL needs kafka.sasl.jaas.config, or kafka.sasl.username and kafka.sasl.password")
			}
		}
	}

	if tlsOn {
		for _, name := range []string{"ssl.truststore.type", "ssl.keystore.type"} {
			if v, ok := opts[name]; ok && !strings.EqualFold(strings.TrimSpace(v), "PEM") {
				opt(name, "is not supported: only PEM is (convert JKS or PKCS12 stores with keytool and openssl)")
			}
		}
		c.trustFile = opts["ssl.truststore.location"]
		c.trustPEM = opts["ssl.truststore.certificates"]
		if c.trustFile != "" && c.trustPEM != "" {
			all("give kafka.ssl.truststore.location or kafka.ssl.truststore.certificates, not both")
		}
		c.keystoreFile = opts["ssl.keystore.location"]
		c.certChainPEM = opts["ssl.keystore.certificate.chain"]
		c.keyPEM = opts["ssl.keystore.key"]
		if c.keystoreFile != "" && (c.certChainPEM != "" || c.keyPEM != "") {
			all("give kafka.ssl.keystore.location or kafka.ssl.keystore.certificate.chain with kafka.ssl.keystore.key, not both")
		}
		if (c.certChainPEM == "") != (c.keyPEM == "") {
			all("kafka.ssl.keystore.certificate.chain and kafka.ssl.keystore.key go together")
		}
		if v, ok := opts["ssl.endpoint.identification.algorithm"]; ok {
			switch strings.ToLower(strings.TrimSpace(v)) {
			case "https":
			case "":
				c.verifyHostname = false
			default:
				opt("ssl.endpoint.identification.algorithm", "is not supported: want https (verify the broker host name, the default) or empty (do not)")
			}
		}
	}

	c.clientID = opts["client.id"]
	if v, ok := opts["isolation.level"]; ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "read_uncommitted":
		case "read_committed":
			c.readCommitted = true
		default:
			opt("isolation.level", "is not supported: want read_uncommitted (the default) or read_committed")
		}
	}
	posInt := func(name string, max int64) int64 {
		v, ok := opts[name]
		if !ok {
			return 0
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n <= 0 || n > max {
			opt(name, "must be a whole number from 1 to %d", max)
			return 0
		}
		return n
	}
	c.fetchMaxBytes = int32(posInt("fetch.max.bytes", 1<<30))
	c.partFetchBytes = int32(posInt("max.partition.fetch.bytes", 1<<30))
	c.fetchMaxWait = time.Duration(posInt("fetch.max.wait.ms", 60000)) * time.Millisecond
	return c, problems
}

// parseJAAS reads a Kafka sasl.jaas.config value:
//
//	org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";
//
// Errors never quote the input (it holds a password).
func parseJAAS(s string) (module string, kv map[string]string, err error) {
	s = strings.TrimSpace(s)
	if !strings.HasSuffix(s, ";") {
		return "", nil, errors.New(`want "<LoginModule class> required key=\"value\" ...;" ending with a semicolon`)
	}
	s = strings.TrimSpace(strings.TrimSuffix(s, ";"))
	fields := strings.Fields(s)
	if len(fields) < 2 {
		return "", nil, errors.New(`want "<LoginModule class> required key=\"value\" ...;"`)
	}
	module = fields[0]
	switch strings.ToLower(fields[1]) {
	case "required", "requisite", "sufficient", "optional":
	default:
		return "", nil, errors.New("the login module class must be followed by a control flag such as required")
	}
	afterModule := strings.Index(s, module) + len(module)
	afterFlag := afterModule + strings.Index(s[afterModule:], fields[1]) + len(fields[1])
	rest := strings.TrimSpace(s[afterFlag:])
	kv = map[string]string{}
	for rest != "" {
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 {
			return "", nil, errors.New(`options must be key="value" pairs`)
		}
		key := strings.TrimSpace(rest[:eq])
		rest = strings.TrimLeft(rest[eq+1:], " \t\r\n")
		var val string
		if strings.HasPrefix(rest, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(rest) && rest[i] != '"'; i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
				}
				b.WriteByte(rest[i])
			}
			if i >= len(rest) {
				return "", nil, fmt.Errorf("option %s: unterminated quoted value", key)
			}
			val, rest = b.String(), rest[i+1:]
		} else {
			end := strings.IndexAny(rest, " \t\r\n")
			if end < 0 {
				end = len(rest)
			}
			val, rest = rest[:end], rest[end:]
		}
		kv[key] = val
		rest = strings.TrimSpace(rest)
	}
	return module, kv, nil
}

// clientOpts turns the settings into franz-go options. It reads the PEM
// files named by ssl.* options.
func (c clientSettings) clientOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if c.clientID != "" {
		opts = append(opts, kgo.ClientID(c.clientID))
	}
	if strings.HasPrefix(c.protocol, "SASL_") {
		var m sasl.Mechanism
		switch c.mechanism {
		case "PLAIN":
			m = plain.Auth{User: c.user, Pass: c.pass}.AsMechanism()
		case "SCRAM-SHA-256":
			m = scram.Auth{User: c.user, Pass: c.pass}.AsSha256Mechanism()
		case "SCRAM-SHA-512":
			m = scram.Auth{User: c.user, Pass: c.pass}.AsSha512Mechanism()
		case "OAUTHBEARER":
			if _, err := readToken(c.tokenFile); err != nil {
				return nil, err
			}
			m = oauthFromFile(c.tokenFile)
		case "AWS_MSK_IAM":
			var err error
			if m, err = mskIAM(); err != nil {
				return nil, err
			}
		}
		opts = append(opts, kgo.SASL(m))
	}
	if c.protocol == "SSL" || c.protocol == "SASL_SSL" {
		cfg, err := c.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	return opts, nil
}

func (c clientSettings) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	trust := []byte(c.trustPEM)
	if c.trustFile != "" {
		b, err := os.ReadFile(c.trustFile)
		if err != nil {
			return nil, fmt.Errorf("read kafka.ssl.truststore.location: %w", err)
		}
		trust = b
	}
	if len(trust) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(trust) {
			return nil, errors.New("read kafka.ssl.truststore: no PEM certificate found")
		}
		cfg.RootCAs = pool
	}
	chain, key := []byte(c.certChainPEM), []byte(c.keyPEM)
	if c.keystoreFile != "" {
		b, err := os.ReadFile(c.keystoreFile)
		if err != nil {
			return nil, fmt.Errorf("read kafka.ssl.keystore.location: %w", err)
		}
		chain, key = b, b // a PEM keystore holds the key and the chain
	}
	if len(chain) > 0 {
		cert, err := tls.X509KeyPair(chain, key)
		if err != nil {
			// The error of X509KeyPair names no key material.
			return nil, fmt.Errorf("load kafka.ssl.keystore: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if !c.verifyHostname {
		// Verify the chain but not the host name, as Kafka does with an
		// empty ssl.endpoint.identification.algorithm.
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("verify kafka broker certificate: the broker sent none")
			}
			inter := x509.NewCertPool()
			for _, ic := range cs.PeerCertificates[1:] {
				inter.AddCert(ic)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			if err != nil {
				return fmt.Errorf("verify kafka broker certificate: %w", err)
			}
			return nil
		}
	}
	return cfg, nil
}
