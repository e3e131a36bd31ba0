package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"kmirror/internal/kafkaconn"
	"kmirror/internal/secretbox"
	"kmirror/repo"
)

// Source secrets (sasl_password, tls_key_pem) are sealed with the service's
// secretbox before they are stored, bound to their mirror and field, and
// opened only to connect to the source or to re-validate a patched source.

// secretAAD binds a sealed secret to its mirror and field.
func secretAAD(mirror, field string) string { return "kmirror/mirror/" + mirror + "/" + field }

// ErrSecretKey is a stored secret that cannot be opened: it is sealed and
// the server has no key, or not the key that sealed it.
var ErrSecretKey = errors.New("secret key")

func (s *Service) seal(mirror, field, v string) (string, error) {
	if s.secrets == nil || secretbox.Sealed(v) {
		return v, nil
	}
	return s.secrets.Seal(v, secretAAD(mirror, field))
}

func (s *Service) open(mirror, field, v string) (string, error) {
	if !secretbox.Sealed(v) {
		return v, nil
	}
	if s.secrets == nil {
		return "", fmt.Errorf("%w: the %s of mirror %s is encrypted and this server has no key: set KMIRROR_SECRET_KEY_FILE",
			ErrSecretKey, field, mirror)
	}
	plain, err := s.secrets.Open(v, secretAAD(mirror, field))
	if err != nil {
		return "", fmt.Errorf("%w: the %s of mirror %s: %w (is KMIRROR_SECRET_KEY_FILE the key it was stored with?)",
			ErrSecretKey, field, mirror, err)
	}
	return plain, nil
}

// sealSecrets returns m with its secrets sealed, for storing.
func (s *Service) sealSecrets(m repo.Mirror) (repo.Mirror, error) {
	var err error
	if m.SASLPassword, err = s.seal(m.Name, "sasl_password", m.SASLPassword); err != nil {
		return m, err
	}
	m.TLSKeyPEM, err = s.seal(m.Name, "tls_key_pem", m.TLSKeyPEM)
	return m, err
}

// openSecrets returns m with its secrets in clear.
func (s *Service) openSecrets(m repo.Mirror) (repo.Mirror, error) {
	var err error
	if m.SASLPassword, err = s.open(m.Name, "sasl_password", m.SASLPassword); err != nil {
		return m, err
	}
	m.TLSKeyPEM, err = s.open(m.Name, "tls_key_pem", m.TLSKeyPEM)
	return m, err
}

// SourceConn returns the client configuration for a stored mirror's source
// cluster, its secrets opened.
func (s *Service) SourceConn(m repo.Mirror) (kafkaconn.Config, error) {
	m, err := s.openSecrets(m)
	if err != nil {
		return kafkaconn.Config{}, err
	}
	return ConnOf(m), nil
}

// CheckSecrets opens every stored secret, so a server started without the
// key, or with another one, fails at once and says which mirror needs it,
// rather than failing each mirror's connections later. It reports how many
// secrets are stored in clear (written before a key was set).
func (s *Service) CheckSecrets(ctx context.Context) (clear int, err error) {
	list, err := repo.MirrorsListSecrets(ctx, s.pool, false)
	if err != nil {
		return 0, err
	}
	for _, m := range list {
		for field, v := range map[string]string{"sasl_password": m.SASLPassword, "tls_key_pem": m.TLSKeyPEM} {
			if v == "" {
				continue
			}
			if !secretbox.Sealed(v) {
				clear++
				continue
			}
			if _, err := s.open(m.Name, field, v); err != nil {
				return clear, err
			}
		}
	}
	return clear, nil
}

// RotateSecrets re-encrypts every stored secret under next, in one
// transaction: the service's own key opens them (secrets stored in clear
// are sealed too), and a failure changes nothing. It returns how many
// secrets it wrote.
func (s *Service) RotateSecrets(ctx context.Context, next *secretbox.Box) (int, error) {
	if next == nil {
		return 0, errors.New("rotate: no new key")
	}
	to := &Service{secrets: next}
	n := 0
	err := repo.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		n = 0
		list, err := repo.MirrorsListSecrets(ctx, tx, true)
		if err != nil {
			return err
		}
		for _, m := range list {
			out := repo.MirrorSecrets{Name: m.Name}
			for _, f := range []struct {
				name    string
				in, out *string
			}{{"sasl_password", &m.SASLPassword, &out.SASLPassword}, {"tls_key_pem", &m.TLSKeyPEM, &out.TLSKeyPEM}} {
				if *f.in == "" {
					continue
				}
				plain, err := s.open(m.Name, f.name, *f.in)
				if err != nil {
					return err
				}
				if *f.out, err = to.seal(m.Name, f.name, plain); err != nil {
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
