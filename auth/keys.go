package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"sync"
)

// keys are the secrets derived from AUTH_SECRET. Each use gets its own key, so no value signed
// for one purpose verifies for another. The session cookie signature uses the secret itself: it
// is the better-auth wire format (HMAC-SHA256(secret, token)) that existing clients carry.
type keys struct {
	cookie   []byte      // signs session tokens in cookies and set-auth-token
	otp      []byte      // keys the code hashes
	throttle []byte      // keys the address hashes of auth_throttle
	cache    cipher.AEAD // seals the session_data cookie cache
	// signers are reusable HMACs keyed with cookie: verifying a signature is on every request,
	// and keying a fresh HMAC costs more than the signature itself.
	signers sync.Pool
}

// signer returns an HMAC-SHA256 keyed with the cookie key, reset; put it back in signers after
// use.
func (k *keys) signer() hash.Hash {
	if h, ok := k.signers.Get().(hash.Hash); ok {
		h.Reset()
		return h
	}
	return hmac.New(sha256.New, k.cookie)
}

func deriveKey(secret []byte, label string) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("codeauth key derivation v1\x00" + label))
	return mac.Sum(nil)
}

func newKeys(secret []byte) (*keys, error) {
	block, err := aes.NewCipher(deriveKey(secret, "session-cache"))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &keys{
		cookie:   append([]byte(nil), secret...),
		otp:      deriveKey(secret, "otp"),
		throttle: deriveKey(secret, "throttle"),
		cache:    aead,
	}, nil
}
