package e2e

import (
	"os"
	"strings"

	"kmirror/internal/kafka/kafkaconn"
)

// The AWS_MSK_IAM and OAUTHBEARER settings of a conformance cluster, read
// and passed on under the names the server and the API use.

// saslFromEnv reads AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN, AWS_REGION and SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL,
// _CLIENT_ID, _CLIENT_SECRET, _SCOPE and _EXTENSIONS (KEY=VALUE,...)
// under prefix.
func saslFromEnv(prefix string, s *kafkaconn.Security) {
	s.AWS = kafkaconn.AWSAuth{AccessKeyID: os.Getenv(prefix + "AWS_ACCESS_KEY_ID"),
		SecretAccessKey: os.Getenv(prefix + "AWS_SECRET_ACCESS_KEY"), SessionToken: os.Getenv(prefix + "AWS_SESSION_TOKEN"),
		Region: os.Getenv(prefix + "AWS_REGION")}
	o := prefix + "SASL_OAUTHBEARER_"
	s.OAuth = kafkaconn.OAuthAuth{TokenEndpointURL: os.Getenv(o + "TOKEN_ENDPOINT_URL"), ClientID: os.Getenv(o + "CLIENT_ID"),
		ClientSecret: os.Getenv(o + "CLIENT_SECRET"), Scope: os.Getenv(o + "SCOPE")}
	for _, kv := range strings.Split(os.Getenv(o+"EXTENSIONS"), ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok {
			if s.OAuth.Extensions == nil {
				s.OAuth.Extensions = map[string]string{}
			}
			s.OAuth.Extensions[k] = v
		}
	}
}

// saslServerEnv is the server's KMIRROR_DESTINATION_* for s.
func saslServerEnv(s kafkaconn.Security) []string {
	var ext []string
	for k, v := range s.OAuth.Extensions {
		ext = append(ext, k+"="+v)
	}
	return []string{
		"KMIRROR_DESTINATION_AWS_ACCESS_KEY_ID=" + s.AWS.AccessKeyID,
		"KMIRROR_DESTINATION_AWS_SECRET_ACCESS_KEY=" + s.AWS.SecretAccessKey,
		"KMIRROR_DESTINATION_AWS_SESSION_TOKEN=" + s.AWS.SessionToken,
		"KMIRROR_DESTINATION_AWS_REGION=" + s.AWS.Region,
		"KMIRROR_DESTINATION_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL=" + s.OAuth.TokenEndpointURL,
		"KMIRROR_DESTINATION_SASL_OAUTHBEARER_CLIENT_ID=" + s.OAuth.ClientID,
		"KMIRROR_DESTINATION_SASL_OAUTHBEARER_CLIENT_SECRET=" + s.OAuth.ClientSecret,
		"KMIRROR_DESTINATION_SASL_OAUTHBEARER_SCOPE=" + s.OAuth.Scope,
		"KMIRROR_DESTINATION_SASL_OAUTHBEARER_EXTENSIONS=" + strings.Join(ext, ","),
	}
}

// saslSourceSpec adds s's mechanism fields to a mirror's source.
func saslSourceSpec(s kafkaconn.Security, spec map[string]any) {
	for k, v := range map[string]string{"aws_access_key_id": s.AWS.AccessKeyID, "aws_secret_access_key": s.AWS.SecretAccessKey,
		"aws_session_token": s.AWS.SessionToken, "aws_region": s.AWS.Region,
		"sasl_oauthbearer_token_endpoint_url": s.OAuth.TokenEndpointURL, "sasl_oauthbearer_client_id": s.OAuth.ClientID,
		"sasl_oauthbearer_client_secret": s.OAuth.ClientSecret, "sasl_oauthbearer_scope": s.OAuth.Scope} {
		if v != "" {
			spec[k] = v
		}
	}
	if len(s.OAuth.Extensions) > 0 {
		spec["sasl_oauthbearer_extensions"] = s.OAuth.Extensions
	}
}
