package betterauth

import (
	"encoding/json"
	"fmt"
	"strconv"

	"codeauth/auth"
	"codeauth/middleware"

	"github.com/gofiber/fiber/v2"
)

// The routes of better-auth's jwt plugin, under /api/auth: a JWT for the caller's session, and
// the public keys that verify it. The set-auth-jwt header of get-session is in auth_api.go.

// jwksCacheControl lets verifiers and proxies keep the JWKS for auth.JWKSMaxAge: a rotation
// publishes the next key longer than that before it signs, so a cached copy never misses a kid.
var jwksCacheControl = "public, max-age=" + strconv.Itoa(int(auth.JWKSMaxAge.Seconds()))

// token is GET /token: {"token": "<JWT>"} for the caller's session (checked against the
// database, like every route that hands out a credential); 401 without one.
func (h *API) token(c *fiber.Ctx) error {
	jwt, err := h.auth.SessionJWT(c.UserContext(), middleware.Current(c))
	if err != nil {
		return err
	}
	return c.JSON(tokenResponse{Token: jwt})
}

// jwks is GET /jwks: {"keys": [...]}, the public keys, with no private part, in the JWK format of
// RFC 7517 (Ed25519 keys as RFC 8037's OKP). It needs no session.
func (h *API) jwks(c *fiber.Ctx) error {
	set, err := h.auth.JWKS(c.UserContext())
	if err != nil {
		return err
	}
	body, err := json.Marshal(set)
	if err != nil {
		return fmt.Errorf("betterauth: encoding the JWKS: %w", err)
	}
	c.Set(fiber.HeaderCacheControl, jwksCacheControl)
	c.Type("json")
	return c.Send(body)
}
