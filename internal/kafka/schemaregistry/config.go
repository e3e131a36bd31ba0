package schemaregistry

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"kmirror/internal/kafka/kafkaconn"
)

// DefaultRequestTimeout bounds one HTTP request to a registry when Config
// leaves RequestTimeout zero: a registry that stops answering fails the
// subject being synced instead of holding the whole pass.
const DefaultRequestTimeout = 10 * time.Second

// Config is one Schema Registry's connection. The PEM fields hold PEM text,
// not file paths. Errors name the fields as the REST API will spell them
// (url, basic_auth_username, tls_ca_pem, ...), and never quote a secret.
type Config struct {
	// URLs of the registry's servers, tried in order when one cannot be
	// reached. Each needs its scheme: http:// or https://.
	URLs []string

	// Basic auth (a Confluent Cloud API key and secret, for instance), or
	// a bearer token; not both.
	Username    string
	Password    string
	BearerToken string

	TLSCAPEM      string // trusted CAs; empty means the system roots
	TLSCertPEM    string // client certificate, with TLSKeyPEM
	TLSKeyPEM     string
	TLSServerName string // empty means the URL's host
	// InsecureSkipVerify accepts any server certificate. Off unless an
	// operator turns it on by name, for a test registry.
	InsecureSkipVerify bool

	// RequestTimeout bounds each HTTP request; zero means
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
}

// NewClient validates c and returns a client for its registry. It does not
// contact the registry: the first request does.
func NewClient(c Config) (*sr.Client, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	timeout := cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	opts := []sr.ClientOpt{
		// A copy: sr.URLs rewrites the slice it is given in place.
		sr.URLs(append([]string(nil), c.URLs...)...),
		sr.HTTPClient(&http.Client{Timeout: timeout}),
		sr.UserAgent("kmirror"),
	}
	switch {
	case c.Username != "":
		opts = append(opts, sr.BasicAuth(c.Username, c.Password))
	case c.BearerToken != "":
		opts = append(opts, sr.BearerToken(c.BearerToken))
	}
	if c.usesTLS() {
		tc, err := c.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, sr.DialTLSConfig(tc))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("schema registry client: %w", err)
	}
	return cl, nil
}

// Validate checks everything that can be checked without the network, as
// NewClient does: a caller can refuse a bad Config before it needs a client.
func (c Config) Validate() error { return c.validate() }

// validate checks everything that can be checked without the network.
func (c Config) validate() error {
	if len(c.URLs) == 0 {
		return errors.New("url: required (the registry's address, for example https://registry:8081)")
	}
	anyHTTPS := false
	for i, raw := range c.URLs {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			return fmt.Errorf("url %d: %w", i+1, err)
		}
		switch u.Scheme {
		case "https":
			anyHTTPS = true
		case "http":
		default:
			return fmt.Errorf("url %d %q: want an http:// or https:// URL", i+1, raw)
		}
		if u.Host == "" {
			return fmt.Errorf("url %d %q: no host", i+1, raw)
		}
		if u.User != nil {
			// Credentials in a URL would be logged with it.
			return fmt.Errorf("url %d: holds credentials; use basic_auth_username and basic_auth_password", i+1)
		}
	}
	switch {
	case c.Username != "" && c.BearerToken != "":
		return errors.New("basic_auth_username and bearer_token: both set; a registry takes one or the other")
	case c.Password != "" && c.BearerToken != "":
		return errors.New("basic_auth_password and bearer_token: both set; a registry takes one or the other")
	case c.Username == "" && c.Password != "":
		return errors.New("basic_auth_username: required with basic_auth_password")
	case c.Username != "" && c.Password == "":
		return errors.New("basic_auth_password: required with basic_auth_username")
	case strings.ContainsAny(c.BearerToken, " \r\n"):
		return errors.New("bearer_token: holds spaces or line breaks; give the token alone, without \"Bearer \"")
	}
	if c.usesTLS() && !anyHTTPS {
		return errors.New("tls settings: set, but no url is https://")
	}
	if c.RequestTimeout < 0 {
		return fmt.Errorf("request_timeout: %s is negative", c.RequestTimeout)
	}
	if c.usesTLS() {
		// Parse the PEM now, so a bad paste is refused with the rest.
		if _, err := c.tlsConfig(); err != nil {
			return err
		}
	}
	return nil
}

func (c Config) usesTLS() bool {
	return c.TLSCAPEM != "" || c.TLSCertPEM != "" || c.TLSKeyPEM != "" || c.TLSServerName != "" || c.InsecureSkipVerify
}

// String redacts the secrets, so a Config printed by mistake leaks nothing.
func (c Config) String() string {
	return fmt.Sprintf("{urls=%s username=%s password=%s bearer_token=%s ca=%s cert=%s key=%s server_name=%s insecure_skip_verify=%t}",
		strings.Join(c.URLs, ","), c.Username, kafkaconn.Redact(c.Password), kafkaconn.Redact(c.BearerToken),
		kafkaconn.Present(c.TLSCAPEM), kafkaconn.Present(c.TLSCertPEM), kafkaconn.Redact(c.TLSKeyPEM), c.TLSServerName, c.InsecureSkipVerify)
}

// LogValue redacts like String.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("urls", strings.Join(c.URLs, ",")),
		slog.String("basic_auth_username", c.Username),
		slog.String("basic_auth_password", kafkaconn.Redact(c.Password)),
		slog.String("bearer_token", kafkaconn.Redact(c.BearerToken)),
		slog.String("tls_ca_pem", kafkaconn.Present(c.TLSCAPEM)),
		slog.String("tls_cert_pem", kafkaconn.Present(c.TLSCertPEM)),
		slog.String("tls_key_pem", kafkaconn.Redact(c.TLSKeyPEM)),
		slog.String("tls_server_name", c.TLSServerName),
		slog.Bool("tls_insecure_skip_verify", c.InsecureSkipVerify),
	)
}
