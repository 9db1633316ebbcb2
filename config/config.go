// Package config reads the service's settings from the environment, fills in defaults and
// validates them before anything else starts, so a bad setting stops the process with a message
// that names the variable instead of surfacing later as a strange runtime failure.
package config

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// MinSecretLength is the shortest AUTH_SECRET accepted, in bytes. HMAC-SHA256 keys shorter than
// the hash output weaken every signature the service makes.
const MinSecretLength = 32

// DefaultSessionMaxAge is the absolute session cap used when AUTH_SESSION_MAX_AGE is unset: a
// session ends one year after sign-in however active it is (OWASP ASVS 5.0 7.3.2).
const DefaultSessionMaxAge = 365 * 24 * time.Hour

// NoProxy is the AUTH_TRUSTED_PROXIES value that says clients connect directly.
const NoProxy = "none"

// ProxySet reports whether AUTH_TRUSTED_PROXIES says how clients reach the service: through the
// listed proxies, or directly.
func (c Config) ProxySet() bool { return c.NoProxy || len(c.TrustedProxies) > 0 }

// secretFileName is the file inside the data folder that holds the generated local secret.
const secretFileName = "auth-secret"

// Config is the validated configuration of one service process.
type Config struct {
	// Port is the TCP port the HTTP server listens on (PORT).
	Port int
	// BaseURL is the public origin of the service (AUTH_URL), without a trailing slash.
	BaseURL string
	// Secure reports whether BaseURL is https, which turns on Secure and __Secure- cookies.
	Secure bool
	// Secret signs session cookies and derives every other key (AUTH_SECRET).
	Secret []byte
	// TrustedOrigins are the extra origins of AUTH_TRUSTED_ORIGINS, normalised.
	TrustedOrigins []string
	// TrustedProxies are the proxy addresses and networks of AUTH_TRUSTED_PROXIES.
	TrustedProxies []netip.Prefix
	// NoProxy is AUTH_TRUSTED_PROXIES=none: clients connect directly, so the connection's address
	// is the client's and forwarding headers are ignored.
	NoProxy bool
	// EmailProviderAPIKey selects provider delivery when set (EMAIL_PROVIDER_API_KEY).
	EmailProviderAPIKey string
	// EmailFrom is the sender of provider e-mail (EMAIL_FROM).
	EmailFrom string
	// EmailProviderURL replaces the provider's API address (EMAIL_PROVIDER_URL).
	EmailProviderURL string
	// EmailChangeLinks enables the link-based e-mail change of the web (AUTH_EMAIL_CHANGE_LINK).
	EmailChangeLinks bool
	// DeletionGrace is how long a deleted account can be restored (AUTH_DELETION_GRACE).
	DeletionGrace time.Duration
	// DatabaseURL is a postgres:// URL, or empty for the embedded SQLite database (DATABASE_URL).
	DatabaseURL string
	// DataDir holds the embedded database and the generated local secret (DATA_DIR).
	DataDir string
	// CookiePrefix starts every cookie name (AUTH_COOKIE_PREFIX).
	CookiePrefix string
	// SessionMaxAge is the absolute session lifetime counted from sign-in (AUTH_SESSION_MAX_AGE).
	SessionMaxAge time.Duration
	// MaxFailedVerifications is how many consecutive failed verifications lock an address for a
	// day (AUTH_MAX_FAILED_VERIFICATIONS).
	MaxFailedVerifications int
	// RateLimitStore is where per-IP counters live: "memory" or "postgres" (RATE_LIMIT_STORE).
	RateLimitStore string
	// SiteName names the service in e-mails and pages (SITE_NAME).
	SiteName string
	// PprofAddr, when set, serves Go's profiler there (DEBUG_PPROF_ADDR); loopback addresses only.
	PprofAddr string
	// LogLevel is the minimum level written to the log (LOG_LEVEL).
	LogLevel slog.Level
	// LogFormat is "text" or "json" (LOG_FORMAT).
	LogFormat string
	// Warnings are problems worth telling the operator about that do not stop the start.
	Warnings []string
}

// UsesPostgres reports whether the service runs on PostgreSQL rather than the embedded SQLite.
func (c Config) UsesPostgres() bool { return c.DatabaseURL != "" }

// SQLitePath is the file of the embedded database.
func (c Config) SQLitePath() string { return filepath.Join(c.DataDir, "auth.db") }

// LookupFunc reads one environment variable; os.LookupEnv is the production one.
type LookupFunc func(name string) (string, bool)

var cookiePrefixPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,40}$`)

// Load builds the configuration from the environment. Every invalid variable is reported, each
// error naming its variable. Load may create DataDir and, when AUTH_SECRET is unset and AUTH_URL
// is plain http (local use), a random secret kept in DataDir.
func Load(lookup LookupFunc) (Config, error) {
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	cfg := Config{
		Port:                   3000,
		DataDir:                "data",
		CookiePrefix:           "auth",
		SiteName:               "codeauth",
		MaxFailedVerifications: 25,
		EmailChangeLinks:       true,
		DeletionGrace:          30 * 24 * time.Hour,
		RateLimitStore:         "memory",
		SessionMaxAge:          DefaultSessionMaxAge,
		LogLevel:               slog.LevelInfo,
		LogFormat:              "text",
	}

	if v := get("PORT"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > 65535 {
			bad("PORT", "%q is not a port number (1-65535)", v)
		} else {
			cfg.Port = p
		}
	}

	cfg.BaseURL = fmt.Sprintf("http://localhost:%d", cfg.Port)
	if v := get("AUTH_URL"); v != "" {
		origin, err := parseBaseURL(v)
		if err != nil {
			bad("AUTH_URL", "%v", err)
		} else {
			cfg.BaseURL = origin
		}
	}
	cfg.Secure = strings.HasPrefix(cfg.BaseURL, "https://")

	if v := get("DATA_DIR"); v != "" {
		cfg.DataDir = v
	}

	for _, item := range splitList(get("AUTH_TRUSTED_ORIGINS")) {
		origin, err := parseTrustedOrigin(item)
		if err != nil {
			bad("AUTH_TRUSTED_ORIGINS", "%q: %v", item, err)
			continue
		}
		cfg.TrustedOrigins = append(cfg.TrustedOrigins, origin)
	}

	proxies := splitList(get("AUTH_TRUSTED_PROXIES"))
	for _, item := range proxies {
		if strings.EqualFold(item, NoProxy) {
			if len(proxies) > 1 {
				bad("AUTH_TRUSTED_PROXIES", "%q stands alone: it says no proxy is in front, so it cannot come with proxies", item)
			}
			cfg.NoProxy = true
			continue
		}
		prefix, err := parseProxy(item)
		if err != nil {
			bad("AUTH_TRUSTED_PROXIES", "%q is not an IP address or CIDR network (or %q for none)", item, NoProxy)
			continue
		}
		cfg.TrustedProxies = append(cfg.TrustedProxies, prefix)
	}

	cfg.EmailProviderAPIKey = get("EMAIL_PROVIDER_API_KEY")
	cfg.EmailFrom = get("EMAIL_FROM")
	if cfg.EmailProviderAPIKey != "" && cfg.EmailFrom == "" {
		bad("EMAIL_FROM", "required with EMAIL_PROVIDER_API_KEY, e.g. \"Acme <auth@acme.example>\"")
	}
	if strings.ContainsAny(cfg.EmailFrom, "\r\n") {
		bad("EMAIL_FROM", "must be one line")
	}
	if v := get("EMAIL_PROVIDER_URL"); v != "" {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("EMAIL_PROVIDER_URL", "%q is not an http(s) URL", v)
		} else {
			cfg.EmailProviderURL = v
		}
	}
	switch v := strings.ToLower(get("AUTH_EMAIL_CHANGE_LINK")); v {
	case "", "true", "1", "yes", "on":
	case "false", "0", "no", "off":
		cfg.EmailChangeLinks = false
	default:
		bad("AUTH_EMAIL_CHANGE_LINK", "%q must be true or false", v)
	}
	if v := get("AUTH_DELETION_GRACE"); v != "" {
		d, err := parseDuration(v)
		if err != nil || d < time.Hour {
			bad("AUTH_DELETION_GRACE", "%q must be a number of seconds or a Go duration of at least an hour", v)
		} else {
			cfg.DeletionGrace = d
		}
	}

	if v := get("DATABASE_URL"); v != "" {
		u, err := url.Parse(v)
		switch {
		case err != nil:
			bad("DATABASE_URL", "not a URL")
		case u.Scheme != "postgres" && u.Scheme != "postgresql":
			bad("DATABASE_URL", "unsupported scheme %q: use a postgres:// URL, or leave it unset for the embedded SQLite database", u.Scheme)
		default:
			cfg.DatabaseURL = v
		}
	}

	if v, ok := lookup("AUTH_COOKIE_PREFIX"); ok {
		if !cookiePrefixPattern.MatchString(v) {
			bad("AUTH_COOKIE_PREFIX", "%q must be 1-40 letters, digits, '.', '_' or '-'", v)
		} else {
			cfg.CookiePrefix = v
		}
	}

	if v := get("AUTH_SESSION_MAX_AGE"); v != "" {
		d, err := parseDuration(v)
		if err != nil || d < time.Minute {
			bad("AUTH_SESSION_MAX_AGE", "%q must be a number of seconds or a Go duration of at least one minute", v)
		} else {
			cfg.SessionMaxAge = d
		}
	}

	if v := get("AUTH_MAX_FAILED_VERIFICATIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			bad("AUTH_MAX_FAILED_VERIFICATIONS", "%q must be a whole number from 1 to 100 (NIST SP 800-63B allows at most 100)", v)
		} else {
			cfg.MaxFailedVerifications = n
		}
	}

	switch v := strings.ToLower(get("RATE_LIMIT_STORE")); v {
	case "", "memory":
	case "postgres":
		if cfg.DatabaseURL == "" {
			bad("RATE_LIMIT_STORE", "postgres needs DATABASE_URL to be a postgres:// URL")
		}
		cfg.RateLimitStore = "postgres"
	default:
		bad("RATE_LIMIT_STORE", "%q must be memory or postgres", v)
	}

	if v := get("SITE_NAME"); v != "" {
		if len(v) > 100 || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			bad("SITE_NAME", "must be at most 100 characters without control characters")
		} else {
			cfg.SiteName = v
		}
	}

	if v := get("DEBUG_PPROF_ADDR"); v != "" {
		host, _, err := net.SplitHostPort(v)
		if ip, perr := netip.ParseAddr(host); err != nil || (host != "localhost" && (perr != nil || !ip.IsLoopback())) {
			bad("DEBUG_PPROF_ADDR", "%q must be a loopback host:port such as 127.0.0.1:6060", v)
		} else {
			cfg.PprofAddr = v
		}
	}

	switch v := strings.ToLower(get("LOG_LEVEL")); v {
	case "", "info":
	case "debug":
		cfg.LogLevel = slog.LevelDebug
	case "warn", "warning":
		cfg.LogLevel = slog.LevelWarn
	case "error":
		cfg.LogLevel = slog.LevelError
	default:
		bad("LOG_LEVEL", "%q must be debug, info, warn or error", v)
	}
	switch v := strings.ToLower(get("LOG_FORMAT")); v {
	case "", "text":
	case "json":
		cfg.LogFormat = "json"
	default:
		bad("LOG_FORMAT", "%q must be text or json", v)
	}

	// The secret comes last: generating one writes to DataDir, which must not happen for a
	// configuration that is going to be rejected anyway. A given or missing secret is still
	// checked, so every problem is reported in one go.
	if v, ok := lookup("AUTH_SECRET"); ok && v != "" || cfg.Secure || len(errs) == 0 {
		secret, generated, err := loadSecret(lookup, cfg)
		if err != nil {
			errs = append(errs, err)
		} else {
			cfg.Secret = secret
			if generated {
				cfg.Warnings = append(cfg.Warnings, fmt.Sprintf(
					"AUTH_SECRET is not set: using a random secret kept in %s; set AUTH_SECRET before serving real users",
					filepath.Join(cfg.DataDir, secretFileName)))
			}
		}
	}
	if cfg.Secure && cfg.EmailProviderAPIKey == "" {
		cfg.Warnings = append(cfg.Warnings,
			"EMAIL_PROVIDER_API_KEY is not set: sign-in codes are written to the server console, not e-mailed")
	}

	if len(errs) > 0 {
		return Config{}, fmt.Errorf("invalid configuration: %w", errors.Join(errs...))
	}
	return cfg, nil
}

// splitList splits a comma-separated value, dropping spaces and empty items.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// parseBaseURL accepts an absolute http or https origin, optionally with a trailing slash.
func parseBaseURL(v string) (string, error) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q must be an absolute http:// or https:// URL", v)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/") {
		return "", fmt.Errorf("%q must be an origin such as https://auth.example.com, without a path, query or credentials", v)
	}
	return u.Scheme + "://" + strings.ToLower(u.Host), nil
}

// parseTrustedOrigin validates one AUTH_TRUSTED_ORIGINS entry. Web origins are exact
// scheme://host[:port] values (a trailing slash is dropped); custom-scheme origins of mobile shells
// (myapp://, capacitor://localhost) keep their authority and path. Wildcards are refused: a
// pattern such as "*" or "https://*" would trust every site.
func parseTrustedOrigin(v string) (string, error) {
	if strings.ContainsAny(v, "*?") {
		return "", errors.New("wildcards are not supported; list each origin")
	}
	u, err := url.Parse(v)
	if err != nil || u.Scheme == "" {
		return "", errors.New("not an absolute origin")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme == "http" || scheme == "https" {
		if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/") {
			return "", errors.New("a web origin is scheme://host[:port] with nothing after it")
		}
		return scheme + "://" + strings.ToLower(u.Host), nil
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", errors.New("a custom-scheme origin cannot carry credentials, a query or a fragment")
	}
	// The host of a custom-scheme URL is opaque (browsers keep its case), so it is kept as written.
	return scheme + "://" + u.Host + u.EscapedPath(), nil
}

// parseProxy reads an IP address or a CIDR network; a bare address trusts exactly that host.
func parseProxy(v string) (netip.Prefix, error) {
	if strings.Contains(v, "/") {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return netip.Prefix{}, err
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(v)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// parseDuration reads whole seconds ("5184000") or a Go duration ("720h").
func parseDuration(v string) (time.Duration, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n > int64((1<<63-1)/int64(time.Second)) {
			return 0, errors.New("too large")
		}
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(v)
}

// loadSecret returns AUTH_SECRET, or for plain-http local use a generated secret kept in the
// data folder so that sessions survive restarts. Over https a real secret is mandatory.
func loadSecret(lookup LookupFunc, cfg Config) (secret []byte, generated bool, err error) {
	if v, ok := lookup("AUTH_SECRET"); ok && v != "" {
		if len(v) < MinSecretLength {
			return nil, false, fmt.Errorf("AUTH_SECRET: must be at least %d bytes (it is %d); generate one with: openssl rand -base64 32", MinSecretLength, len(v))
		}
		return []byte(v), false, nil
	}
	if cfg.Secure {
		return nil, false, fmt.Errorf("AUTH_SECRET: required when AUTH_URL is https; generate one with: openssl rand -base64 32")
	}
	path := filepath.Join(cfg.DataDir, secretFileName)
	if b, err := os.ReadFile(path); err == nil {
		s := strings.TrimSpace(string(b))
		if len(s) < MinSecretLength {
			return nil, false, fmt.Errorf("AUTH_SECRET: the generated secret in %s is damaged; delete the file to make a new one", path)
		}
		return []byte(s), true, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("AUTH_SECRET: reading %s: %w", path, err)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, false, fmt.Errorf("DATA_DIR: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, false, fmt.Errorf("AUTH_SECRET: generating a secret: %w", err)
	}
	s := hex.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		// Another process created it first; use theirs.
		return loadSecret(lookup, cfg)
	}
	if err != nil {
		return nil, false, fmt.Errorf("AUTH_SECRET: writing %s: %w", path, err)
	}
	if _, err := f.WriteString(s + "\n"); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("AUTH_SECRET: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, false, fmt.Errorf("AUTH_SECRET: writing %s: %w", path, err)
	}
	return []byte(s), true, nil
}
