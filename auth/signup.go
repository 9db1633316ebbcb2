package auth

import (
	"context"
	"slices"
	"strings"
)

// Sign-up gating: AUTH_DISABLE_SIGNUP lets only existing accounts sign in, and
// AUTH_ALLOWED_EMAIL_DOMAINS lets only addresses of those domains create one. Neither may say
// whether an address has an account: a send answers as for anyone, and stores its code and e-mail
// as for anyone, but the e-mail is withheld when the address has no account and may not make
// one (so no code goes to an address that could never use it); a verify that would create a
// refused account fails as a wrong code does. While gating is on, every send looks the address
// up, whatever the answer, so the work done does not depend on it.

// SignUpPolicy is who may create an account.
type SignUpPolicy struct {
	// Closed means no new accounts: only existing ones sign in.
	Closed bool
	// Domains, when not empty, are the only domains new accounts may have addresses at.
	Domains []string
}

// gated reports whether the policy refuses anyone.
func (p SignUpPolicy) gated() bool { return p.Closed || len(p.Domains) > 0 }

// mayCreate reports whether an account may be created for the normalised address email.
func (p SignUpPolicy) mayCreate(email string) bool {
	if p.Closed {
		return false
	}
	if len(p.Domains) == 0 {
		return true
	}
	return slices.Contains(p.Domains, email[strings.LastIndexByte(email, '@')+1:])
}

// SignUp returns the service's sign-up policy, for the pages to say.
func (s *Service) SignUp() SignUpPolicy { return s.signUp }

// withholdCode reports whether the code for email must not be sent: sign-up is gated, the
// address may not create an account, and it has none (live or in its deletion grace period). It
// looks the address up whenever sign-up is gated, whatever the address.
func (s *Service) withholdCode(ctx context.Context, email string) (bool, error) {
	if !s.signUp.gated() {
		return false, nil
	}
	exists, err := s.store.AddressTaken(ctx, email)
	if err != nil {
		return false, err
	}
	return !exists && !s.mayCreate(email), nil
}

// mayCreate reports whether an account may be created for the normalised address email: the
// sign-up policy allows it, or the address is one of AUTH_ADMIN_EMAILS, which the operator named
// so that a service with sign-up closed still has a way in for its first admin.
func (s *Service) mayCreate(email string) bool {
	return s.adminEmails[email] || s.signUp.mayCreate(email)
}

// NormalizeDomain reads a domain of AUTH_ALLOWED_EMAIL_DOMAINS as addresses are read
// (NormalizeEmail): lower case, IDNA to ASCII; false when it is not a domain.
func NormalizeDomain(raw string) (string, bool) {
	return normalizeDomain(strings.TrimSpace(raw))
}
