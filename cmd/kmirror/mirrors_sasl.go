package main

import (
	"flag"
	"os"
	"strings"

	"kmirror/openapi/client"
)

// mirrorsSASLFlags are --create's settings of the AWS_MSK_IAM and
// OAUTHBEARER mechanisms. Secrets come from files or the environment,
// never from the command line, as --sasl-password-file's does.
type mirrorsSASLFlags struct {
	awsAccessKeyID         string
	awsSecretAccessKeyFile string
	awsSessionTokenFile    string
	awsRegion              string
	oauthTokenEndpointURL  string
	oauthClientID          string
	oauthClientSecretFile  string
	oauthScope             string
	oauthExtensions        configFlag
}

// mirrorsSASLFlagNames are the flags above, all for --create.
var mirrorsSASLFlagNames = []string{"aws-access-key-id", "aws-secret-access-key-file", "aws-session-token-file", "aws-region",
	"sasl-oauthbearer-token-endpoint-url", "sasl-oauthbearer-client-id", "sasl-oauthbearer-client-secret-file",
	"sasl-oauthbearer-scope", "sasl-oauthbearer-extension"}

func (f *mirrorsSASLFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.awsAccessKeyID, "aws-access-key-id", "", "AWS_MSK_IAM: access key id; without it the server's AWS default credential chain signs in")
	fs.StringVar(&f.awsSecretAccessKeyFile, "aws-secret-access-key-file", "", "AWS_MSK_IAM: file holding the secret access key (else KMIRROR_SOURCE_AWS_SECRET_ACCESS_KEY)")
	fs.StringVar(&f.awsSessionTokenFile, "aws-session-token-file", "", "AWS_MSK_IAM: file holding the session token of temporary keys (else KMIRROR_SOURCE_AWS_SESSION_TOKEN)")
	fs.StringVar(&f.awsRegion, "aws-region", "", "AWS_MSK_IAM: region of the default credential chain (requests are signed for the brokers' region)")
	fs.StringVar(&f.oauthTokenEndpointURL, "sasl-oauthbearer-token-endpoint-url", "", "OAUTHBEARER: the OIDC token endpoint (https)")
	fs.StringVar(&f.oauthClientID, "sasl-oauthbearer-client-id", "", "OAUTHBEARER: client id")
	fs.StringVar(&f.oauthClientSecretFile, "sasl-oauthbearer-client-secret-file", "", "OAUTHBEARER: file holding the client secret (else KMIRROR_SOURCE_SASL_OAUTHBEARER_CLIENT_SECRET)")
	fs.StringVar(&f.oauthScope, "sasl-oauthbearer-scope", "", "OAUTHBEARER: scopes to ask for, separated by spaces")
	fs.Var(&f.oauthExtensions, "sasl-oauthbearer-extension", "OAUTHBEARER: SASL extension KEY=VALUE, such as logicalCluster=lkc-abc123 (repeatable)")
}

// apply sets the mechanism's fields of src, reading the secret files, or
// the environment for the mechanism given.
func (f *mirrorsSASLFlags) apply(src *client.SourceSpec, mechanism string) error {
	src.AwsAccessKeyId = ptrOrNil(f.awsAccessKeyID)
	src.AwsRegion = ptrOrNil(f.awsRegion)
	src.SaslOauthbearerTokenEndpointUrl = ptrOrNil(f.oauthTokenEndpointURL)
	src.SaslOauthbearerClientId = ptrOrNil(f.oauthClientID)
	src.SaslOauthbearerScope = ptrOrNil(f.oauthScope)
	if len(f.oauthExtensions) > 0 {
		ext := map[string]string(f.oauthExtensions)
		src.SaslOauthbearerExtensions = &ext
	}
	return readSecrets([]secretSource{
		{"aws-secret-access-key-file", f.awsSecretAccessKeyFile, "KMIRROR_SOURCE_AWS_SECRET_ACCESS_KEY",
			mechanism == "AWS_MSK_IAM" && f.awsAccessKeyID != "", &src.AwsSecretAccessKey},
		{"aws-session-token-file", f.awsSessionTokenFile, "KMIRROR_SOURCE_AWS_SESSION_TOKEN",
			mechanism == "AWS_MSK_IAM" && f.awsAccessKeyID != "", &src.AwsSessionToken},
		{"sasl-oauthbearer-client-secret-file", f.oauthClientSecretFile, "KMIRROR_SOURCE_SASL_OAUTHBEARER_CLIENT_SECRET",
			mechanism == "OAUTHBEARER", &src.SaslOauthbearerClientSecret},
	})
}

// secretSource is a write-only field the CLI reads from a file named by a
// flag, or else from the environment.
type secretSource struct {
	flag, path, env string
	use             bool // the environment is read only when the source uses the field
	dst             **string
}

// readSecrets fills each field from its file, or its variable when used.
func readSecrets(sources []secretSource) error {
	for _, s := range sources {
		switch {
		case s.path != "":
			v, err := readSecretFile(s.flag, s.path)
			if err != nil {
				return err
			}
			// A secret file usually ends with a newline that is not part of it.
			*s.dst = ptrOrNil(strings.TrimRight(v, "\r\n"))
		case s.use:
			*s.dst = ptrOrNil(os.Getenv(s.env))
		}
	}
	return nil
}

func init() {
	for _, name := range mirrorsSASLFlagNames {
		mirrorsFlagActions[name] = []string{"create"}
	}
}
