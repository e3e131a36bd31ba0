package secretbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSealOpen(t *testing.T) {
	k1, _ := NewKeyText()
	k2, _ := NewKeyText()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	b1, err := LoadKeyFile(write("k1", k1+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	b2, err := LoadKeyFile(write("k2", k2))
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := b1.Seal("hunter2", "mirror/m1/sasl_password")
	if err != nil || !Sealed(sealed) || strings.Contains(sealed, "hunter2") || KeyID(sealed) != b1.ID() {
		t.Fatalf("sealed %q, %v", sealed, err)
	}
	if again, _ := b1.Seal("hunter2", "mirror/m1/sasl_password"); again == sealed {
		t.Fatal("two seals of one value are equal: the nonce is not fresh")
	}
	if got, err := b1.Open(sealed, "mirror/m1/sasl_password"); err != nil || got != "hunter2" {
		t.Fatalf("open: %q %v", got, err)
	}
	for name, open := range map[string]func() (string, error){
		"other mirror": func() (string, error) { return b1.Open(sealed, "mirror/m2/sasl_password") },
		"other field":  func() (string, error) { return b1.Open(sealed, "mirror/m1/tls_key_pem") },
		"other key":    func() (string, error) { return b2.Open(sealed, "mirror/m1/sasl_password") },
		"altered":      func() (string, error) { return b1.Open(sealed[:len(sealed)-2]+"AA", "mirror/m1/sasl_password") },
	} {
		if got, err := open(); !errors.Is(err, ErrWrongKey) || got != "" {
			t.Errorf("%s: %q %v, want ErrWrongKey", name, got, err)
		}
	}
	if got, err := b1.Open("legacy-clear", "x"); err != nil || got != "legacy-clear" {
		t.Fatalf("a value stored before encryption: %q %v", got, err)
	}
	if s, _ := b1.Seal("", "x"); s != "" {
		t.Fatal("an unset secret was sealed")
	}
	if _, err := LoadKeyFile(write("short", "abcd")); err == nil {
		t.Fatal("a short key loaded")
	}
}
