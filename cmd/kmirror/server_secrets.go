package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"kmirror/internal/runtime/secretbox"
	"kmirror/service"
)

// openSecretKeys returns the keys that seal the stored source secrets:
// cfg.SecretKeyFile's, read now (a bad file fails the start) and again on
// SIGHUP and whenever it changes, until stop; else cfg.Secrets, which may
// be nil (no key).
func openSecretKeys(ctx context.Context, cfg serverConfig, log *slog.Logger) (keys service.SecretKeys, stop func(), err error) {
	if cfg.SecretKeyFile == "" {
		return cfg.Secrets, func() {}, nil
	}
	f, err := secretbox.OpenKeyFile(cfg.SecretKeyFile, log)
	if err != nil {
		return nil, nil, fmt.Errorf("--secret-key-file: %w", err)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Watch(ctx, 0, hup)
	}()
	log.Info("secret key loaded", "file", f.Path(), "seals_with", f.Keys().ID(), "opens", strings.Join(f.Keys().IDs(), ","))
	return f, func() {
		signal.Stop(hup)
		cancel()
		<-done
	}, nil
}

// checkStoredSecrets opens every stored secret, so a server without the key
// that sealed them fails now, naming the mirror, rather than each of those
// mirrors failing to connect later; and it says, at every start, what a
// server without a key does.
func checkStoredSecrets(ctx context.Context, cfg serverConfig, svc *service.Control, keys service.SecretKeys, log *slog.Logger) error {
	clear, err := svc.CheckSecrets(ctx)
	if err != nil {
		return fmt.Errorf("stored source secrets: %w", err)
	}
	var k *secretbox.Keyring
	if keys != nil {
		k = keys.Keys()
	}
	const fix = "create a key with `kmirror secrets new-key > FILE`, encrypt what is stored with " +
		"`kmirror secrets rotate --new-key-file FILE`, and restart with KMIRROR_SECRET_KEY_FILE=FILE"
	switch {
	case k == nil && cfg.InsecureClearSecrets:
		log.Warn("--insecure-store-secrets-in-clear: source SASL passwords and TLS keys are stored in the database as given, "+
			"readable by anyone who can read the database or its backups; "+fix, "mirrors_in_clear", clear)
	case k == nil && len(clear) > 0:
		// An upgrade from a version that stored secrets in clear by default.
		// Refusing to start would stop the mirroring of a DR tool over a
		// version change while protecting nothing: the secrets are in the
		// database whether or not it runs. So it starts, keeps mirroring,
		// refuses new secrets, and says so at every start until fixed.
		log.Error(fmt.Sprintf("%d mirror(s) hold source secrets in clear in the database (%s), stored before a key was "+
			"required; they keep running, and new secrets are refused until a key is set: %s",
			len(clear), strings.Join(clear, ", "), fix), "mirrors_in_clear", clear)
	case k == nil:
		log.Info("no secret key (KMIRROR_SECRET_KEY_FILE): requests that set a source SASL password or TLS key are " +
			"refused; kmirror secrets new-key writes a key")
	case len(clear) > 0:
		log.Warn(fmt.Sprintf("%d mirror(s) hold source secrets stored in clear before a key was set (%s): "+
			"kmirror secrets rotate --new-key-file with this key encrypts them", len(clear), strings.Join(clear, ", ")),
			"mirrors_in_clear", clear)
	}
	return nil
}
