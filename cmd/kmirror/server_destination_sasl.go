package main

import (
	"fmt"
	"os"
	"strings"

	"kmirror/internal/kafka/kafkaconn"
)

// serverEnvSASL lists the destination's AWS_MSK_IAM and OAUTHBEARER
// settings, environment only like the rest of its security.
const serverEnvSASL = `  KMIRROR_DESTINATION_AWS_ACCESS_KEY_ID    AWS_MSK_IAM: access key id; without one, the AWS default credential
                                           chain (AWS_* variables, EKS web identity, shared config, instance role)
  KMIRROR_DESTINATION_AWS_SECRET_ACCESS_KEY  its secret key
  KMIRROR_DESTINATION_AWS_SESSION_TOKEN    the session token of temporary keys
  KMIRROR_DESTINATION_AWS_REGION           the default chain's region (requests are signed for the brokers')
  KMIRROR_DESTINATION_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL  OAUTHBEARER: the OIDC token endpoint (https)
  KMIRROR_DESTINATION_SASL_OAUTHBEARER_CLIENT_ID      its client id
  KMIRROR_DESTINATION_SASL_OAUTHBEARER_CLIENT_SECRET  its client secret
  KMIRROR_DESTINATION_SASL_OAUTHBEARER_SCOPE          scopes to ask for, separated by spaces
  KMIRROR_DESTINATION_SASL_OAUTHBEARER_EXTENSIONS     SASL extensions, KEY=VALUE,KEY=VALUE
`

// destinationSASLFromEnv reads the destination's AWS_MSK_IAM and
// OAUTHBEARER settings into sec.
func destinationSASLFromEnv(sec *kafkaconn.Security) error {
	sec.AWS = kafkaconn.AWSAuth{
		AccessKeyID:     os.Getenv("KMIRROR_DESTINATION_AWS_ACCESS_KEY_ID"),
		SecretAccessKey: os.Getenv("KMIRROR_DESTINATION_AWS_SECRET_ACCESS_KEY"),
		SessionToken:    os.Getenv("KMIRROR_DESTINATION_AWS_SESSION_TOKEN"),
		Region:          os.Getenv("KMIRROR_DESTINATION_AWS_REGION"),
	}
	sec.OAuth = kafkaconn.OAuthAuth{
		TokenEndpointURL: os.Getenv("KMIRROR_DESTINATION_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL"),
		ClientID:         os.Getenv("KMIRROR_DESTINATION_SASL_OAUTHBEARER_CLIENT_ID"),
		ClientSecret:     os.Getenv("KMIRROR_DESTINATION_SASL_OAUTHBEARER_CLIENT_SECRET"),
		Scope:            os.Getenv("KMIRROR_DESTINATION_SASL_OAUTHBEARER_SCOPE"),
	}
	ext, err := parseExtensions(os.Getenv("KMIRROR_DESTINATION_SASL_OAUTHBEARER_EXTENSIONS"))
	if err != nil {
		return fmt.Errorf("KMIRROR_DESTINATION_SASL_OAUTHBEARER_EXTENSIONS: %w", err)
	}
	sec.OAuth.Extensions = ext
	return nil
}

// parseExtensions reads "KEY=VALUE,KEY=VALUE" (Kafka's extension values
// hold no comma in practice: ids such as lkc-abc123).
func parseExtensions(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not KEY=VALUE", kv)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%s is given twice", k)
		}
		out[k] = v
	}
	return out, kafkaconn.CheckExtensions(out)
}
