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
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"codeauth/auth"
	"codeauth/mail"
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
	// ShutdownDelay is how long the service keeps serving, not ready, once told to stop
	// (SHUTDOWN_DELAY).
	ShutdownDelay time.Duration
	// BaseURL is the public origin of the service (AUTH_URL), without a trailing slash.
	BaseURL string
	// Secure reports whether BaseURL is https, which turns on Secure and __Secure- cookies.
	Secure bool
	// Secret signs session cookies and derives every other key (AUTH_SECRET).
	Secret []byte
	// NewDeviceNotice is AUTH_NEW_DEVICE_NOTICE.
	NewDeviceNotice bool
	// SignInLinks is AUTH_SIGNIN_LINK.
	SignInLinks bool
	// AuditRetention is AUTH_AUDIT_RETENTION.
	AuditRetention time.Duration
	// SignUp is who may create an account: AUTH_DISABLE_SIGNUP and AUTH_ALLOWED_EMAIL_DOMAINS.
	SignUp auth.SignUpPolicy
	// AdminEmails are AUTH_ADMIN_EMAILS, normalised.
	AdminEmails []string
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
	// SMTPURL is the relay used without an API key (SMTP_URL).
	SMTPURL string
	// WebhookURLs are the endpoints of the lifecycle events (WEBHOOK_URL); WebhookSecret signs
	// them (WEBHOOK_SECRET).
	WebhookURLs   []string
	WebhookSecret string
	// EmailChangeLinks enables the link-based e-mail change of the web (AUTH_EMAIL_CHANGE_LINK).
	EmailChangeLinks bool
	// DeletionGrace is how long a deleted account can be restored (AUTH_DELETION_GRACE).
	DeletionGrace time.Duration
	// JWTIssuer is the iss claim of the JWTs (AUTH_JWT_ISSUER); empty means BaseURL.
	JWTIssuer string
	// JWTAudience is the aud claim of the JWTs (AUTH_JWT_AUDIENCE); empty means BaseURL.
	JWTAudience string
	// JWTRotation is how long a JWT signing key signs before the next (AUTH_JWT_ROTATE).
	JWTRotation time.Duration
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
	// PrivacyURL and TermsURL are the operator's privacy policy and terms, linked from every
	// page's footer when set (SITE_PRIVACY_URL, SITE_TERMS_URL).
	PrivacyURL, TermsURL string
	// DefaultLocale is the language of pages and e-mails when neither the language switch nor
	// the browser asks for one the service speaks (AUTH_DEFAULT_LOCALE).
	DefaultLocale string
	// EmailTemplates are the e-mail templates with the replacements in EMAIL_TEMPLATES_DIR,
	// loaded and checked; nil when it is unset (the embedded ones).
	EmailTemplates *mail.Templates
	// Tracing says an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or its _TRACES_ form), and
	// TracingDisabled that OTEL_SDK_DISABLED=true turns it off all the same (TracingOn).
	Tracing, TracingDisabled bool
	// MetricsAddr, when set, serves the Prometheus metrics on a listener of its own there
	// (METRICS_ADDR).
	MetricsAddr string
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

// Load builds the configuration from the environment, option by option (options.go). Every
// invalid variable is reported, each error naming its variable. Load may create DataDir and, when
// AUTH_SECRET is unset and AUTH_URL is plain http (local use), a random secret kept in DataDir.
func Load(lookup LookupFunc) (Config, error) {
	var cfg Config
	for _, o := range options {
		if o.set != nil && o.def != "" {
			if err := o.set(&cfg, o.def); err != nil {
				return Config{}, fmt.Errorf("config: the default of %s: %w", o.name, err)
			}
		}
	}
	var errs []error
	for _, o := range options {
		if o.set == nil {
			continue
		}
		v, ok := lookup(o.name)
		if !o.raw {
			v = strings.TrimSpace(v)
			ok = v != ""
		}
		if !ok {
			if o.def != "" {
				continue // set above
			}
			v = ""
		}
		if err := o.set(&cfg, v); err != nil {
			errs = append(errs, named(o.name, err)...)
		}
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
	if cfg.Secure && cfg.EmailProviderAPIKey == "" && cfg.SMTPURL == "" {
		cfg.Warnings = append(cfg.Warnings,
			"neither EMAIL_PROVIDER_API_KEY nor SMTP_URL is set: sign-in codes are written to the server console, not e-mailed")
	}

	if len(errs) > 0 {
		return Config{}, fmt.Errorf("invalid configuration: %w", errors.Join(errs...))
	}
	return cfg, nil
}

// named prefixes each of err's problems (one, or each of an errors.Join) with the variable's
// name, so every line of the report says which variable it is about.
func named(name string, err error) []error {
	problems := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		problems = joined.Unwrap()
	}
	out := make([]error, len(problems))
	for i, p := range problems {
		out[i] = fmt.Errorf("%s: %w", name, p)
	}
	return out
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

// TracingOn reports whether the service exports traces: an OTLP endpoint is set and the SDK is
// not disabled.
func (c Config) TracingOn() bool { return c.Tracing && !c.TracingDisabled }
