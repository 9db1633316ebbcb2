package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	netmail "net/mail"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"codeauth/auth"
	"codeauth/i18n"
	"codeauth/mail"
)

// option is one environment variable: its name, its default, how it is read and checked, and the
// line that documents it. The table below is the one place each of these is written: Load reads
// the environment through it and Markdown prints the README's table from it.
type option struct {
	// name is the environment variable.
	name string
	// def is the value used when the variable is unset or blank, written as an operator would
	// write it; set reads it like any other value, so the default and its documentation cannot
	// disagree. Empty when the option has no plain default.
	def string
	// shown is the README's default column when def alone does not say it (a derived or
	// generated value), in markdown.
	shown string
	// doc is the README's meaning column, in markdown.
	doc string
	// raw reads the variable as written: not trimmed, and set to the empty string is a value
	// (an empty cookie prefix is refused rather than replaced by the default).
	raw bool
	// set parses and checks v and stores it in c; v is "" when the variable is unset and there is
	// no def. The error says what is wrong without naming the variable, which Load adds; an
	// errors.Join reports each of its errors on its own line. Nil for a variable that Load does
	// not read in the table's order (AUTH_SECRET) or that the Go runtime reads (GOMEMLIMIT).
	set func(c *Config, v string) error
}

// DefaultMemoryLimit is the Go runtime's soft memory limit unless GOMEMLIMIT sets another. The
// service's live heap is 10-15 MB under load; without a limit the collector lets garbage grow to
// twice it between cycles, and the process passes 60 MB. With it the process peaked at 58-60 MB
// (scripts/bench, every mode). The mapped binary is about 24 MB of that, so the heap gets the rest,
// and the lower the limit the more often the collector runs: 40 MiB gave 60-61 MB, 36 MiB 55-57
// MB for 11 % more CPU a bearer read, 38 MiB 4 %. It is soft: a larger live heap is never refused.
const DefaultMemoryLimit = 38 << 20

// options are the service's settings, in the order Load reads them and the README lists them.
// An option that another's check reads comes before it (PORT before AUTH_URL, DATABASE_URL before
// RATE_LIMIT_STORE, EMAIL_PROVIDER_API_KEY and SMTP_URL before EMAIL_FROM); AUTH_SECRET, listed with the
// origin it belongs to, is read last of all (Load says why).
//
// The domain's own defaults (the failure cap, the deletion grace) are auth's constants: config
// sits above auth in the layering (server -> config -> auth), and auth never imports config, so
// the import adds no cycle and each number is written once.
var options = []option{
	{name: "PORT", def: "3000", doc: "Port to listen on.",
		set: func(c *Config, v string) error {
			p, err := strconv.Atoi(v)
			if err != nil || p < 1 || p > 65535 {
				return fmt.Errorf("%q is not a port number (1-65535)", v)
			}
			c.Port = p
			return nil
		}},
	{name: "SHUTDOWN_DELAY", def: "0s",
		doc: "How long, once told to stop (SIGTERM, SIGINT), the service keeps serving while `/readyz` answers 503, before it stops taking connections and finishes the requests in flight: time for a load balancer or Kubernetes to stop sending it new ones, so a rolling update refuses none. Set it above the time your balancer takes to notice (`5s` on Kubernetes, as `deploy/kubernetes.yaml` does); a second signal ends the wait. At most 60s.",
		set: func(c *Config, v string) error {
			d, err := parseDuration(v)
			if err != nil || d < 0 || d > time.Minute {
				return fmt.Errorf("%q must be a duration from 0s to 60s", v)
			}
			c.ShutdownDelay = d
			return nil
		}},
	{name: "AUTH_URL", shown: "`http://localhost:$PORT`",
		doc: "Public origin of the service (`https://auth.example.com`). `https` turns on `Secure` cookies with the `__Secure-` name prefix, and makes `AUTH_SECRET` mandatory.",
		set: func(c *Config, v string) error {
			c.BaseURL = fmt.Sprintf("http://localhost:%d", c.Port)
			if v != "" {
				origin, err := parseBaseURL(v)
				if err != nil {
					return err
				}
				c.BaseURL = origin
			}
			c.Secure = strings.HasPrefix(c.BaseURL, "https://")
			return nil
		}},
	{name: "AUTH_SECRET", shown: "generated",
		doc: fmt.Sprintf("Signs session cookies; every other key (code HMAC, cookie-cache encryption) is derived from it. At least %d bytes (`openssl rand -base64 32`). Required with an https `AUTH_URL`. For local use without one, a random secret is generated once into `data/%s` (mode 0600, never in the repository) with a warning.", MinSecretLength, secretFileName)},
	{name: "AUTH_TRUSTED_ORIGINS",
		doc: "Extra trusted origins, comma-separated (`https://app.example.com,myapp://`), for CORS, the origin check and redirect targets. Exact origins only; wildcards are refused.",
		set: func(c *Config, v string) error {
			var errs []error
			for _, item := range splitList(v) {
				origin, err := parseTrustedOrigin(item)
				if err != nil {
					errs = append(errs, fmt.Errorf("%q: %w", item, err))
					continue
				}
				c.TrustedOrigins = append(c.TrustedOrigins, origin)
			}
			return errors.Join(errs...)
		}},
	{name: "AUTH_DISABLE_SIGNUP", def: "false",
		doc: "`true`: only existing accounts sign in, and no new account is made. Nothing tells whether an address has an account: a code is asked for as usual (and sent only to an address with one), and a verification that would create an account fails as a wrong code does.",
		set: func(c *Config, v string) error { return parseSwitch(v, &c.SignUp.Closed) }},
	{name: "AUTH_ALLOWED_EMAIL_DOMAINS",
		doc: "Domains, comma-separated (`example.com,example.org`): new accounts only for addresses at these (exactly, not their subdomains); existing accounts of other domains still sign in. The same rules as `AUTH_DISABLE_SIGNUP` keep it from telling who has an account.",
		set: func(c *Config, v string) error {
			var errs []error
			for _, item := range splitList(v) {
				domain, ok := auth.NormalizeDomain(item)
				if !ok {
					errs = append(errs, fmt.Errorf("%q is not a domain", item))
					continue
				}
				c.SignUp.Domains = append(c.SignUp.Domains, domain)
			}
			return errors.Join(errs...)
		}},
	{name: "AUTH_AUDIT_RETENTION", def: hours(auth.DefaultAuditRetention), shown: days(hours(auth.DefaultAuditRetention), auth.DefaultAuditRetention),
		doc: "How long the audit log keeps its events (sign-ins, sign-outs, revocations, address changes, consent, deletions, every admin action), each with its time, actor, account, address, user agent and request id; the prune job removes older ones.",
		set: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 24*time.Hour {
				return fmt.Errorf("%q must be a duration of at least 24h", v)
			}
			c.AuditRetention = d
			return nil
		}},
	{name: "AUTH_ADMIN_EMAILS",
		doc: "Addresses, comma-separated, whose accounts get the admin role when they are created or next sign in: how a fresh install gets its first admin (they may sign up even with `AUTH_DISABLE_SIGNUP` or `AUTH_ALLOWED_EMAIL_DOMAINS`). Each grant is in the audit log (`admin.role_set`, no actor, `\"by\": \"AUTH_ADMIN_EMAILS\"`). Removing an address later does not take the role away (`set-role` does); while it is listed, a `set-role` demotion lasts only until its next sign-in.",
		set: func(c *Config, v string) error {
			var errs []error
			for _, item := range splitList(v) {
				email, err := auth.NormalizeEmail(item)
				if err != nil {
					errs = append(errs, fmt.Errorf("%q: %w", item, err))
					continue
				}
				c.AdminEmails = append(c.AdminEmails, email)
			}
			return errors.Join(errs...)
		}},
	{name: "AUTH_TRUSTED_PROXIES",
		doc: "IPs and CIDRs of proxies in front of the service, comma-separated, or `" + NoProxy + "` when clients connect directly (see *Client addresses*). Unset, the service trusts a single `X-Forwarded-For`, and says so in a warning at start when it listens beyond loopback.",
		set: func(c *Config, v string) error {
			var errs []error
			proxies := splitList(v)
			for _, item := range proxies {
				if strings.EqualFold(item, NoProxy) {
					if len(proxies) > 1 {
						errs = append(errs, fmt.Errorf("%q stands alone: it says no proxy is in front, so it cannot come with proxies", item))
					}
					c.NoProxy = true
					continue
				}
				prefix, err := parseProxy(item)
				if err != nil {
					errs = append(errs, fmt.Errorf("%q is not an IP address or CIDR network (or %q for none)", item, NoProxy))
					continue
				}
				c.TrustedProxies = append(c.TrustedProxies, prefix)
			}
			return errors.Join(errs...)
		}},
	{name: "EMAIL_PROVIDER_API_KEY",
		doc: "A Resend API key: e-mail goes through Resend's official SDK. Unset: `SMTP_URL`'s relay, else the console mailer (one line per e-mail on stdout). The start-up log names the transport chosen.",
		set: func(c *Config, v string) error { c.EmailProviderAPIKey = v; return nil }},
	{name: "SMTP_URL",
		doc: "An SMTP relay, used when no API key is set: `smtp://user:password@host:587` (STARTTLS, required) or `smtps://user:password@host:465` (TLS from the first byte); user and password percent-encoded. `?starttls=opportunistic` uses STARTTLS only when offered, `?starttls=off` never (a relay on the same host only). The login uses the strongest mechanism offered, PLAIN and LOGIN only over TLS. Certificates are checked against the system's roots (`SSL_CERT_FILE` adds a private CA). Connections are reused across messages; each message's `Message-ID` is its outbox id.",
		set: func(c *Config, v string) error {
			if v == "" {
				return nil
			}
			if _, err := mail.CheckSMTPURL(v); err != nil {
				return err
			}
			c.SMTPURL = v
			if u, _ := url.Parse(v); u.Query().Get("starttls") == "off" && !loopbackHost(u.Hostname()) {
				c.Warnings = append(c.Warnings, "SMTP_URL has starttls=off to "+u.Hostname()+
					", which is not this host: the relay password, every code and every link cross the network unencrypted")
			}
			return nil
		}},
	{name: "EMAIL_FROM", doc: "The sender, required with a key or `SMTP_URL` (`Acme <auth@acme.example>`).",
		set: func(c *Config, v string) error {
			c.EmailFrom = v
			var errs []error
			switch {
			case c.EmailProviderAPIKey != "" && v == "":
				errs = append(errs, errors.New("required with EMAIL_PROVIDER_API_KEY, e.g. \"Acme <auth@acme.example>\""))
			case c.SMTPURL != "" && v == "":
				errs = append(errs, errors.New("required with SMTP_URL, e.g. \"Acme <auth@acme.example>\""))
			case v != "":
				if _, err := netmail.ParseAddress(v); err != nil {
					errs = append(errs, fmt.Errorf("%q is not an address, e.g. \"Acme <auth@acme.example>\"", v))
				}
			}
			if strings.ContainsAny(v, "\r\n") {
				errs = append(errs, errors.New("must be one line"))
			}
			return errors.Join(errs...)
		}},
	{name: "EMAIL_PROVIDER_URL", shown: "Resend's",
		doc: "Another API address for the provider (a compatible endpoint, or a local fake in tests).",
		set: func(c *Config, v string) error {
			if v == "" {
				return nil
			}
			if u, err := url.Parse(v); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return fmt.Errorf("%q is not an http(s) URL", v)
			}
			c.EmailProviderURL = v
			return nil
		}},
	{name: "EMAIL_TEMPLATES_DIR",
		doc: "A folder of e-mail templates that replace the built-in ones: `<kind>.<language>.<part>` for one language, `<kind>.<part>` for all (the one naming its language wins), the part being `subject`, `html` or `txt` (see *E-mail templates*). Checked at start: a broken template stops the service with its file and line.",
		set: func(c *Config, v string) error {
			if v == "" {
				return nil
			}
			t, err := mail.LoadTemplates(v)
			if err != nil {
				return err
			}
			c.EmailTemplates = t
			return nil
		}},
	{name: "WEBHOOK_URL",
		doc: "Endpoints, comma-separated, that receive the lifecycle events (`user.created`, `user.deleted`, `user.email_changed`, `user.banned`, `session.created`, `session.revoked`, `consent.granted`, `consent.withdrawn`) as Standard Webhooks: signed, queued in the change's transaction, retried for 3 days, at least once each with a `webhook-id` to deduplicate by.",
		set: func(c *Config, v string) error {
			var errs []error
			for i, item := range splitList(v) {
				if err := mail.CheckWebhookURL(item); err != nil {
					// Named by its place and host only: its path, query or user part may hold
					// the receiver's credentials, and this error goes to the log.
					errs = append(errs, fmt.Errorf("endpoint %d (host %q) %w", i+1, mail.EndpointHost(item), err))
					continue
				}
				c.WebhookURLs = append(c.WebhookURLs, item)
			}
			return errors.Join(errs...)
		}},
	{name: "WEBHOOK_SECRET",
		doc: "The signing secret, required with `WEBHOOK_URL`: `whsec_` and the base64 of 24 to 64 random bytes (`echo whsec_$(openssl rand -base64 32)`); receivers verify `webhook-signature` with it.",
		set: func(c *Config, v string) error {
			switch {
			case v == "" && len(c.WebhookURLs) > 0:
				return errors.New("required with WEBHOOK_URL (echo whsec_$(openssl rand -base64 32))")
			case v != "":
				if err := mail.CheckWebhookSecret(v); err != nil {
					return err
				}
			}
			c.WebhookSecret = v
			return nil
		}},
	{name: "AUTH_EMAIL_CHANGE_LINK", def: "true",
		doc: "`false` switches the link-based e-mail change of the web off (`POST /api/auth/change-email` answers 400 `VERIFICATION_EMAIL_NOT_ENABLED`); the app's code-based change stays.",
		set: func(c *Config, v string) error { return parseSwitch(v, &c.EmailChangeLinks) }},
	{name: "AUTH_NEW_DEVICE_NOTICE", def: "true",
		doc: "E-mails an account when it signs in from a browser or app (its family and system, not its version) it has not used for 90 days, naming the device, the time and the network and linking to the devices card; not on an account's first sign-in. `false` turns it off, and no devices are recorded.",
		set: func(c *Config, v string) error { return parseSwitch(v, &c.NewDeviceNotice) }},
	{name: "AUTH_SIGNIN_LINK", def: "false",
		doc: "`true` puts a sign-in link in the code e-mail beside the code: it opens a page that signs in when its button is pressed (so mail scanners that open links cannot use it), with the code's own expiry, attempts and single use. Opened in the browser that asked for the code it signs in at once; elsewhere it first names the device that asked.",
		set: func(c *Config, v string) error { return parseSwitch(v, &c.SignInLinks) }},
	{name: "AUTH_DELETION_GRACE", def: hours(auth.DefaultDeletionGrace), shown: days(hours(auth.DefaultDeletionGrace), auth.DefaultDeletionGrace),
		doc: "How long a deleted account can be restored by signing in, before the nightly purge removes it.",
		set: func(c *Config, v string) error {
			d, err := parseDuration(v)
			if err != nil || d < time.Hour {
				return fmt.Errorf("%q must be a number of seconds or a Go duration of at least an hour", v)
			}
			c.DeletionGrace = d
			return nil
		}},
	{name: "AUTH_JWT_ISSUER", shown: "the `AUTH_URL` origin",
		doc: "The `iss` claim of the JWTs of `GET /api/auth/token` and `set-auth-jwt`.",
		set: func(c *Config, v string) error { return setClaim(&c.JWTIssuer, v) }},
	{name: "AUTH_JWT_AUDIENCE", shown: "the `AUTH_URL` origin",
		doc: "The `aud` claim of the JWTs.",
		set: func(c *Config, v string) error { return setClaim(&c.JWTAudience, v) }},
	{name: "AUTH_JWT_ROTATE", def: hours(auth.DefaultJWTRotation), shown: days(hours(auth.DefaultJWTRotation), auth.DefaultJWTRotation),
		doc: fmt.Sprintf("How long a JWT signing key signs before a new one replaces it (the old one stays in the JWKS until its JWTs have expired); at least %s. `codeauth jwt:rotate` rotates at once (`--now`: replaces every key at once, for a key that may have leaked).", auth.MinJWTRotation),
		set: func(c *Config, v string) error {
			d, err := parseDuration(v)
			if err != nil || d < auth.MinJWTRotation {
				return fmt.Errorf("%q must be a number of seconds or a Go duration of at least %s", v, auth.MinJWTRotation)
			}
			c.JWTRotation = d
			return nil
		}},
	{name: "DATABASE_URL", doc: "`postgres://…` for PostgreSQL; unset for the embedded SQLite database.",
		set: func(c *Config, v string) error {
			if v == "" {
				return nil
			}
			u, err := url.Parse(v)
			switch {
			case err != nil:
				return errors.New("not a URL")
			case u.Scheme != "postgres" && u.Scheme != "postgresql":
				return fmt.Errorf("unsupported scheme %q: use a postgres:// URL, or leave it unset for the embedded SQLite database", u.Scheme)
			}
			c.DatabaseURL = v
			return nil
		}},
	{name: "DATA_DIR", def: "data", doc: "Folder of the SQLite database and the generated secret.",
		set: func(c *Config, v string) error { c.DataDir = v; return nil }},
	{name: "AUTH_COOKIE_PREFIX", def: "auth", raw: true,
		doc: "Cookie names are `<prefix>.session_token` and `<prefix>.session_data`.",
		set: func(c *Config, v string) error {
			if !cookiePrefixPattern.MatchString(v) {
				return fmt.Errorf("%q must be 1-40 letters, digits, '.', '_' or '-'", v)
			}
			c.CookiePrefix = v
			return nil
		}},
	{name: "AUTH_SESSION_MAX_AGE", def: seconds(DefaultSessionMaxAge), shown: days(seconds(DefaultSessionMaxAge), DefaultSessionMaxAge),
		doc: "Absolute session cap from sign-in, in seconds or as a Go duration (`2160h`).",
		set: func(c *Config, v string) error {
			d, err := parseDuration(v)
			if err != nil || d < time.Minute {
				return fmt.Errorf("%q must be a number of seconds or a Go duration of at least one minute", v)
			}
			c.SessionMaxAge = d
			return nil
		}},
	{name: "AUTH_MAX_FAILED_VERIFICATIONS", def: strconv.Itoa(auth.DefaultMaxFailedVerifications),
		doc: "Consecutive failed verifications for one address, across codes, before it is locked for the rest of 24 hours (1–100).",
		set: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 100 {
				return fmt.Errorf("%q must be a whole number from 1 to 100 (NIST SP 800-63B allows at most 100)", v)
			}
			c.MaxFailedVerifications = n
			return nil
		}},
	{name: "RATE_LIMIT_STORE", def: "memory",
		doc: "`postgres` keeps the per-IP counters in PostgreSQL (the `auth_throttle` counter table, one atomic upsert a request, exact across instances) so a fleet shares them; needs a postgres `DATABASE_URL`.",
		set: func(c *Config, v string) error {
			switch v = strings.ToLower(v); v {
			case "memory":
			case "postgres":
				if c.DatabaseURL == "" {
					return errors.New("postgres needs DATABASE_URL to be a postgres:// URL")
				}
			default:
				return fmt.Errorf("%q must be memory or postgres", v)
			}
			c.RateLimitStore = v
			return nil
		}},
	{name: "SITE_NAME", def: "codeauth", doc: "Name used in e-mails.",
		set: func(c *Config, v string) error {
			if len(v) > 100 || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				return errors.New("must be at most 100 characters without control characters")
			}
			c.SiteName = v
			return nil
		}},
	{name: "SITE_PRIVACY_URL", doc: "Your privacy policy (an `https://` address, or a path of this site): linked from every page's footer.",
		set: func(c *Config, v string) (err error) { c.PrivacyURL, err = policyURL(v); return err }},
	{name: "SITE_TERMS_URL", doc: "Your terms of service (an `https://` address, or a path of this site): linked from every page's footer.",
		set: func(c *Config, v string) (err error) { c.TermsURL, err = policyURL(v); return err }},
	{name: "AUTH_DEFAULT_LOCALE", def: i18n.Reference,
		doc: "The language of pages and e-mails when neither the language switch nor the browser's `Accept-Language` asks for one the service speaks: " + codes() + ". A new account keeps the language it signed up in for its e-mails.",
		set: func(c *Config, v string) error {
			l, ok := i18n.Lookup(v)
			if !ok {
				return fmt.Errorf("%q is not a language of the service: %s", v, strings.Join(i18n.Codes(), ", "))
			}
			c.DefaultLocale = l.Code()
			return nil
		}},
	{name: "METRICS_ADDR",
		doc: "Serves the Prometheus metrics (`/metrics`) on a listener of its own at this host:port (`127.0.0.1:9090`), never on the public one; unauthenticated, so bind it to a private address. Empty: no metrics listener, and requests are not timed.",
		set: func(c *Config, v string) error {
			if v == "" {
				return nil
			}
			if _, port, err := net.SplitHostPort(v); err != nil || port == "" {
				return fmt.Errorf("%q must be a host:port such as 127.0.0.1:9090", v)
			}
			c.MetricsAddr = v
			return nil
		}},
	{name: "OTEL_EXPORTER_OTLP_ENDPOINT",
		doc: "Exports OpenTelemetry traces (a span per request and per database round trip) over OTLP/HTTP to this collector (`http://127.0.0.1:4318`); `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` does the same for traces alone. The exporter's other standard variables apply (`OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`). Unset: no tracing, and nothing is spent on it.",
		set: func(c *Config, v string) error {
			c.Tracing = c.Tracing || v != ""
			return nil
		}},
	{name: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		doc: "The collector for traces alone (OTLP/HTTP, the full URL, `http://127.0.0.1:4318/v1/traces`); either variable turns tracing on.",
		set: func(c *Config, v string) error {
			c.Tracing = c.Tracing || v != ""
			return nil
		}},
	{name: "OTEL_SDK_DISABLED",
		doc: "`true` turns tracing off whatever the endpoint says (the OpenTelemetry standard variable).",
		set: func(c *Config, v string) error {
			c.TracingDisabled = strings.EqualFold(v, "true")
			return nil
		}},
	{name: "DEBUG_PPROF_ADDR",
		doc: "Serves Go's profiler (`/debug/pprof/`) on this address, for measuring; loopback addresses only (`127.0.0.1:6060`).",
		set: func(c *Config, v string) error {
			if v == "" {
				return nil
			}
			host, _, err := net.SplitHostPort(v)
			if ip, perr := netip.ParseAddr(host); err != nil || (host != "localhost" && (perr != nil || !ip.IsLoopback())) {
				return fmt.Errorf("%q must be a loopback host:port such as 127.0.0.1:6060", v)
			}
			c.PprofAddr = v
			return nil
		}},
	{name: "LOG_LEVEL", def: "info", doc: "`debug`/`info`/`warn`/`error`.",
		set: func(c *Config, v string) error {
			switch v = strings.ToLower(v); v {
			case "debug":
				c.LogLevel = slog.LevelDebug
			case "info":
				c.LogLevel = slog.LevelInfo
			case "warn", "warning":
				c.LogLevel = slog.LevelWarn
			case "error":
				c.LogLevel = slog.LevelError
			default:
				return fmt.Errorf("%q must be debug, info, warn or error", v)
			}
			return nil
		}},
	{name: "LOG_FORMAT", def: "text", doc: "`text` or `json`.",
		set: func(c *Config, v string) error {
			switch v = strings.ToLower(v); v {
			case "text", "json":
				c.LogFormat = v
			default:
				return fmt.Errorf("%q must be text or json", v)
			}
			return nil
		}},
	{name: "GOMEMLIMIT", shown: fmt.Sprintf("`%dMiB`", DefaultMemoryLimit>>20),
		doc: "The Go runtime's soft memory limit; with the default the process peaked at 58-60 MB at full load. Raise it to trade memory for a little CPU: the collector runs less often."},
}

// setClaim stores v, a JWT claim an operator chose, in *dst; unset leaves it empty, which means
// the AUTH_URL origin.
func setClaim(dst *string, v string) error {
	if len(v) > 2048 || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return errors.New("must be at most 2048 characters without control characters")
	}
	*dst = v
	return nil
}

// codes lists the languages for the README, in markdown: `de`, `en`, `es`, `fr`.
func codes() string {
	out := make([]string, 0, len(i18n.Codes()))
	for _, c := range i18n.Codes() {
		out = append(out, "`"+c+"`")
	}
	return strings.Join(out, ", ")
}

// hours writes d as a whole number of hours, the way an operator writes a long duration.
func hours(d time.Duration) string { return strconv.FormatInt(int64(d/time.Hour), 10) + "h" }

// seconds writes d as a whole number of seconds.
func seconds(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }

// days is the README's default column for a duration written as v: v, then d in days.
func days(v string, d time.Duration) string {
	return fmt.Sprintf("`%s` (%d days)", v, d/(24*time.Hour))
}

// Markdown returns the README's configuration table: one row per option, in the order Load reads
// them. A test keeps README.md equal to it, and `codeauth config` prints it.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| Variable | Default | Meaning |\n|---|---|---|\n")
	for _, o := range options {
		def := o.shown
		switch {
		case def != "":
		case o.def != "":
			def = "`" + o.def + "`"
		default:
			def = "–"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", o.name, def, o.doc)
	}
	return b.String()
}

// parseSwitch reads an on/off option into dst: true, 1, yes, on or false, 0, no, off.
func parseSwitch(v string, dst *bool) error {
	switch v = strings.ToLower(v); v {
	case "true", "1", "yes", "on":
		*dst = true
	case "false", "0", "no", "off":
		*dst = false
	default:
		return fmt.Errorf("%q must be true or false", v)
	}
	return nil
}

// loopbackHost reports whether host names this machine (localhost or a loopback address).
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// policyURL checks the address of a policy the footer links: an absolute http(s) URL with a host,
// or a path of this site ("/privacy"), never a scheme a link could run ("javascript:").
func policyURL(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "//") && !strings.ContainsAny(v, "\\ \t\r\n") {
		return v, nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.ContainsAny(v, " \t\r\n") {
		return "", errors.New("must be an http(s) address or a path starting with /")
	}
	return v, nil
}
