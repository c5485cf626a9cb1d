package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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

// Options refused with a reason, as Spark refuses them.
var refusedOptions = map[string]string{
	"group.id":                "the source never joins a consumer group; offsets live in the checkpoint (commitOffsetsToGroup publishes them for display)",
	"auto.offset.reset":       "use startingOffsets, and failOnDataLoss for offsets that are gone",
	"enable.auto.commit":      "the source never commits to a consumer group (see commitOffsetsToGroup)",
	"key.deserializer":        "keys and values are read as bytes and decoded with the query's format",
	"value.deserializer":      "keys and values are read as bytes and decoded with the query's format",
	"interceptor.classes":     "interceptors are Java classes",
	"ssl.key.password":        "encrypted private keys are not supported: give an unencrypted PEM key",
	"ssl.keystore.password":   "only PEM keystores are supported, and they take no password",
	"ssl.truststore.password": "only PEM truststores are supported, and they take no password",
}

// tokenSourceHelp says where each token-based mechanism gets its
// credentials.
var tokenSourceHelp = map[string]string{
	"OAUTHBEARER": "the token is read from kafka.sasl.oauthbearer.token.file at every authentication, so a sidecar or a projected volume can refresh it",
	"AWS_MSK_IAM": "credentials come from the standard AWS chain, as for S3: environment, shared files, web identity, instance role",
}

// secretOptions are never shown in logs or errors.
var secretOptions = map[string]bool{
	"sasl.password":           true,
	"sasl.jaas.config":        true,
	"ssl.keystore.key":        true,
	"ssl.key.password":        true,
	"ssl.keystore.password":   true,
	"ssl.truststore.password": true,
}

const redactedValue = "[redacted]"

// Redacted returns a copy of the Kafka source options safe to log: the
// values of secret kafka.* options (passwords, sasl.jaas.config, private
// keys) are replaced by "[redacted]".
func Redacted(k query.KafkaSource) query.KafkaSource {
	if k.Options != nil {
		opts := make(map[string]string, len(k.Options))
		for name, v := range k.Options {
			if secretOptions[strings.TrimPrefix(name, "kafka.")] || query.SecretOption(name) {
				v = redactedValue
			}
			opts[name] = v
		}
		k.Options = opts
	}
	return k
}

// Validate checks the Kafka source options without contacting a broker or
// reading files, and reports every problem it finds, each naming the
// option, the value (never a secret) and the rule.
func Validate(k query.KafkaSource) error {
	_, err := parse(k)
	return err
}

func parse(k query.KafkaSource) (*settings, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
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

	servers := k.BootstrapServers
	if v, ok := k.Options["bootstrap.servers"]; ok && servers == "" {
		servers = v
	}
	for _, h := range strings.Split(servers, ",") {
		if h = strings.TrimSpace(h); h != "" {
			s.seeds = append(s.seeds, h)
		}
	}
	if len(s.seeds) == 0 {
		bad("source.kafka.bootstrapServers is required: a comma-separated list of host:port")
	}

	modes := 0
	if k.Subscribe != "" {
		modes++
		seen := map[string]bool{}
		for _, t := range strings.Split(k.Subscribe, ",") {
			t = strings.TrimSpace(t)
			if t == "" {
				bad("source.kafka.subscribe %q: empty topic name in the comma-separated list", k.Subscribe)
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
		modes++
		// Kafka matches the whole topic name (Java's Matcher.matches).
		re, err := regexp.Compile("^(?:" + k.SubscribePattern + ")$")
		if err != nil {
			bad("source.kafka.subscribePattern %q is not a valid regular expression: %v", k.SubscribePattern, err)
		}
		s.pattern = re
	}
	if k.Assign != "" {
		modes++
		var m map[string][]int32
		if err := json.Unmarshal([]byte(k.Assign), &m); err != nil || len(m) == 0 {
			bad(`source.kafka.assign %q: want a JSON object of topic to partitions, like {"topicA":[0,1]}`, k.Assign)
		} else {
			s.assign = map[string][]int32{}
			for t, ps := range m {
				if t == "" || len(ps) == 0 {
					bad("source.kafka.assign %q: topic %q needs a name and at least one partition", k.Assign, t)
					continue
				}
				ps = slices.Clone(ps)
				slices.Sort(ps)
				ps = slices.Compact(ps)
				if ps[0] < 0 {
					bad("source.kafka.assign %q: topic %s: partition %d is negative", k.Assign, t, ps[0])
				}
				s.assign[t] = ps
			}
		}
	}
	if modes != 1 {
		bad("source.kafka needs exactly one of subscribe, subscribePattern or assign (got %d)", modes)
	}

	switch so := strings.TrimSpace(k.StartingOffsets); strings.ToLower(so) {
	case "", "latest": // Spark's default for streaming queries
		s.starting = "latest"
	case "earliest":
		s.starting = "earliest"
	default:
		s.starting = "specific"
		o, err := DecodeOffsets([]byte(so))
		if err != nil || len(o) == 0 {
			bad(`source.kafka.startingOffsets %q: want earliest, latest or a JSON object like {"topic":{"0":42}} (-2 earliest, -1 latest)`, so)
			break
		}
		s.startOffsets = o
		for _, tp := range o.Partitions() {
			off, _ := o.Get(tp)
			if off < -2 {
				bad("source.kafka.startingOffsets: %s offset %d: offsets are >= 0, or -2 for earliest, -1 for latest", tp, off)
			}
			switch {
			case s.topics != nil && !slices.Contains(s.topics, tp.Topic):
				bad("source.kafka.startingOffsets names topic %s, which is not in subscribe %q", tp.Topic, k.Subscribe)
			case s.pattern != nil && !s.pattern.MatchString(tp.Topic):
				bad("source.kafka.startingOffsets names topic %s, which does not match subscribePattern %q", tp.Topic, k.SubscribePattern)
			case s.assign != nil && !slices.Contains(s.assign[tp.Topic], tp.Partition):
				bad("source.kafka.startingOffsets names %s, which is not in assign %q", tp, k.Assign)
			}
		}
		if s.assign != nil {
			for t, ps := range s.assign {
				for _, p := range ps {
					if _, ok := o.Get(TopicPartition{t, p}); !ok {
						bad("source.kafka.startingOffsets must give an offset for every assigned partition (-2 earliest, -1 latest): %s is missing", TopicPartition{t, p})
					}
				}
			}
		}
	}

	if k.MaxOffsetsPerTrigger < 0 {
		bad("source.kafka.maxOffsetsPerTrigger %d must be positive (or absent for no cap)", k.MaxOffsetsPerTrigger)
	}
	if k.MinPartitions < 0 {
		bad("source.kafka.minPartitions %d must be positive (or absent)", k.MinPartitions)
	}
	if k.MinOffsetsPerTask < 0 {
		bad("source.kafka.minOffsetsPerTask %d must be positive (or absent for %d)", k.MinOffsetsPerTask, DefaultMinOffsetsPerTask)
	}

	c, cerrs := parseClient(k.Options)
	s.client = c
	errs = append(errs, cerrs...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

func parseClient(raw map[string]string) (clientSettings, []error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	c := clientSettings{protocol: "PLAINTEXT", verifyHostname: true}
	opts := map[string]string{}
	for name, v := range raw {
		opts[strings.TrimPrefix(name, "kafka.")] = v
	}
	// shown is the value for messages: secrets are never shown.
	shown := func(name string) string {
		if secretOptions[name] {
			return redactedValue
		}
		return strconv.Quote(opts[name])
	}
	var unknown []string
	for _, name := range slices.Sorted(maps.Keys(opts)) {
		if name == "bootstrap.servers" {
			continue
		}
		if why, ok := refusedOptions[name]; ok {
			bad("source.kafka option kafka.%s is not supported: %s", name, why)
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
		bad("source.kafka: unsupported Kafka client option(s) %s; supported: %s",
			strings.Join(unknown, ", "), strings.Join(sup, ", "))
	}

	if v, ok := opts["security.protocol"]; ok {
		c.protocol = strings.ToUpper(strings.TrimSpace(v))
		switch c.protocol {
		case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
		default:
			bad("source.kafka option kafka.security.protocol %s: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", shown("security.protocol"))
		}
	}
	saslOn := strings.HasPrefix(c.protocol, "SASL_")
	tlsOn := c.protocol == "SSL" || c.protocol == "SASL_SSL"

	for _, name := range []string{"sasl.mechanism", "sasl.jaas.config", "sasl.username", "sasl.password", "sasl.oauthbearer.token.file"} {
		if _, ok := opts[name]; ok && !saslOn {
			bad("source.kafka option kafka.%s needs kafka.security.protocol SASL_PLAINTEXT or SASL_SSL (it is %s)", name, c.protocol)
		}
	}
	for _, name := range []string{"ssl.truststore.location", "ssl.truststore.certificates", "ssl.truststore.type",
		"ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.type",
		"ssl.endpoint.identification.algorithm"} {
		if _, ok := opts[name]; ok && !tlsOn {
			bad("source.kafka option kafka.%s needs kafka.security.protocol SSL or SASL_SSL (it is %s)", name, c.protocol)
		}
	}

	if saslOn {
		c.mechanism = strings.ToUpper(strings.TrimSpace(opts["sasl.mechanism"]))
		switch c.mechanism {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM":
		case "":
			bad("source.kafka: kafka.security.protocol %s needs kafka.sasl.mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM", c.protocol)
		default:
			bad("source.kafka option kafka.sasl.mechanism %s: want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM", shown("sasl.mechanism"))
		}
		_, hasTokenFile := opts["sasl.oauthbearer.token.file"]
		if hasTokenFile && c.mechanism != "OAUTHBEARER" {
			bad("source.kafka option kafka.sasl.oauthbearer.token.file needs kafka.sasl.mechanism OAUTHBEARER (it is %s)", c.mechanism)
		}
		if c.mechanism == "OAUTHBEARER" || c.mechanism == "AWS_MSK_IAM" {
			for _, name := range []string{"sasl.jaas.config", "sasl.username", "sasl.password"} {
				if _, ok := opts[name]; ok {
					bad("source.kafka option kafka.%s does not apply to kafka.sasl.mechanism %s (%s)", name, c.mechanism, tokenSourceHelp[c.mechanism])
				}
			}
			switch {
			case c.mechanism == "AWS_MSK_IAM" && c.protocol != "SASL_SSL":
				bad("source.kafka: kafka.sasl.mechanism AWS_MSK_IAM needs kafka.security.protocol SASL_SSL (MSK serves IAM on its TLS listener)")
			case c.mechanism == "OAUTHBEARER":
				c.tokenFile = strings.TrimSpace(opts["sasl.oauthbearer.token.file"])
				if c.tokenFile == "" {
					bad("source.kafka: kafka.sasl.mechanism OAUTHBEARER needs kafka.sasl.oauthbearer.token.file (%s)", tokenSourceHelp[c.mechanism])
				}
			}
		}
		jaas, hasJAAS := opts["sasl.jaas.config"]
		user, hasUser := opts["sasl.username"]
		pass, hasPass := opts["sasl.password"]
		switch {
		case c.mechanism == "OAUTHBEARER" || c.mechanism == "AWS_MSK_IAM":
		case hasJAAS && (hasUser || hasPass):
			bad("source.kafka: give the SASL credentials either in kafka.sasl.jaas.config or in kafka.sasl.username and kafka.sasl.password, not both")
		case hasJAAS:
			module, kv, err := parseJAAS(jaas)
			if err != nil {
				bad("source.kafka option kafka.sasl.jaas.config (value %s): %v", redactedValue, err)
				break
			}
			wantModule := "org.apache.kafka.common.security.plain.PlainLoginModule"
			if strings.HasPrefix(c.mechanism, "SCRAM-") {
				wantModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
			}
			if c.mechanism != "" && module != wantModule {
				bad("source.kafka option kafka.sasl.jaas.config uses login module %s; kafka.sasl.mechanism %s needs %s", module, c.mechanism, wantModule)
			}
			c.user, c.pass = kv["username"], kv["password"]
			if c.user == "" || c.pass == "" {
				bad("source.kafka option kafka.sasl.jaas.config (value %s) needs username=\"...\" and password=\"...\"", redactedValue)
			}
		default:
			c.user, c.pass = user, pass
			if c.user == "" || c.pass == "" {
				bad("source.kafka: SASL needs kafka.sasl.jaas.config, or kafka.sasl.username and kafka.sasl.password")
			}
		}
	}

	if tlsOn {
		for _, name := range []string{"ssl.truststore.type", "ssl.keystore.type"} {
			if v, ok := opts[name]; ok && !strings.EqualFold(strings.TrimSpace(v), "PEM") {
				bad("source.kafka option kafka.%s %s: only PEM is supported (convert JKS or PKCS12 stores with keytool and openssl)", name, shown(name))
			}
		}
		c.trustFile = opts["ssl.truststore.location"]
		c.trustPEM = opts["ssl.truststore.certificates"]
		if c.trustFile != "" && c.trustPEM != "" {
			bad("source.kafka: give kafka.ssl.truststore.location or kafka.ssl.truststore.certificates, not both")
		}
		c.keystoreFile = opts["ssl.keystore.location"]
		c.certChainPEM = opts["ssl.keystore.certificate.chain"]
		c.keyPEM = opts["ssl.keystore.key"]
		if c.keystoreFile != "" && (c.certChainPEM != "" || c.keyPEM != "") {
			bad("source.kafka: give kafka.ssl.keystore.location or kafka.ssl.keystore.certificate.chain with kafka.ssl.keystore.key, not both")
		}
		if (c.certChainPEM == "") != (c.keyPEM == "") {
			bad("source.kafka: kafka.ssl.keystore.certificate.chain and kafka.ssl.keystore.key go together")
		}
		if v, ok := opts["ssl.endpoint.identification.algorithm"]; ok {
			switch strings.ToLower(strings.TrimSpace(v)) {
			case "https":
			case "":
				c.verifyHostname = false
			default:
				bad("source.kafka option kafka.ssl.endpoint.identification.algorithm %s: want https (verify the broker host name, the default) or empty (do not)", shown("ssl.endpoint.identification.algorithm"))
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
			bad("source.kafka option kafka.isolation.level %s: want read_uncommitted (the default) or read_committed", shown("isolation.level"))
		}
	}
	posInt := func(name string, max int64) int64 {
		v, ok := opts[name]
		if !ok {
			return 0
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n <= 0 || n > max {
			bad("source.kafka option kafka.%s %s: want a whole number from 1 to %d", name, shown(name), max)
			return 0
		}
		return n
	}
	c.fetchMaxBytes = int32(posInt("fetch.max.bytes", 1<<30))
	c.partFetchBytes = int32(posInt("max.partition.fetch.bytes", 1<<30))
	c.fetchMaxWait = time.Duration(posInt("fetch.max.wait.ms", 60000)) * time.Millisecond
	return c, errs
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
