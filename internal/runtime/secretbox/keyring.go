package secretbox

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Keyring is the keys of one key file: the first seals, and each one opens
// what it sealed. Holding two keys lets a rotation run with no moment where
// a server cannot open a secret: the new key goes first, the old one stays
// below it until `kmirror secrets rotate` has re-sealed everything.
type Keyring struct {
	boxes []*Box
}

// NewKeyring returns a keyring of boxes; the first seals. A key given
// twice is kept once.
func NewKeyring(boxes ...*Box) (*Keyring, error) {
	k := &Keyring{}
	for _, b := range boxes {
		if b == nil {
			return nil, errors.New("secretbox: nil key")
		}
		if k.box(b.ID()) == nil {
			k.boxes = append(k.boxes, b)
		}
	}
	if len(k.boxes) == 0 {
		return nil, errors.New("secretbox: a keyring needs a key")
	}
	return k, nil
}

// Keys returns k itself, so a fixed keyring serves where a reloading
// KeyFile does.
func (k *Keyring) Keys() *Keyring { return k }

// ID names the key that seals.
func (k *Keyring) ID() string { return k.boxes[0].ID() }

// IDs names every key, the sealing one first.
func (k *Keyring) IDs() []string {
	ids := make([]string, len(k.boxes))
	for i, b := range k.boxes {
		ids[i] = b.ID()
	}
	return ids
}

func (k *Keyring) box(id string) *Box {
	for _, b := range k.boxes {
		if b.ID() == id {
			return b
		}
	}
	return nil
}

// Seal seals under the first key.
func (k *Keyring) Seal(plaintext, aad string) (string, error) {
	return k.boxes[0].Seal(plaintext, aad)
}

// Open opens a value sealed under any of the keys; a value sealed under
// none of them is ErrKeyNotHeld. A value that is not sealed is returned as
// it is.
func (k *Keyring) Open(v, aad string) (string, error) {
	if !Sealed(v) {
		return v, nil
	}
	id := KeyID(v)
	b := k.box(id)
	if b == nil {
		return "", fmt.Errorf("%w: sealed under key %s, the keys loaded are %s", ErrKeyNotHeld, id, strings.Join(k.IDs(), ", "))
	}
	return b.Open(v, aad)
}

// ParseKeys reads a key file: one key a line, as 64 hex digits or the
// base64 of 32 bytes; blank lines and lines that start with # are skipped.
// A file of exactly 32 bytes that is not such text is one raw key. Errors
// name a line, never its text: it may be a key.
func ParseKeys(raw []byte) (*Keyring, error) {
	var boxes []*Box
	sc := bufio.NewScanner(bytes.NewReader(raw))
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		key, ok := decodeKey(text)
		if !ok {
			if len(raw) == KeySize {
				return rawKey(raw)
			}
			return nil, fmt.Errorf("line %d: want a %d-byte key as 64 hex digits or base64, one a line (kmirror secrets new-key writes one)", line, KeySize)
		}
		b, err := New(key)
		if err != nil {
			return nil, err
		}
		boxes = append(boxes, b)
	}
	if len(boxes) == 0 {
		if len(raw) == KeySize {
			return rawKey(raw)
		}
		return nil, errors.New("holds no key (kmirror secrets new-key writes one)")
	}
	return NewKeyring(boxes...)
}

func decodeKey(text string) ([]byte, bool) {
	if b, err := hex.DecodeString(text); err == nil && len(b) == KeySize {
		return b, true
	}
	if b, err := base64.StdEncoding.DecodeString(text); err == nil && len(b) == KeySize {
		return b, true
	}
	return nil, false
}

func rawKey(raw []byte) (*Keyring, error) {
	b, err := New(raw)
	if err != nil {
		return nil, err
	}
	return NewKeyring(b)
}

// LoadKeyFile reads a key file (ParseKeys).
func LoadKeyFile(path string) (*Keyring, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := ParseKeys(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}
