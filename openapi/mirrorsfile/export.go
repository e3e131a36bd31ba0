package mirrorsfile

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"kmirror/openapi/client"
)

// ExportOpts are Export's.
type ExportOpts struct {
	// Mirror, when set, exports only that mirror.
	Mirror string
}

// Export reads the deployment's mirrors and topics into a File that
// applies as a no-op: each topic by its exact name with its state. The API
// never returns secrets, so each one the server has is a placeholder,
// {env: KMIRROR_<MIRROR>_<FIELD>}, for the reader to provide.
func Export(ctx context.Context, api API, opts ExportOpts) (*File, error) {
	var mirrors []client.Mirror
	if opts.Mirror != "" {
		resp, err := call(ctx, "GET /v1/mirrors/"+opts.Mirror, func() (*client.GetMirrorResponse, error) {
			return api.GetMirrorWithResponse(ctx, opts.Mirror)
		}, http.StatusOK)
		if err != nil {
			return nil, err
		}
		if resp.JSON200 == nil {
			return nil, fmt.Errorf("GET /v1/mirrors/%s: no mirror in the answer", opts.Mirror)
		}
		mirrors = []client.Mirror{*resp.JSON200}
	} else {
		resp, err := call(ctx, "GET /v1/mirrors", func() (*client.ListMirrorsResponse, error) {
			return api.ListMirrorsWithResponse(ctx)
		}, http.StatusOK)
		if err != nil {
			return nil, err
		}
		if resp.JSON200 == nil {
			return nil, fmt.Errorf("GET /v1/mirrors: no mirror list in the answer")
		}
		mirrors = resp.JSON200.Mirrors
	}
	slices.SortFunc(mirrors, func(a, b client.Mirror) int { return strings.Compare(a.Name, b.Name) })
	f := &File{APIVersion: APIVersion, Kind: Kind, Mirrors: []Mirror{}}
	for _, m := range mirrors {
		topics, err := listTopics(ctx, api, m.Name)
		if err != nil {
			return nil, err
		}
		f.Mirrors = append(f.Mirrors, exportMirror(m, topics))
	}
	return f, nil
}

func exportMirror(m client.Mirror, topics []client.Topic) Mirror {
	v := m.Source
	// After kmirror restore, a secret the server lacks is named in
	// missing_credentials: the file must give it all the same.
	missing := map[string]bool{}
	for _, f := range m.MissingCredentials {
		missing[strings.Replace(f, "schema_registry.", "schema_registry_", 1)] = true
	}
	placeholder := func(set bool, field string) *Secret {
		if !set && !missing[field] {
			return nil
		}
		return &Secret{Env: SecretVar(m.Name, field)}
	}
	text := func(s *string) *Text {
		if deref(s) == "" {
			return nil
		}
		return &Text{Value: *s}
	}
	src := Source{BootstrapServers: v.BootstrapServers, SecurityProtocol: string(v.SecurityProtocol),
		SASLMechanism: string(deref(v.SaslMechanism)), SASLUsername: deref(v.SaslUsername),
		SASLPassword: placeholder(v.SaslPasswordSet, "sasl_password"),
		TLSCAPEM:     text(v.TlsCaPem), TLSCertPEM: text(v.TlsCertPem),
		TLSKeyPEM:     placeholder(v.TlsKeySet, "tls_key_pem"),
		TLSServerName: deref(v.TlsServerName), AWSAccessKeyID: deref(v.AwsAccessKeyId),
		AWSSecretAccessKey:    placeholder(v.AwsSecretAccessKeySet, "aws_secret_access_key"),
		AWSSessionToken:       placeholder(v.AwsSessionTokenSet, "aws_session_token"),
		AWSRegion:             deref(v.AwsRegion),
		OAuthTokenEndpointURL: deref(v.SaslOauthbearerTokenEndpointUrl), OAuthClientID: deref(v.SaslOauthbearerClientId),
		OAuthClientSecret: placeholder(v.SaslOauthbearerClientSecretSet, "sasl_oauthbearer_client_secret"),
		OAuthScope:        deref(v.SaslOauthbearerScope), OAuthExtensions: maps.Clone(deref(v.SaslOauthbearerExtensions)),
	}
	if r := v.SchemaRegistry; r != nil {
		src.SchemaRegistry = &SchemaRegistry{URLs: slices.Clone(r.Urls), BasicAuthUsername: deref(r.BasicAuthUsername),
			BasicAuthPassword: placeholder(r.BasicAuthPasswordSet, "schema_registry_basic_auth_password"),
			BearerToken:       placeholder(r.BearerTokenSet, "schema_registry_bearer_token"),
			TLSCAPEM:          text(r.TlsCaPem), TLSCertPEM: text(r.TlsCertPem),
			TLSKeyPEM:     placeholder(r.TlsKeyPemSet, "schema_registry_tls_key_pem"),
			TLSServerName: deref(r.TlsServerName)}
	}
	out := Mirror{Name: m.Name, Source: src}
	if len(m.Config) > 0 {
		out.Config = maps.Clone(m.Config)
	}
	slices.SortFunc(topics, func(a, b client.Topic) int { return strings.Compare(a.Topic, b.Topic) })
	for _, t := range topics {
		e := Topic{Topic: regexp.QuoteMeta(t.Topic), State: State(t.DesiredState)}
		if t.ReplicationFactor > 0 {
			e.ReplicationFactor = t.ReplicationFactor
		}
		out.Topics = append(out.Topics, e)
	}
	return out
}

// SecretVar is the environment variable an exported file reads a secret
// from: KMIRROR_<MIRROR>_<FIELD>, upper case, anything but letters and
// digits an underscore.
func SecretVar(mirror, field string) string {
	up := strings.ToUpper("KMIRROR_" + mirror + "_" + field)
	return strings.Map(func(r rune) rune {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, up)
}

// Marshal writes the file as YAML, with a comment on each secret
// placeholder saying what to set.
func (f *File) Marshal() ([]byte, error) {
	var doc yaml.Node
	if err := doc.Encode(f); err != nil {
		return nil, err
	}
	doc.HeadComment = "kmirror mirrors file: apply with `kmirror apply -f FILE` (docs/mirrors-as-code.md)."
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if mirrors := mapValue(root, "mirrors"); mirrors != nil {
		for _, m := range mirrors.Content {
			src := mapValue(m, "source")
			commentSecrets(src, sourceSecrets)
			commentSecrets(mapValue(src, "schema_registry"), registrySecrets)
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func commentSecrets(m *yaml.Node, fields []string) {
	if m == nil || m.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if slices.Contains(fields, k.Value) {
			if env := mapValue(v, "env"); env != nil {
				v.Style = yaml.FlowStyle
				k.HeadComment = fmt.Sprintf("The server has this secret and never returns it: set %s (or point at a {file: PATH}).", env.Value)
			}
		}
	}
}
