package secretbox

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKeyringRotation: in a file of two keys the first seals and both open;
// a value sealed under a key the ring lacks is ErrKeyNotHeld (it may open
// after a reload), unlike an altered one.
func TestKeyringRotation(t *testing.T) {
	t.Parallel()
	oldKey, _ := NewKeyText()
	newKey, _ := NewKeyText()
	old, err := ParseKeys([]byte(oldKey + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	both, err := ParseKeys([]byte("# new first: it seals\n" + newKey + "\n\n" + oldKey + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ids := both.IDs(); len(ids) != 2 || ids[1] != old.ID() || both.ID() == old.ID() {
		t.Fatalf("ids %v, old %s", ids, old.ID())
	}
	const aad = "kmirror/mirror/m/sasl_password"
	underOld, _ := old.Seal("pw", aad)
	underNew, _ := both.Seal("pw", aad)
	if KeyID(underNew) != both.ID() {
		t.Fatal("the first key does not seal")
	}
	for _, v := range []string{underOld, underNew} {
		if got, err := both.Open(v, aad); err != nil || got != "pw" {
			t.Fatalf("both keys: %q %v", got, err)
		}
	}
	_, err = old.Open(underNew, aad)
	if !errors.Is(err, ErrKeyNotHeld) || !errors.Is(err, ErrWrongKey) || !strings.Contains(err.Error(), both.ID()) {
		t.Fatalf("a key not loaded: %v", err)
	}
	if _, err := both.Open(underNew[:len(underNew)-2]+"AA", aad); errors.Is(err, ErrKeyNotHeld) || !errors.Is(err, ErrWrongKey) {
		t.Fatalf("an altered value: %v, want ErrWrongKey only", err)
	}
	for name, text := range map[string]string{"empty": "", "comments only": "# none\n", "a bad line": oldKey + "\nnot-a-key\n"} {
		if _, err := ParseKeys([]byte(text)); err == nil || strings.Contains(err.Error(), oldKey) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestKeyFileReload: the keyring follows its file when the file changes
// (polled) and on SIGHUP; a file that does not parse keeps the keys.
func TestKeyFileReload(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "secret.key")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	k1, _ := NewKeyText()
	k2, _ := NewKeyText()
	k3, _ := NewKeyText()
	write(k1 + "\n")
	f, err := OpenKeyFile(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	first := f.Keys().ID()
	if swapped, err := f.Reload(); swapped || err != nil {
		t.Fatalf("an unchanged file: swapped %v, %v", swapped, err)
	}
	write("garbage\n")
	if swapped, err := f.Reload(); swapped || err == nil || f.Keys().ID() != first {
		t.Fatalf("a broken file: swapped %v, %v; want the keys kept", swapped, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hup := make(chan os.Signal, 1)
	go f.Watch(ctx, 10*time.Millisecond, nil)
	write(k2 + "\n" + k1 + "\n")
	waitKeys(t, f, 2)
	cancel()

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go f.Watch(ctx, time.Hour, hup)
	write(k3 + "\n" + k2 + "\n" + k1 + "\n")
	hup <- os.Interrupt // any value: the server relays SIGHUP
	waitKeys(t, f, 3)
	if _, err := OpenKeyFile(filepath.Join(t.TempDir(), "absent"), nil); err == nil {
		t.Fatal("a missing key file opened")
	}
}

func waitKeys(t *testing.T, f *KeyFile, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(f.Keys().IDs()) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d keys loaded, want %d", len(f.Keys().IDs()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
