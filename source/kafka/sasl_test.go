package kafka

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/sluicehq/sluice/query"
)

// mechanismOf builds the client for opts and returns its SASL mechanism.
func mechanismOf(t *testing.T, opts map[string]string) sasl.Mechanism {
	t.Helper()
	set, err := parse(query.KafkaSource{BootstrapServers: "127.0.0.1:1", Subscribe: "a", Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	copts, err := set.client.clientOpts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(copts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ms := cl.OptValue(kgo.SASL).([]sasl.Mechanism)
	if len(ms) != 1 {
		t.Fatalf("%d SASL mechanisms", len(ms))
	}
	return ms[0]
}

// kfake does not implement OAUTHBEARER (only PLAIN and SCRAM), so the
// mechanism is checked at its first message: the token file is re-read at
// every authentication.
func TestOauthbearerReadsTheTokenFileAtEveryAuthentication(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("first-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := mechanismOf(t, map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "oauthbearer", "sasl.oauthbearer.token.file": file})
	if m.Name() != "OAUTHBEARER" {
		t.Fatalf("mechanism %s", m.Name())
	}
	first := func() string {
		_, msg, err := m.Authenticate(context.Background(), "broker:9093")
		if err != nil {
			t.Fatal(err)
		}
		return string(msg)
	}
	if got := first(); !strings.Contains(got, "auth=Bearer first-token\x01") {
		t.Fatalf("first message %q does not carry the token", got)
	}
	if err := os.WriteFile(file, []byte("second-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := first(); !strings.Contains(got, "auth=Bearer second-token\x01") {
		t.Fatalf("after the file changed, first message %q does not carry the new token", got)
	}
	if err := os.WriteFile(file, []byte("  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Authenticate(context.Background(), "broker:9093"); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("blank token file: %v", err)
	}
}

// MSK IAM signs with credentials from the AWS chain (here the environment).
func TestMSKIAMUsesTheAWSCredentialChain(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	m := mechanismOf(t, map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "AWS_MSK_IAM"})
	if m.Name() != "AWS_MSK_IAM" {
		t.Fatalf("mechanism %s", m.Name())
	}
	_, msg, err := m.Authenticate(context.Background(), "b-1.msk.eu-west-1.amazonaws.com:9098")
	if err != nil {
		t.Fatal(err)
	}
	var payload map[string]string
	if err := json.Unmarshal(msg, &payload); err != nil {
		t.Fatalf("payload %q: %v", msg, err)
	}
	if payload["action"] != "kafka-cluster:Connect" || !strings.HasPrefix(payload["x-amz-credential"], "AKIDEXAMPLE/") || payload["x-amz-signature"] == "" {
		t.Fatalf("payload %v: want a Connect action signed with the environment's key", payload)
	}
	if strings.Contains(string(msg), "wJalrXUtnFEMI") {
		t.Fatal("the secret key is in the payload")
	}
}

func TestTokenMechanismOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		opts map[string]string
		want string
	}{
		{map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}, "kafka.sasl.oauthbearer.token.file"},
		{map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.token.file": "/t", "sasl.password": "hunter2"}, "kafka.sasl.password: [redacted] does not apply"},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "AWS_MSK_IAM"}, "needs kafka.security.protocol SASL_SSL"},
		{map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "hunter2", "sasl.oauthbearer.token.file": "/t"}, "needs kafka.sasl.mechanism OAUTHBEARER"},
		{map[string]string{"sasl.oauthbearer.token.file": "/t"}, "needs kafka.security.protocol SASL_PLAINTEXT or SASL_SSL"},
	} {
		_, err := parse(query.KafkaSource{BootstrapServers: "127.0.0.1:1", Subscribe: "a", Options: tc.opts})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%v: got %v, want an error containing %q without the secret", tc.opts, err, tc.want)
		}
	}
	set, err := parse(query.KafkaSource{BootstrapServers: "127.0.0.1:1", Subscribe: "a", Options: map[string]string{
		"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.token.file": filepath.Join(t.TempDir(), "missing")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.client.clientOpts(); err == nil || !strings.Contains(err.Error(), "kafka.sasl.oauthbearer.token.file") {
		t.Errorf("missing token file: %v", err)
	}
}
