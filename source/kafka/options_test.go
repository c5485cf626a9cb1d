package kafka

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluicehq/sluice/internal/testutil/kafkatest"
	"github.com/sluicehq/sluice/query"
)

const secret = "s3cr3t-Pa55"

func TestValidateReportsEveryProblemWithFieldAndRule(t *testing.T) {
	cases := []struct {
		name string
		k    query.KafkaSource
		want []string
	}{
		{"nothing", query.KafkaSource{}, []string{"source.kafka.bootstrapServers: required", "exactly one of subscribe, subscribePattern or assign"}},
		{"two modes", query.KafkaSource{BootstrapServers: "b:9092", Subscribe: "a", SubscribePattern: "a.*"}, []string{"exactly one of", `"subscribe, subscribePattern" sets more than one subscription`}},
		{"bad pattern", query.KafkaSource{BootstrapServers: "b:9092", SubscribePattern: "a("}, []string{`source.kafka.subscribePattern: "a(" is not a valid regular expression`}},
		{"bad assign", query.KafkaSource{BootstrapServers: "b:9092", Assign: "[0]"}, []string{`source.kafka.assign: [0] is not a JSON map of topic to partitions`}},
		{"bad starting", query.KafkaSource{BootstrapServers: "b:9092", Subscribe: "a", StartingOffsets: "first"}, []string{`source.kafka.startingOffsets: "first" is not earliest, latest`}},
		{"starting topic not subscribed", query.KafkaSource{BootstrapServers: "b:9092", Subscribe: "a", StartingOffsets: `{"b":{"0":1}}`}, []string{"names topic b, which subscribe does not list"}},
		{"starting misses assigned", query.KafkaSource{BootstrapServers: "b:9092", Assign: `{"a":[0,1]}`, StartingOffsets: `{"a":{"0":1}}`}, []string{"gives no offset for assigned partition a-1"}},
		{"negative cap", query.KafkaSource{BootstrapServers: "b:9092", Subscribe: "a", MaxOffsetsPerTrigger: -1, MinPartitions: -2}, []string{"source.kafka.maxOffsetsPerTrigger: -1 must be >= 0", "source.kafka.minPartitions: -2 must be >= 0"}},
		{"unknown option", query.KafkaSource{BootstrapServers: "b:9092", Subscribe: "a", Options: map[string]string{"linger.ms": "5"}},
			[]string{"unsupported Kafka client option(s) kafka.linger.ms", "supported: kafka.client.id", "kafka.sasl.mechanism"}},
		{"group.id", query.KafkaSource{BootstrapServers: "b:9092", Subscribe: "a", Options: map[string]string{"kafka.group.id": "g"}}, []string{`source.kafka.kafka.group.id: "g" is not supported`, "consumer group"}},
		{"sasl without protocol", query.KafkaSource{BootstrapServers: "b:9092", Subscribe: "a", Options: map[string]string{"sasl.mechanism": "PLAIN"}}, []string{`source.kafka.kafka.sasl.mechanism: "PLAIN" needs kafka.security.protocol SASL_PLAINTEXT or SASL_SSL`}},
		{"sasl without mechanism", query.KafkaSource{BootstrapServers: "b:9092", Subscribe: "a", Options: map[string]string{"security.protocol": "SASL_SSL", "sasl.username": "u", "sasl.password": secret}}, []string{"needs kafka.sasl.mechanism"}},
		{"gssapi", query.KafkaSource{BootstrapServers: "b:9092", Subscribe: "a", Options: map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.username": "u", "sasl.password": secret}}, []string{`source.kafka.kafka.sasl.mechanism: "GSSAPI" is not supported`}},
		{"jaas module mismatch", query.KafkaSource{BootstrapServers: "b:9092", Subscribe: "a", Options: map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
			"sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="` + secret + `";`}}, []string{"needs org.apache.kafka.common.security.scram.ScramLoginModule"}},
		{"broken jaas", query.KafkaSource{BootstrapServers: "b:9092", Subscribe: "a", Options: map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
			"sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="` + secret}}, []string{"source.kafka.kafka.sasl.jaas.config: [redacted] is not a JAAS login line"}},
		{"jks", query.KafkaSource{BootstrapServers: "b:9092", Subscribe: "a", Options: map[string]string{"security.protocol": "SSL", "ssl.truststore.type": "JKS"}}, []string{`source.kafka.kafka.ssl.truststore.type: "JKS" is not supported: only PEM is`}},
		{"ssl without protocol", query.KafkaSource{BootstrapServers: "b:9092", Subscribe: "a", Options: map[string]string{"ssl.truststore.location": "/ca.pem"}}, []string{"needs kafka.security.protocol SSL or SASL_SSL"}},
		{"key password", query.KafkaSource{BootstrapServers: "b:9092", Subscribe: "a", Options: map[string]string{"security.protocol": "SSL", "ssl.key.password": secret}}, []string{"source.kafka.kafka.ssl.key.password: [redacted] is not supported"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate(c.k)
			if err == nil {
				t.Fatalf("Validate accepted %+v", c.k)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error shows the secret: %q", err)
			}
		})
	}
	ok := query.KafkaSource{BootstrapServers: "b:9092", Subscribe: "a, b", StartingOffsets: `{"a":{"0":-2},"b":{"0":5}}`, MaxOffsetsPerTrigger: 10,
		Options: map[string]string{"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.username": "u", "kafka.sasl.password": secret,
			"kafka.isolation.level": "read_committed", "kafka.client.id": "sluice"}}
	if err := Validate(ok); err != nil {
		t.Fatalf("Validate rejected a good spec: %v", err)
	}
}

// The kafka.* options turn into the franz-go client options Kafka users
// would expect.
func TestClientOptionsMapSASLAndTLS(t *testing.T) {
	cases := []struct {
		name      string
		opts      map[string]string
		mechanism string
		tls       bool
	}{
		{"plaintext", map[string]string{}, "", false},
		{"ssl", map[string]string{"security.protocol": "SSL"}, "", true},
		{"plain via jaas", map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
			"sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="` + secret + `";`}, "PLAIN", true},
		{"scram-256", map[string]string{"security.protocol": "sasl_plaintext", "sasl.mechanism": "scram-sha-256", "sasl.username": "bob", "sasl.password": secret}, "SCRAM-SHA-256", false},
		{"scram-512 via jaas", map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
			"sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required
			  username="carol"
			  password="` + secret + `";`}, "SCRAM-SHA-512", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set, err := parse(query.KafkaSource{BootstrapServers: "127.0.0.1:1", Subscribe: "a", Options: c.opts})
			if err != nil {
				t.Fatal(err)
			}
			opts, err := set.client.clientOpts()
			if err != nil {
				t.Fatal(err)
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			var names []string
			for _, v := range cl.OptValues(kgo.SASL) {
				for _, m := range v.([]sasl.Mechanism) {
					names = append(names, m.Name())
				}
			}
			if got := strings.Join(names, ","); got != c.mechanism {
				t.Errorf("SASL mechanisms %q, want %q", got, c.mechanism)
			}
			tc, _ := cl.OptValue(kgo.DialTLSConfig).(*tls.Config)
			if (tc != nil) != c.tls {
				t.Errorf("TLS config %v, want TLS %v", tc, c.tls)
			}
			if c.mechanism != "" && set.client.pass != secret {
				t.Errorf("password not taken from the options")
			}
		})
	}
}

func TestRedactedHidesSecretsFromLogs(t *testing.T) {
	k := query.KafkaSource{BootstrapServers: "127.0.0.1:1", Subscribe: "a", Options: map[string]string{
		"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "alice", "kafka.sasl.password": secret,
	}}
	r := (query.Spec{Source: query.Source{Kafka: &k}}).Redacted().Source.Kafka
	if r.Options["kafka.sasl.password"] != "[redacted]" || r.Options["sasl.username"] != "alice" {
		t.Fatalf("Redacted options = %v", r.Options)
	}
	if k.Options["kafka.sasl.password"] != secret {
		t.Fatal("Redacted changed its input")
	}
	var buf bytes.Buffer
	s, err := New(Config{Kafka: k, Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.Contains(buf.String(), "kafka source configured") || !strings.Contains(buf.String(), "alice") {
		t.Fatalf("no configuration log line: %q", buf.String())
	}
	if strings.Contains(buf.String(), secret) {
		t.Fatalf("log shows the password: %q", buf.String())
	}
}

func TestSASLCredentialsAuthenticateAgainstBroker(t *testing.T) {
	c := kafkatest.Start(t, kfake.SeedTopics(1, "events"), kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "alice", secret),
		kfake.Superuser("SCRAM-SHA-256", "bob", secret),
		kfake.Superuser("SCRAM-SHA-512", "carol", secret))
	c.ClientOpts = []kgo.Opt{kgo.SASL(plain.Auth{User: "alice", Pass: secret}.AsMechanism())}
	c.ProduceN("events", 0, 10, kafkatest.Value)

	good := []map[string]string{
		{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
			"sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="` + secret + `";`},
		{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "bob", "sasl.password": secret},
		{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
			"sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="carol" password="` + secret + `";`},
	}
	for _, opts := range good {
		s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events", StartingOffsets: "earliest", Options: opts})
		ctx := testCtx(t)
		start, err := s.Initial(ctx)
		if err != nil {
			t.Fatalf("%s: Initial: %v", opts["sasl.mechanism"], err)
		}
		if n := len(readBatch(t, s, start, Offsets{"events": {0: 10}}.Encode())); n != 10 {
			t.Fatalf("%s: read %d records, want 10", opts["sasl.mechanism"], n)
		}
	}

	s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events", Options: map[string]string{
		"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "bob", "sasl.password": "wrong-" + secret}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := s.Initial(ctx)
	if err == nil {
		t.Fatal("a wrong password was accepted")
	}
	t.Logf("wrong password: %v", err)
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("error shows the password: %v", err)
	}
}

func TestTLSTrustsTheGivenCAAndChecksTheHostName(t *testing.T) {
	dir := t.TempDir()
	caPEM, serverCert := makeCA(t, "broker.example")
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	c := kafkatest.Start(t, kfake.SeedTopics(1, "events"), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{serverCert}}))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	c.ClientOpts = []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: pool, ServerName: "broker.example"})}
	c.ProduceN("events", 0, 5, kafkatest.Value)

	// The certificate names broker.example, not 127.0.0.1: with host name
	// verification off (empty algorithm) the chain alone is checked.
	s := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events", StartingOffsets: "earliest", Options: map[string]string{
		"security.protocol": "SSL", "ssl.truststore.location": caFile, "ssl.truststore.type": "PEM", "ssl.endpoint.identification.algorithm": ""}})
	start, err := s.Initial(testCtx(t))
	if err != nil {
		t.Fatalf("Initial over TLS: %v", err)
	}
	if n := len(readBatch(t, s, start, Offsets{"events": {0: 5}}.Encode())); n != 5 {
		t.Fatalf("read %d records over TLS, want 5", n)
	}

	short := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	// Default: the host name is verified, and 127.0.0.1 is not in the certificate.
	s2 := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events", Options: map[string]string{
		"security.protocol": "SSL", "ssl.truststore.location": caFile}})
	if _, err := s2.Initial(short()); err == nil {
		t.Fatal("a certificate for another host name was accepted")
	}
	// A CA that did not sign the broker's certificate is refused.
	otherCA, _ := makeCA(t, "broker.example")
	s3 := newSource(t, query.KafkaSource{BootstrapServers: c.Addr, Subscribe: "events", Options: map[string]string{
		"security.protocol": "SSL", "ssl.truststore.certificates": string(otherCA), "ssl.endpoint.identification.algorithm": ""}})
	if _, err := s3.Initial(short()); err == nil {
		t.Fatal("a broker certificate from an unknown CA was accepted")
	}
}

// makeCA returns a CA certificate (PEM) and a server certificate for host
// signed by it.
func makeCA(t *testing.T, host string) ([]byte, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
