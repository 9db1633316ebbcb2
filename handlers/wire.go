package handlers

import (
	"time"

	"codeauth/auth"
	"codeauth/models"
)

// isoTime marshals as JavaScript's Date.toISOString does ("2026-11-21T09:30:00.000Z"), the form
// better-auth's client turns back into Date objects.
type isoTime time.Time

func (t isoTime) MarshalJSON() ([]byte, error) {
	return time.Time(t).UTC().AppendFormat(append(make([]byte, 0, 26), '"'), "2006-01-02T15:04:05.000Z07:00\""), nil
}

// userJSON is the User object of the wire contract.
type userJSON struct {
	ID            string  `json:"id"`
	Name          string  `json:"name"`
	Email         string  `json:"email"`
	EmailVerified bool    `json:"emailVerified"`
	Image         *string `json:"image"`
	CreatedAt     isoTime `json:"createdAt"`
	UpdatedAt     isoTime `json:"updatedAt"`
}

// sessionJSON is the Session object of the wire contract. Token is the raw token the caller
// presented; the database only has its hash.
type sessionJSON struct {
	ID        string  `json:"id"`
	UserID    string  `json:"userId"`
	Token     string  `json:"token"`
	ExpiresAt isoTime `json:"expiresAt"`
	IPAddress string  `json:"ipAddress"`
	UserAgent string  `json:"userAgent"`
	CreatedAt isoTime `json:"createdAt"`
	UpdatedAt isoTime `json:"updatedAt"`
}

func toUserJSON(u models.User) userJSON {
	return userJSON{
		ID: u.ID, Name: u.Name, Email: u.Email, EmailVerified: u.EmailVerified, Image: u.Image,
		CreatedAt: isoTime(u.CreatedAt), UpdatedAt: isoTime(u.UpdatedAt),
	}
}

func toSessionJSON(st *auth.SessionState) sessionJSON {
	s := st.Session
	return sessionJSON{
		ID: s.ID, UserID: s.UserID, Token: st.Token, ExpiresAt: isoTime(s.ExpiresAt),
		IPAddress: s.IPAddress, UserAgent: s.UserAgent, CreatedAt: isoTime(s.CreatedAt), UpdatedAt: isoTime(s.UpdatedAt),
	}
}

// sessionResponse is the answer of get-session when a session exists.
type sessionResponse struct {
	Session sessionJSON `json:"session"`
	User    userJSON    `json:"user"`
}

// signInResponse is the answer of a successful verification.
type signInResponse struct {
	Token string   `json:"token"`
	User  userJSON `json:"user"`
}

// preferencesJSON is the service's own per-user record in /api/me.
type preferencesJSON struct {
	MarketingOptIn  bool `json:"marketingOptIn"`
	IsTrialEligible bool `json:"isTrialEligible"`
}

// meResponse is the answer of GET /api/me.
type meResponse struct {
	User        userJSON        `json:"user"`
	Preferences preferencesJSON `json:"preferences"`
}

type successResponse struct {
	Success bool `json:"success"`
}

type statusResponse struct {
	Status bool `json:"status"`
}
