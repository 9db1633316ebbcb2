package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"sync"
)

// keys are the secrets derived from AUTH_SECRET. Each use gets its own key, so no value signed
// for one purpose verifies for another. (The signature of session tokens is the wire format's,
// keyed with the secret itself: handlers/betterauth/credential.)
type keys struct {
	otp      macs        // keys the code hashes
	throttle macs        // keys the address hashes of auth_throttle
	device   macs        // keys the device hashes of known_devices
	cache    cipher.AEAD // seals the session_data cookie cache
	jwt      cipher.AEAD // seals the private JWT signing keys in the jwks table
	code     cipher.AEAD // seals sign-in codes in their rows, for a resend (sealCode)
	link     cipher.AEAD // seals the sign-in links of code e-mails (signInLink)
}

// macs hands out reusable HMAC-SHA256s keyed with one key: hashes of codes and addresses are on
// every sign-in, and keying a fresh HMAC costs more than the hash itself.
type macs struct {
	key  []byte
	pool sync.Pool
}

// sum is the HMAC of the parts written one after the other, appended to b.
func (m *macs) sum(b []byte, parts ...string) []byte {
	h, ok := m.pool.Get().(hash.Hash)
	if ok {
		h.Reset()
	} else {
		h = hmac.New(sha256.New, m.key)
	}
	for _, p := range parts {
		h.Write([]byte(p))
	}
	b = h.Sum(b)
	m.pool.Put(h)
	return b
}

func deriveKey(secret []byte, label string) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("codeauth key derivation v1\x00" + label))
	return mac.Sum(nil)
}

func newKeys(secret []byte) (*keys, error) {
	cache, err := newAEAD(deriveKey(secret, "session-cache"))
	if err != nil {
		return nil, err
	}
	jwt, err := newAEAD(deriveKey(secret, "jwt-signing-key"))
	if err != nil {
		return nil, err
	}
	code, err := newAEAD(deriveKey(secret, "sign-in-code"))
	if err != nil {
		return nil, err
	}
	link, err := newAEAD(deriveKey(secret, "sign-in-link"))
	if err != nil {
		return nil, err
	}
	return &keys{
		link:     link,
		code:     code,
		otp:      macs{key: deriveKey(secret, "otp")},
		throttle: macs{key: deriveKey(secret, "throttle")},
		device:   macs{key: deriveKey(secret, "known-device")},
		cache:    cache,
		jwt:      jwt,
	}, nil
}

// sealCode seals a sign-in code for its row id (models.Verification.SealedCode): a random nonce,
// then the code sealed with the id as additional data, so a sealed code copied to another row
// does not open.
func (k *keys) sealCode(id, code string) ([]byte, error) {
	out := make([]byte, k.code.NonceSize(), k.code.NonceSize()+len(code)+k.code.Overhead())
	if _, err := rand.Read(out); err != nil {
		return nil, fmt.Errorf("auth: reading random bytes: %w", err)
	}
	return k.code.Seal(out, out, []byte(code), []byte(id)), nil
}

// openCode opens what sealCode sealed for the row id.
func (k *keys) openCode(id string, sealed []byte) (string, error) {
	ns := k.code.NonceSize()
	if len(sealed) < ns {
		return "", errors.New("auth: sealed code too short")
	}
	code, err := k.code.Open(nil, sealed[:ns], sealed[ns:], []byte(id))
	if err != nil {
		return "", fmt.Errorf("auth: opening a sealed code: %w", err)
	}
	return string(code), nil
}

// newAEAD is AES-256-GCM under key.
func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("auth: AES key: %w", err)
	}
	return cipher.NewGCM(block)
}
