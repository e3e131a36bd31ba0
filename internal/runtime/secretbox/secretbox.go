// Package secretbox encrypts the secrets kmirror stores (source SASL
// passwords and TLS private keys) with AES-256-GCM before they reach
// PostgreSQL. Each value is bound to where it belongs (associated data:
// the mirror's name and the field), so a ciphertext copied into another row
// or field does not decrypt.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// prefix marks a sealed value: "kmsec:v1:<key id>:<base64url(nonce|ciphertext)>".
// A stored value without it is one written before encryption was set up.
const prefix = "kmsec:v1:"

// KeySize is the key's length in bytes (AES-256).
const KeySize = 32

// Box seals and opens values under one key.
type Box struct {
	aead cipher.AEAD
	id   string
}

// New returns a Box for a 32-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("secret key is %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append([]byte("kmirror secret key id\x00"), key...))
	return &Box{aead: aead, id: hex.EncodeToString(sum[:4])}, nil
}

// ID names the key without revealing it, so an error can say a secret was
// sealed under another key.
func (b *Box) ID() string { return b.id }

// Sealed reports whether a stored value is sealed.
func Sealed(v string) bool { return strings.HasPrefix(v, prefix) }

// KeyID returns the id of the key a sealed value was sealed under.
func KeyID(v string) string {
	id, _, _ := strings.Cut(strings.TrimPrefix(v, prefix), ":")
	return id
}

// Seal encrypts plaintext bound to aad; the empty string stays empty (no
// secret set).
func (b *Box) Seal(plaintext, aad string) (string, error) {
	if plaintext == "" {
		return "", nil
	}
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := b.aead.Seal(nonce, nonce, []byte(plaintext), []byte(aad))
	return prefix + b.id + ":" + base64.RawURLEncoding.EncodeToString(out), nil
}

// ErrWrongKey is a sealed value that this Box cannot open: another key
// sealed it, or it was sealed for another place (aad) or altered.
var ErrWrongKey = errors.New("cannot decrypt")

// ErrKeyNotHeld is the ErrWrongKey of a value sealed under a key that is
// not at hand (a rotation the server has not caught up with): unlike an
// altered value, it opens once that key is loaded.
var ErrKeyNotHeld = fmt.Errorf("%w: the key that sealed it is not loaded", ErrWrongKey)

// Open decrypts a sealed value bound to aad. A value that is not sealed is
// returned as it is.
func (b *Box) Open(v, aad string) (string, error) {
	if !Sealed(v) {
		return v, nil
	}
	id, enc, ok := strings.Cut(strings.TrimPrefix(v, prefix), ":")
	if !ok {
		return "", fmt.Errorf("%w: malformed sealed value", ErrWrongKey)
	}
	if id != b.id {
		return "", fmt.Errorf("%w: sealed under key %s, the key given is %s", ErrKeyNotHeld, id, b.id)
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(raw) < b.aead.NonceSize() {
		return "", fmt.Errorf("%w: malformed sealed value", ErrWrongKey)
	}
	n := b.aead.NonceSize()
	plain, err := b.aead.Open(nil, raw[:n], raw[n:], []byte(aad))
	if err != nil {
		return "", fmt.Errorf("%w: the value does not belong to %s or was altered", ErrWrongKey, aad)
	}
	return string(plain), nil
}

// NewKeyText returns a fresh random key as 64 hex digits, the form a key
// file holds.
func NewKeyText() (string, error) {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	return hex.EncodeToString(key), nil
}
