package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/kafka/schemaregistry"
	"kmirror/internal/runtime/secretbox"
	"kmirror/repo"
)

// Source secrets (sasl_password, tls_key_pem, aws_secret_access_key,
// aws_session_token, sasl_oauthbearer_client_secret, and the source Schema
// Registry's basic_auth_password, bearer_token and tls_key_pem) are sealed with the
// service's keys before they are stored, bound to their mirror and field,
// and opened only to connect to the source or to re-validate a patched
// source.

// secretField is one write-only source field: its name (the API's, the
// sealing's associated data and the missing credential's), and where it
// lives in a row and in a row's stored secrets.
type secretField struct {
	name   string
	source func(*repo.Source) *string
	stored func(*repo.MirrorSecrets) *string
}

// secretFields are every source secret, by name (the order errors list
// them in).
var secretFields = []secretField{
	{CredentialAWSSecretAccessKey, func(s *repo.Source) *string { return &s.AWSSecretAccessKey },
		func(m *repo.MirrorSecrets) *string { return &m.AWSSecretAccessKey }},
	{CredentialAWSSessionToken, func(s *repo.Source) *string { return &s.AWSSessionToken },
		func(m *repo.MirrorSecrets) *string { return &m.AWSSessionToken }},
	{CredentialOAuthClientSecret, func(s *repo.Source) *string { return &s.OAuthClientSecret },
		func(m *repo.MirrorSecrets) *string { return &m.OAuthClientSecret }},
	{CredentialSchemaRegistryPassword, func(s *repo.Source) *string { return &s.SchemaRegistryPassword },
		func(m *repo.MirrorSecrets) *string { return &m.SchemaRegistryPassword }},
	{CredentialSchemaRegistryBearerToken, func(s *repo.Source) *string { return &s.SchemaRegistryBearerToken },
		func(m *repo.MirrorSecrets) *string { return &m.SchemaRegistryBearerToken }},
	{CredentialSchemaRegistryTLSKey, func(s *repo.Source) *string { return &s.SchemaRegistryTLSKeyPEM },
		func(m *repo.MirrorSecrets) *string { return &m.SchemaRegistryTLSKeyPEM }},
	{CredentialSASLPassword, func(s *repo.Source) *string { return &s.SASLPassword },
		func(m *repo.MirrorSecrets) *string { return &m.SASLPassword }},
	{CredentialTLSKey, func(s *repo.Source) *string { return &s.TLSKeyPEM },
		func(m *repo.MirrorSecrets) *string { return &m.TLSKeyPEM }},
}

// SecretKeys supplies the keys that seal and open the stored secrets: a
// fixed *secretbox.Keyring, or a *secretbox.KeyFile that follows its file
// so a rotation needs no restart. Keys may return nil: no key.
type SecretKeys interface {
	Keys() *secretbox.Keyring
}

// secretAAD binds a sealed secret to its mirror and field.
func secretAAD(mirror, field string) string { return "kmirror/mirror/" + mirror + "/" + field }

// ErrSecretKey is a stored secret that cannot be opened: it is sealed and
// the server has no key, or not the key that sealed it.
var ErrSecretKey = errors.New("secret key")

// ErrSecretKeyUnavailable is the ErrSecretKey of a secret sealed under a key
// this server has not loaded: between `kmirror secrets rotate` and the
// servers reading the new key file, say. It passes once the key is loaded,
// so callers may try again.
var ErrSecretKeyUnavailable = fmt.Errorf("%w unavailable", ErrSecretKey)

// ErrSecretKeyRequired refuses a source secret on a server that has no key
// and was not told to store secrets in clear: nothing is written.
var ErrSecretKeyRequired = errors.New("secret key required")

// secretKeyHelp says how to give a server a key, for errors and logs.
const secretKeyHelp = "create a key with `kmirror secrets new-key > FILE` (chmod 600) and start every server " +
	"with KMIRROR_SECRET_KEY_FILE=FILE (--secret-key-file)"

func (s *core) keys() *secretbox.Keyring {
	if s.secrets == nil {
		return nil
	}
	return s.secrets.Keys()
}

// requireKey refuses secrets a server could only store in clear.
func (s *core) requireKey(src repo.Source) error {
	if s.insecureClear || s.keys() != nil {
		return nil
	}
	var set []string
	for _, f := range secretFields {
		if *f.source(&src) != "" {
			set = append(set, "source."+f.name)
		}
	}
	if len(set) == 0 {
		return nil
	}
	return fmt.Errorf("%w: this server has no secret key, and does not store %s in clear: %s, then send the request again "+
		"(or start the servers with --insecure-store-secrets-in-clear to store secrets as given)",
		ErrSecretKeyRequired, strings.Join(set, " and "), secretKeyHelp)
}

// requirePatchKey is requireKey for a patch. Only the secrets it sets
// count: a mirror whose secrets were stored in clear before keys were
// required stays patchable, or it could not be fixed.
func (s *core) requirePatchKey(p *SourcePatch) error {
	if p == nil {
		return nil
	}
	var src repo.Source
	for f, v := range map[*string]*string{&src.SASLPassword: p.SASLPassword, &src.TLSKeyPEM: p.TLSKeyPEM,
		&src.AWSSecretAccessKey: p.AWSSecretAccessKey, &src.AWSSessionToken: p.AWSSessionToken,
		&src.OAuthClientSecret: p.OAuthClientSecret} {
		if v != nil {
			*f = *v
		}
	}
	if r := p.SchemaRegistry; r != nil {
		for f, v := range map[*string]*string{&src.SchemaRegistryPassword: r.BasicAuthPassword,
			&src.SchemaRegistryBearerToken: r.BearerToken, &src.SchemaRegistryTLSKeyPEM: r.TLSKeyPEM} {
			if v != nil {
				*f = *v
			}
		}
	}
	return s.requireKey(src)
}

func (s *core) seal(mirror, field, v string) (string, error) {
	k := s.keys()
	if k == nil || secretbox.Sealed(v) {
		return v, nil
	}
	return k.Seal(v, secretAAD(mirror, field))
}

func (s *core) open(mirror, field, v string) (string, error) {
	if !secretbox.Sealed(v) {
		return v, nil
	}
	k := s.keys()
	if k == nil {
		return "", fmt.Errorf("%w: the %s of mirror %s is encrypted and this server has no key: set KMIRROR_SECRET_KEY_FILE to the key it was stored with",
			ErrSecretKeyUnavailable, field, mirror)
	}
	plain, err := k.Open(v, secretAAD(mirror, field))
	if errors.Is(err, secretbox.ErrKeyNotHeld) {
		return "", fmt.Errorf("%w: the %s of mirror %s: %w; after kmirror secrets rotate, write the new key into "+
			"KMIRROR_SECRET_KEY_FILE: servers read it again within seconds, or at once on SIGHUP",
			ErrSecretKeyUnavailable, field, mirror, err)
	}
	if err != nil {
		return "", fmt.Errorf("%w: the %s of mirror %s: %w (is KMIRROR_SECRET_KEY_FILE the key it was stored with?)",
			ErrSecretKey, field, mirror, err)
	}
	return plain, nil
}

// sealSecrets returns m with its secrets sealed, for storing.
func (s *core) sealSecrets(m repo.Mirror) (repo.Mirror, error) {
	for _, f := range secretFields {
		v := f.source(&m.Source)
		var err error
		if *v, err = s.seal(m.Name, f.name, *v); err != nil {
			return m, err
		}
	}
	return m, nil
}

// openSecrets returns m with its secrets in clear.
func (s *core) openSecrets(m repo.Mirror) (repo.Mirror, error) {
	for _, f := range secretFields {
		v := f.source(&m.Source)
		var err error
		if *v, err = s.open(m.Name, f.name, *v); err != nil {
			return m, err
		}
	}
	return m, nil
}

// SourceConn returns the client configuration for a stored mirror's source
// cluster, its secrets opened.
func (s *Workers) SourceConn(m repo.Mirror) (kafkaconn.Config, error) {
	return s.sourceConn(m)
}

// SourceRegistry returns the stored mirror's source Schema Registry with its secrets opened; ok is false when the mirror names none.
func (s *Workers) SourceRegistry(m repo.Mirror) (cfg schemaregistry.Config, ok bool, err error) {
	return s.sourceRegistry(m)
}

// sourceRegistry is SourceRegistry for both faces: the sync's, and the
// preflight's of CheckMirror.
func (s *core) sourceRegistry(m repo.Mirror) (cfg schemaregistry.Config, ok bool, err error) {
	if len(m.SchemaRegistryURLs) == 0 {
		return schemaregistry.Config{}, false, nil
	}
	m, err = s.openSecrets(m)
	if err != nil {
		return schemaregistry.Config{}, false, err
	}
	return RegistryOf(m.Source), true, nil
}

func (s *core) sourceConn(m repo.Mirror) (kafkaconn.Config, error) {
	m, err := s.openSecrets(m)
	if err != nil {
		return kafkaconn.Config{}, err
	}
	return ConnOf(m), nil
}

// CheckSecrets opens every stored secret, so a server started without the
// key, or with another one, fails at once and says which mirror needs it,
// rather than failing each mirror's connections later. It returns the
// mirrors that hold a secret in clear (stored before a key was set), by
// name.
func (s *Control) CheckSecrets(ctx context.Context) (clear []string, err error) {
	list, err := repo.MirrorsListSecrets(ctx, s.pool, false)
	if err != nil {
		return nil, err
	}
	for _, m := range list {
		inClear := false
		for _, f := range secretFields {
			v := *f.stored(&m)
			if v == "" {
				continue
			}
			if !secretbox.Sealed(v) {
				inClear = true
				continue
			}
			if _, err := s.open(m.Name, f.name, v); err != nil {
				return clear, err
			}
		}
		if inClear {
			clear = append(clear, m.Name)
		}
	}
	slices.Sort(clear)
	return clear, nil
}

// RotateSecrets re-encrypts every stored secret under next's sealing key,
// in one transaction: the service's own keys open them (secrets stored in
// clear are sealed too), and a failure changes nothing. It returns how many
// secrets it wrote.
func (s *Control) RotateSecrets(ctx context.Context, next *secretbox.Keyring) (int, error) {
	if next == nil {
		return 0, errors.New("rotate: no new key")
	}
	to := &core{secrets: next}
	n := 0
	err := repo.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		n = 0
		list, err := repo.MirrorsListSecrets(ctx, tx, true)
		if err != nil {
			return err
		}
		for _, m := range list {
			out := repo.MirrorSecrets{Name: m.Name}
			for _, f := range secretFields {
				in := *f.stored(&m)
				if in == "" {
					continue
				}
				plain, err := s.open(m.Name, f.name, in)
				if err != nil {
					return err
				}
				if *f.stored(&out), err = to.seal(m.Name, f.name, plain); err != nil {
					return err
				}
				n++
			}
			if err := repo.MirrorsSetSecrets(ctx, tx, out); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}
