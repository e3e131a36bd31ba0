package mirrorsfile

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"kmirror/openapi/client"
)

// secretField is one write-only field: where the file says to read it,
// whether the server has it, and where it goes in a create and a patch.
type secretField struct {
	name   string // its path under source: "sasl_password", "schema_registry.bearer_token"
	secret *Secret
	set    bool // the server has it
	spec   **string
	patch  **string
}

// textField is one non-secret field compared with the server's value.
type textField struct {
	name      string
	file, cur string
	spec      **string
	patch     **string
}

// fields lists the source's fields for a create (spec) and a patch, with
// the server's view (view may be the zero value for a create).
func (s *Source) fields(dir string, view client.SourceView, spec *client.SourceSpec, patch *client.SourcePatch) ([]textField, []secretField, error) {
	var errs []error
	text := func(t *Text, field string) string {
		if t == nil {
			return ""
		}
		v, err := t.resolve(dir, field)
		if err != nil {
			errs = append(errs, err)
		}
		return v
	}
	texts := []textField{
		{"security_protocol", cmpProtocol(s.SecurityProtocol), cmpProtocol(string(view.SecurityProtocol)), nil, nil},
		{"sasl_mechanism", strings.ToUpper(s.SASLMechanism), string(deref(view.SaslMechanism)), nil, nil},
		{"sasl_username", s.SASLUsername, deref(view.SaslUsername), &spec.SaslUsername, &patch.SaslUsername},
		{"tls_ca_pem", text(s.TLSCAPEM, "tls_ca_pem"), deref(view.TlsCaPem), &spec.TlsCaPem, &patch.TlsCaPem},
		{"tls_cert_pem", text(s.TLSCertPEM, "tls_cert_pem"), deref(view.TlsCertPem), &spec.TlsCertPem, &patch.TlsCertPem},
		{"tls_server_name", s.TLSServerName, deref(view.TlsServerName), &spec.TlsServerName, &patch.TlsServerName},
		{"aws_access_key_id", s.AWSAccessKeyID, deref(view.AwsAccessKeyId), &spec.AwsAccessKeyId, &patch.AwsAccessKeyId},
		{"aws_region", s.AWSRegion, deref(view.AwsRegion), &spec.AwsRegion, &patch.AwsRegion},
		{"sasl_oauthbearer_token_endpoint_url", s.OAuthTokenEndpointURL, deref(view.SaslOauthbearerTokenEndpointUrl),
			&spec.SaslOauthbearerTokenEndpointUrl, &patch.SaslOauthbearerTokenEndpointUrl},
		{"sasl_oauthbearer_client_id", s.OAuthClientID, deref(view.SaslOauthbearerClientId), &spec.SaslOauthbearerClientId, &patch.SaslOauthbearerClientId},
		{"sasl_oauthbearer_scope", s.OAuthScope, deref(view.SaslOauthbearerScope), &spec.SaslOauthbearerScope, &patch.SaslOauthbearerScope},
	}
	secrets := []secretField{
		{"sasl_password", s.SASLPassword, view.SaslPasswordSet, &spec.SaslPassword, &patch.SaslPassword},
		{"tls_key_pem", s.TLSKeyPEM, view.TlsKeySet, &spec.TlsKeyPem, &patch.TlsKeyPem},
		{"aws_secret_access_key", s.AWSSecretAccessKey, view.AwsSecretAccessKeySet, &spec.AwsSecretAccessKey, &patch.AwsSecretAccessKey},
		{"aws_session_token", s.AWSSessionToken, view.AwsSessionTokenSet, &spec.AwsSessionToken, &patch.AwsSessionToken},
		{"sasl_oauthbearer_client_secret", s.OAuthClientSecret, view.SaslOauthbearerClientSecretSet, &spec.SaslOauthbearerClientSecret, &patch.SaslOauthbearerClientSecret},
	}
	return texts, secrets, joinErrs(errs)
}

// cmpProtocol is a security protocol as the server reports it.
func cmpProtocol(p string) string {
	if p == "" {
		return "PLAINTEXT"
	}
	return strings.ToUpper(p)
}

// spec is the create request's source, its secrets read.
func (s *Source) spec(dir string) (client.SourceSpec, error) {
	spec := client.SourceSpec{BootstrapServers: s.BootstrapServers,
		SecurityProtocol: ptrOrNil(client.SecurityProtocol(strings.ToUpper(s.SecurityProtocol))),
		SaslMechanism:    ptrOrNil(client.SASLMechanism(strings.ToUpper(s.SASLMechanism)))}
	if len(s.OAuthExtensions) > 0 {
		spec.SaslOauthbearerExtensions = ptr(maps.Clone(s.OAuthExtensions))
	}
	texts, secrets, err := s.fields(dir, client.SourceView{}, &spec, &client.SourcePatch{})
	if err != nil {
		return spec, err
	}
	for _, t := range texts {
		if t.spec != nil {
			*t.spec = ptrOrNil(t.file)
		}
	}
	var errs []error
	for _, f := range secrets {
		if f.secret == nil {
			continue
		}
		v, err := f.secret.resolve(dir, "source."+f.name)
		errs = append(errs, err)
		*f.spec = &v
	}
	if r := s.SchemaRegistry; r != nil {
		reg, err := r.spec(dir)
		errs = append(errs, err)
		spec.SchemaRegistry = &reg
	}
	return spec, joinErrs(errs)
}

// summary describes a new mirror for a plan, secrets by where they come
// from.
func (s *Source) summary(config map[string]string) []Change {
	out := []Change{{Field: "bootstrap_servers", To: s.BootstrapServers}, {Field: "security_protocol", To: cmpProtocol(s.SecurityProtocol)}}
	if s.SASLMechanism != "" {
		out = append(out, Change{Field: "sasl_mechanism", To: strings.ToUpper(s.SASLMechanism)})
	}
	for _, f := range []struct {
		name string
		s    *Secret
	}{{"sasl_password", s.SASLPassword}, {"tls_key_pem", s.TLSKeyPEM}, {"aws_secret_access_key", s.AWSSecretAccessKey},
		{"aws_session_token", s.AWSSessionToken}, {"sasl_oauthbearer_client_secret", s.OAuthClientSecret}} {
		if f.s != nil {
			out = append(out, Change{Field: f.name, To: "from " + f.s.String(), Secret: true})
		}
	}
	if r := s.SchemaRegistry; r != nil {
		out = append(out, Change{Field: "schema_registry.urls", To: strings.Join(r.URLs, ",")})
	}
	for _, k := range sortedKeys(config) {
		out = append(out, Change{Field: "config " + k, To: config[k]})
	}
	return out
}

// diffSource compares the file's source with the server's and returns
// the patch (nil when nothing differs) and the changes it makes.
func diffSource(dir string, m *Mirror, cur client.Mirror, opts Opts) (*client.SourcePatch, []Change, error) {
	s := &m.Source
	view := cur.Source
	for _, missing := range cur.MissingCredentials {
		// After kmirror restore the server names the secrets it lacks.
		switch missing {
		case "sasl_password":
			view.SaslPasswordSet = false
		case "tls_key_pem":
			view.TlsKeySet = false
		case "aws_secret_access_key":
			view.AwsSecretAccessKeySet = false
		case "aws_session_token":
			view.AwsSessionTokenSet = false
		case "sasl_oauthbearer_client_secret":
			view.SaslOauthbearerClientSecretSet = false
		}
	}
	var spec client.SourceSpec
	patch := &client.SourcePatch{}
	texts, secrets, err := s.fields(dir, view, &spec, patch)
	if err != nil {
		return nil, nil, err
	}
	var changes []Change
	if s.BootstrapServers != view.BootstrapServers {
		patch.BootstrapServers = ptr(s.BootstrapServers)
		changes = append(changes, Change{Field: "bootstrap_servers", From: view.BootstrapServers, To: s.BootstrapServers})
	}
	for _, t := range texts {
		if t.file == t.cur {
			continue
		}
		switch t.name {
		case "security_protocol":
			patch.SecurityProtocol = ptr(client.SecurityProtocol(t.file))
		case "sasl_mechanism":
			patch.SaslMechanism = ptr(client.SASLMechanism(t.file))
		default:
			*t.patch = ptr(t.file)
		}
		changes = append(changes, Change{Field: t.name, From: shorten(t.cur), To: shorten(t.file)})
	}
	if ext := s.OAuthExtensions; !maps.Equal(ext, deref(view.SaslOauthbearerExtensions)) {
		patch.SaslOauthbearerExtensions = ptr(maps.Clone(ext))
		if ext == nil {
			patch.SaslOauthbearerExtensions = ptr(map[string]string{})
		}
		changes = append(changes, Change{Field: "sasl_oauthbearer_extensions", From: fmt.Sprint(deref(view.SaslOauthbearerExtensions)), To: fmt.Sprint(ext)})
	}
	regPatch, regChanges, regSecrets, err := diffRegistry(dir, s.SchemaRegistry, view.SchemaRegistry, cur.MissingCredentials)
	if err != nil {
		return nil, nil, err
	}
	if regPatch != nil {
		patch.SchemaRegistry = regPatch
	}
	changes = append(changes, regChanges...)
	// Secrets cannot be compared: one is sent when the server lacks it, or
	// cleared when the file has none; otherwise only with another change
	// to the source (a new user or broker usually comes with its
	// password) or when asked to.
	sourceChanged := len(changes) > 0
	all := append(secrets, regSecrets...)
	var errs []error
	for _, f := range all {
		var why string
		switch {
		case f.secret == nil && f.set:
			*f.patch = ptr("")
			changes = append(changes, Change{Field: f.name, From: "set", To: "(cleared: not in the file)", Secret: true})
			continue
		case f.secret == nil:
			continue
		case !f.set:
			why = "not set on the server"
		case opts.UpdateSecrets:
			why = "--update-secrets"
		case sourceChanged:
			why = "sent with the source's other changes"
		default:
			continue
		}
		v, err := f.secret.resolve(dir, "source."+f.name)
		errs = append(errs, err)
		*f.patch = &v
		changes = append(changes, Change{Field: f.name, From: setOrNot(f.set), To: "from " + f.secret.String(), Secret: true, Why: why})
	}
	if err := joinErrs(errs); err != nil {
		return nil, nil, err
	}
	if len(changes) == 0 {
		return nil, nil, nil
	}
	if patch.SchemaRegistry != nil && *patch.SchemaRegistry == (client.SchemaRegistryPatch{}) {
		patch.SchemaRegistry = nil
	}
	return patch, changes, nil
}

func setOrNot(set bool) string {
	if set {
		return "set"
	}
	return "not set"
}

// shorten keeps a PEM readable in a plan.
func shorten(v string) string {
	if v == "" {
		return `""`
	}
	if strings.Contains(v, "\n") {
		return fmt.Sprintf("(%d bytes of PEM)", len(v))
	}
	return v
}

func (r *SchemaRegistry) spec(dir string) (client.SchemaRegistrySpec, error) {
	spec := client.SchemaRegistrySpec{Urls: slices.Clone(r.URLs), BasicAuthUsername: ptrOrNil(r.BasicAuthUsername),
		TlsServerName: ptrOrNil(r.TLSServerName)}
	var errs []error
	for _, t := range []struct {
		t     *Text
		name  string
		field **string
	}{{r.TLSCAPEM, "tls_ca_pem", &spec.TlsCaPem}, {r.TLSCertPEM, "tls_cert_pem", &spec.TlsCertPem}} {
		if t.t != nil {
			v, err := t.t.resolve(dir, "source.schema_registry."+t.name)
			errs = append(errs, err)
			*t.field = ptrOrNil(v)
		}
	}
	for _, s := range []struct {
		s     *Secret
		name  string
		field **string
	}{{r.BasicAuthPassword, "basic_auth_password", &spec.BasicAuthPassword}, {r.BearerToken, "bearer_token", &spec.BearerToken},
		{r.TLSKeyPEM, "tls_key_pem", &spec.TlsKeyPem}} {
		if s.s != nil {
			v, err := s.s.resolve(dir, "source.schema_registry."+s.name)
			errs = append(errs, err)
			*s.field = &v
		}
	}
	return spec, joinErrs(errs)
}

// diffRegistry compares the file's Schema Registry with the server's.
func diffRegistry(dir string, r *SchemaRegistry, view *client.SchemaRegistryView, missing []string) (*client.SchemaRegistryPatch, []Change, []secretField, error) {
	if r == nil && view == nil {
		return nil, nil, nil, nil
	}
	patch := &client.SchemaRegistryPatch{}
	if r == nil {
		patch.Urls = ptr([]string{})
		return patch, []Change{{Field: "schema_registry", From: strings.Join(view.Urls, ","), To: "(none)"}}, nil, nil
	}
	var v client.SchemaRegistryView
	if view != nil {
		v = *view
	}
	for _, m := range missing {
		switch m {
		case "schema_registry.basic_auth_password":
			v.BasicAuthPasswordSet = false
		case "schema_registry.bearer_token":
			v.BearerTokenSet = false
		case "schema_registry.tls_key_pem":
			v.TlsKeyPemSet = false
		}
	}
	var changes []Change
	var errs []error
	if !slices.Equal(r.URLs, v.Urls) {
		patch.Urls = ptr(slices.Clone(r.URLs))
		changes = append(changes, Change{Field: "schema_registry.urls", From: strings.Join(v.Urls, ","), To: strings.Join(r.URLs, ",")})
	}
	text := func(t *Text, field string) string {
		if t == nil {
			return ""
		}
		s, err := t.resolve(dir, "source.schema_registry."+field)
		errs = append(errs, err)
		return s
	}
	for _, f := range []textField{
		{"basic_auth_username", r.BasicAuthUsername, deref(v.BasicAuthUsername), nil, &patch.BasicAuthUsername},
		{"tls_ca_pem", text(r.TLSCAPEM, "tls_ca_pem"), deref(v.TlsCaPem), nil, &patch.TlsCaPem},
		{"tls_cert_pem", text(r.TLSCertPEM, "tls_cert_pem"), deref(v.TlsCertPem), nil, &patch.TlsCertPem},
		{"tls_server_name", r.TLSServerName, deref(v.TlsServerName), nil, &patch.TlsServerName},
	} {
		if f.file != f.cur {
			*f.patch = ptr(f.file)
			changes = append(changes, Change{Field: "schema_registry." + f.name, From: shorten(f.cur), To: shorten(f.file)})
		}
	}
	secrets := []secretField{
		{"schema_registry.basic_auth_password", r.BasicAuthPassword, v.BasicAuthPasswordSet, nil, &patch.BasicAuthPassword},
		{"schema_registry.bearer_token", r.BearerToken, v.BearerTokenSet, nil, &patch.BearerToken},
		{"schema_registry.tls_key_pem", r.TLSKeyPEM, v.TlsKeyPemSet, nil, &patch.TlsKeyPem},
	}
	if view == nil {
		// A new registry: the whole of it, as a create would send it.
		patch.Urls = ptr(slices.Clone(r.URLs))
	}
	return patch, changes, secrets, joinErrs(errs)
}

func joinErrs(errs []error) error {
	var out []error
	for _, e := range errs {
		if e != nil {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil
	}
	if len(out) == 1 {
		return out[0]
	}
	msgs := make([]string, len(out))
	for i, e := range out {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}
