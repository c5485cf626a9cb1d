package kafka

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// readToken reads an OAUTHBEARER token file: its content, surrounding
// whitespace trimmed, must not be empty. Errors name the file, never the
// token.
func readToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("kafka.sasl.oauthbearer.token.file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("kafka.sasl.oauthbearer.token.file %s is empty or only whitespace", file)
	}
	return tok, nil
}

// oauthFromFile is OAUTHBEARER with the token re-read from file at every
// authentication (each new broker connection and each re-authentication),
// so whatever refreshes the file (a sidecar, a projected service-account
// token) is picked up without a restart.
func oauthFromFile(file string) sasl.Mechanism {
	return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
		tok, err := readToken(file)
		if err != nil {
			return oauth.Auth{}, err
		}
		return oauth.Auth{Token: tok}, nil
	})
}

// mskIAM is AWS_MSK_IAM with credentials from the standard AWS chain (the
// one the S3 store uses): environment, shared config and credentials
// files, web identity (EKS service accounts), container and instance
// roles. Credentials are cached and refreshed by the SDK.
func mskIAM() (sasl.Mechanism, error) {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		return nil, fmt.Errorf("kafka.sasl.mechanism AWS_MSK_IAM: load AWS settings: %w", err)
	}
	if cfg.Credentials == nil {
		return nil, errors.New("kafka.sasl.mechanism AWS_MSK_IAM: no AWS credentials provider")
	}
	return aws.ManagedStreamingIAM(func(ctx context.Context) (aws.Auth, error) {
		c, err := cfg.Credentials.Retrieve(ctx)
		if err != nil {
			return aws.Auth{}, fmt.Errorf("AWS_MSK_IAM: retrieve AWS credentials: %w", err)
		}
		return aws.Auth{AccessKey: c.AccessKeyID, SecretKey: c.SecretAccessKey, SessionToken: c.SessionToken, UserAgent: "sluice"}, nil
	}), nil
}
