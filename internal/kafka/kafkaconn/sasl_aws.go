package kafkaconn

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/twmb/franz-go/pkg/sasl"
	saslaws "github.com/twmb/franz-go/pkg/sasl/aws"
)

// AWSAuth is how kmirror signs in to Amazon MSK with AWS_MSK_IAM. With
// AccessKeyID and SecretAccessKey it uses those keys (and SessionToken, if
// any); without them it uses the AWS default credential chain: environment,
// the web identity token file of an EKS pod (IRSA), shared config and
// credentials files, then the container or instance role.
//
// franz-go signs each authentication (SigV4) for the region in the broker's
// host name, as Amazon's own Java library does (every MSK broker name
// carries it), and only for a host without one falls back to AWS_REGION or
// AWS_DEFAULT_REGION in the environment. Region is the region of the
// credential chain (its STS endpoint for a web identity or an assumed
// role); empty leaves it to the chain's own configuration.
type AWSAuth struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	Region          string
}

// fields names AWSAuth's fields as the REST API does, with their values.
func (a AWSAuth) fields() []string {
	return []string{"aws_access_key_id", a.AccessKeyID, "aws_secret_access_key", a.SecretAccessKey,
		"aws_session_token", a.SessionToken, "aws_region", a.Region}
}

// redactedFields is fields with the secrets redacted.
func (a AWSAuth) redactedFields() []string {
	return []string{"aws_access_key_id", a.AccessKeyID, "aws_secret_access_key", Redact(a.SecretAccessKey),
		"aws_session_token", Redact(a.SessionToken), "aws_region", a.Region}
}

func (a AWSAuth) String() string {
	return fmt.Sprintf("{access_key_id=%s secret_access_key=%s session_token=%s region=%s}",
		a.AccessKeyID, Redact(a.SecretAccessKey), Redact(a.SessionToken), a.Region)
}

// reAWSRegion accepts the regions of every AWS partition (us-east-1,
// us-gov-west-1, cn-north-1, eu-isoe-west-1, ...).
var reAWSRegion = regexp.MustCompile(`^[a-z]{2,}(-[a-z0-9]+)+-[0-9]+$`)

// CheckAWS reports what is wrong with a, naming the field.
func CheckAWS(a AWSAuth) error {
	switch {
	case a.AccessKeyID != "" && a.SecretAccessKey == "":
		return errors.New("aws_secret_access_key: required with aws_access_key_id")
	case a.AccessKeyID == "" && a.SecretAccessKey != "":
		return errors.New("aws_access_key_id: required with aws_secret_access_key")
	case a.AccessKeyID == "" && a.SessionToken != "":
		return errors.New("aws_session_token: only with aws_access_key_id and aws_secret_access_key (the default credential chain finds its own)")
	case a.Region != "" && !reAWSRegion.MatchString(a.Region):
		return fmt.Errorf("aws_region: %q is not an AWS region such as us-east-1", a.Region)
	}
	return nil
}

// UsesDefaultChain reports whether a leaves the credentials to the AWS
// default chain.
func (a AWSAuth) UsesDefaultChain() bool { return a.AccessKeyID == "" }

func (a AWSAuth) mechanism() (sasl.Mechanism, error) {
	if err := CheckAWS(a); err != nil {
		return nil, err
	}
	if !a.UsesDefaultChain() {
		return saslaws.ManagedStreamingIAM(func(context.Context) (saslaws.Auth, error) {
			return saslaws.Auth{AccessKey: a.AccessKeyID, SecretKey: a.SecretAccessKey, SessionToken: a.SessionToken,
				UserAgent: userAgent}, nil
		}), nil
	}
	return saslaws.ManagedStreamingIAM(sharedAWSChain(a.Region).auth), nil
}

// awsChains are the process's default credential chains: the chain is the
// process's own identity, so every client (and every mirror) that uses it
// shares one credentials cache, rather than each loading the chain and
// asking STS or the metadata service for its own. They are keyed by the
// region and by the environment the chain reads, which a process does not
// change (tests do).
var awsChains sync.Map // string -> *awsChain

// awsChainEnv is the environment that decides what the chain finds.
var awsChainEnv = []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
	"AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
	"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_EC2_METADATA_DISABLED"}

func sharedAWSChain(region string) *awsChain {
	key := []string{region}
	for _, k := range awsChainEnv {
		key = append(key, os.Getenv(k))
	}
	h := sha256.Sum256([]byte(strings.Join(key, "\x00")))
	c, _ := awsChains.LoadOrStore(h, newAWSChain(region))
	return c.(*awsChain)
}

// userAgent is what kmirror's AWS_MSK_IAM authentications say they are, so
// an IAM policy may condition on aws:UserAgent.
const userAgent = "kmirror"

// awsCredentialsExpiryWindow: credentials the chain hands out are renewed
// this long before they expire, so no authentication is signed with
// credentials about to lapse (MSK ends a session when its credentials do).
const awsCredentialsExpiryWindow = time.Minute

// awsChain resolves the default credential chain once, on the first
// authentication (building a client must not touch the network or the
// filesystem), and then serves credentials from the SDK's cache, which
// renews them before they expire: every authentication of the client's
// connections, re-authentications included (KIP-368), asks it again.
type awsChain struct {
	region string

	mu    sync.Mutex
	creds aws.CredentialsProvider
}

func newAWSChain(region string) *awsChain { return &awsChain{region: region} }

// AWSDefaultCredentialsTimeout bounds resolving the default chain (its
// files, and the metadata or STS call behind a role).
const AWSDefaultCredentialsTimeout = 10 * time.Second

func (c *awsChain) provider(ctx context.Context) (aws.CredentialsProvider, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.creds != nil {
		return c.creds, nil
	}
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithCredentialsCacheOptions(func(o *aws.CredentialsCacheOptions) {
			o.ExpiryWindow = awsCredentialsExpiryWindow
		}),
	}
	if c.region != "" {
		opts = append(opts, awsconfig.WithRegion(c.region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, &credentialsError{fmt.Errorf("AWS_MSK_IAM: loading the AWS default credential chain: %w", err)}
	}
	if cfg.Credentials == nil {
		return nil, &credentialsError{errors.New("AWS_MSK_IAM: the AWS default credential chain found no credentials " +
			"(set aws_access_key_id and aws_secret_access_key, or give the process an AWS identity)")}
	}
	c.creds = cfg.Credentials
	if _, cached := c.creds.(*aws.CredentialsCache); !cached {
		c.creds = aws.NewCredentialsCache(c.creds, func(o *aws.CredentialsCacheOptions) {
			o.ExpiryWindow = awsCredentialsExpiryWindow
		})
	}
	return c.creds, nil
}

// auth is the mechanism's credentials callback.
func (c *awsChain) auth(ctx context.Context) (saslaws.Auth, error) {
	ctx, cancel := context.WithTimeout(ctx, AWSDefaultCredentialsTimeout)
	defer cancel()
	p, err := c.provider(ctx)
	if err != nil {
		return saslaws.Auth{}, err
	}
	creds, err := p.Retrieve(ctx)
	if err != nil {
		return saslaws.Auth{}, &credentialsError{fmt.Errorf("AWS_MSK_IAM: no credentials from the AWS default credential chain: %w", err)}
	}
	return saslaws.Auth{AccessKey: creds.AccessKeyID, SecretKey: creds.SecretAccessKey, SessionToken: creds.SessionToken,
		UserAgent: userAgent}, nil
}

// ResolveAWSCredentials resolves a's credentials as an authentication
// would, for the preflight: the access key id found and where from.
func ResolveAWSCredentials(ctx context.Context, a AWSAuth) (accessKeyID, source string, err error) {
	if err := CheckAWS(a); err != nil {
		return "", "", err
	}
	if !a.UsesDefaultChain() {
		return a.AccessKeyID, "static keys", nil
	}
	ctx, cancel := context.WithTimeout(ctx, AWSDefaultCredentialsTimeout)
	defer cancel()
	p, err := sharedAWSChain(a.Region).provider(ctx)
	if err != nil {
		return "", "", err
	}
	creds, err := p.Retrieve(ctx)
	if err != nil {
		return "", "", &credentialsError{fmt.Errorf("AWS_MSK_IAM: no credentials from the AWS default credential chain: %w", err)}
	}
	return creds.AccessKeyID, "default chain (" + creds.Source + ")", nil
}
