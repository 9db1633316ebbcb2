package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
)

// The shape of a one-time code. These two constants are the spec's OTP_LENGTH and OTP_ALPHABET,
// defined here once: they drive generation, the server's shape check, and the code input of the
// pages (its maxlength, inputmode, pattern and the script that drops characters the alphabet
// cannot contain).
const (
	// OTPLength is OTP_LENGTH, the number of characters in a code.
	OTPLength = 6
	// OTPAlphabet is OTP_ALPHABET, the characters a code is drawn from.
	OTPAlphabet = "0123456789"
)

// Code lifetime and attempt budget (CONTRACT.md "Codes").
const (
	// OTPLifetime is how long a code stays valid after it is issued.
	OTPLifetime = 600 * time.Second
	// OTPMaxAttempts is how many comparisons one code allows; the next try gets
	// ErrTooManyAttempts and kills the code.
	OTPMaxAttempts = 5
)

// Purposes a code can be issued for. A code only works for the purpose it was issued for.
const (
	// PurposeSignIn codes sign in, creating the account for an unknown address.
	PurposeSignIn = "sign-in"
)

// otpNumeric reports whether the alphabet is digits only, which lets the pages ask for a numeric
// keyboard.
func otpNumeric() bool { return strings.Trim(OTPAlphabet, "0123456789") == "" }

// OTPInputMode is the HTML inputmode for the code input, derived from OTPAlphabet.
func OTPInputMode() string {
	if otpNumeric() {
		return "numeric"
	}
	return "text"
}

// generateCode draws OTPLength characters from OTPAlphabet with crypto/rand. Bytes at or above
// the largest multiple of the alphabet size are thrown away, so every character is equally likely
// (no modulo bias).
func generateCode() (string, error) {
	n := len(OTPAlphabet)
	limit := 256 - 256%n
	out := make([]byte, 0, OTPLength)
	buf := make([]byte, OTPLength*2)
	for len(out) < OTPLength {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("auth: reading random bytes: %w", err)
		}
		for _, b := range buf {
			if int(b) >= limit {
				continue
			}
			out = append(out, OTPAlphabet[int(b)%n])
			if len(out) == OTPLength {
				break
			}
		}
	}
	return string(out), nil
}

// validCodeShape reports whether s could be a code at all. Anything else is rejected before any
// lookup, so it can neither match nor use up an attempt.
func validCodeShape(s string) bool {
	if len(s) != OTPLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(OTPAlphabet, s[i]) < 0 {
			return false
		}
	}
	return true
}

// codeHash is the keyed hash stored instead of the code. The purpose, subject and e-mail are
// part of the MAC input, so a code is only ever right for the request it was issued for.
func (k *keys) codeHash(purpose, subject, email, code string) string {
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.EncodeToString(k.otp.sum(sum[:0], purpose, "\x00", subject, "\x00", email, "\x00", code, "\x00"))
}

// sameHash compares two stored hashes in constant time.
func sameHash(a, b string) bool { return hmac.Equal([]byte(a), []byte(b)) }
