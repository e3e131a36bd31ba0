package secretbox

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// KeyFile is a server's keyring, read again from its file on demand
// (SIGHUP) and whenever the file changes, as the API's TLS pair is
// (internal/runtime/tlsreload): after `kmirror secrets rotate` a server opens the
// re-sealed secrets without a restart. What it opens is exactly what the
// file holds, so a restart never finds a secret that the running server
// could open and the file cannot.
type KeyFile struct {
	path string
	log  *slog.Logger
	ring atomic.Pointer[Keyring]

	mu  sync.Mutex // one reload at a time
	sum []byte     // digest of the file the current keyring came from
}

// OpenKeyFile loads the file once; a missing or malformed file is an error.
func OpenKeyFile(path string, log *slog.Logger) (*KeyFile, error) {
	f := &KeyFile{path: path, log: cmp.Or(log, slog.Default())}
	if _, err := f.Reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// Keys returns the current keyring; nil for a nil KeyFile.
func (f *KeyFile) Keys() *Keyring {
	if f == nil {
		return nil
	}
	return f.ring.Load()
}

// Path is the key file's path.
func (f *KeyFile) Path() string { return f.path }

// Reload reads the file again and swaps the keyring when it changed. On an
// error (a file being written, say) the current keyring stays. It reports
// whether it swapped.
func (f *KeyFile) Reload() (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	raw, err := os.ReadFile(f.path)
	if err != nil {
		return false, fmt.Errorf("secret key file: %w", err)
	}
	sum := sha256.Sum256(raw)
	if bytes.Equal(sum[:], f.sum) {
		return false, nil
	}
	k, err := ParseKeys(raw)
	if err != nil {
		return false, fmt.Errorf("secret key file %s: %w", f.path, err)
	}
	f.ring.Store(k)
	f.sum = sum[:]
	return true, nil
}

// Watch reloads on every value of hup (SIGHUP) and when the file changes,
// checked every interval (default 5s), until ctx ends. A file that fails to
// load is logged (once, not at every check) and the current keys kept.
func (f *KeyFile) Watch(ctx context.Context, interval time.Duration, hup <-chan os.Signal) {
	tick := time.NewTicker(cmp.Or(interval, 5*time.Second))
	defer tick.Stop()
	lastErr := ""
	for {
		why := "file changed"
		select {
		case <-ctx.Done():
			return
		case <-hup:
			why = "SIGHUP"
		case <-tick.C:
		}
		swapped, err := f.Reload()
		switch {
		case err != nil && (why == "SIGHUP" || err.Error() != lastErr):
			f.log.Error("secret key file cannot be loaded; keeping the keys loaded before", "err", err)
		case swapped:
			k := f.Keys()
			f.log.Info("secret key file reloaded", "why", why, "file", f.path,
				"seals_with", k.ID(), "opens", strings.Join(k.IDs(), ","))
		}
		lastErr = ""
		if err != nil {
			lastErr = err.Error()
		}
	}
}
