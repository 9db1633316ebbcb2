package config

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(vars map[string]string) LookupFunc {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

const goodSecret = "0123456789abcdef0123456789abcdef"

func TestLoad_DefaultsWithNothingSet(t *testing.T) {
	dir := t.TempDir()
	cfg, err := Load(env(map[string]string{"DATA_DIR": dir}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 3000 || cfg.BaseURL != "http://localhost:3000" || cfg.Secure || cfg.UsesPostgres() ||
		cfg.CookiePrefix != "auth" || cfg.SessionMaxAge != DefaultSessionMaxAge || cfg.SQLitePath() != filepath.Join(dir, "auth.db") {
		t.Fatalf("defaults: %+v", cfg)
	}
	// A local secret was generated, kept in the data folder with private permissions, and reused.
	info, err := os.Stat(filepath.Join(dir, secretFileName))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("secret file: %v, %v", info, err)
	}
	if len(cfg.Secret) < MinSecretLength || len(cfg.Warnings) == 0 || !strings.Contains(cfg.Warnings[0], "AUTH_SECRET") {
		t.Fatalf("secret %d bytes, warnings %v", len(cfg.Secret), cfg.Warnings)
	}
	again, err := Load(env(map[string]string{"DATA_DIR": dir}))
	if err != nil || string(again.Secret) != string(cfg.Secret) {
		t.Fatalf("second start got a different secret (%v)", err)
	}
}

func TestLoad_Values(t *testing.T) {
	cfg, err := Load(env(map[string]string{
		"PORT":                   "8080",
		"AUTH_URL":               "https://Auth.Example.com/",
		"AUTH_SECRET":            goodSecret,
		"AUTH_TRUSTED_ORIGINS":   " https://app.example.com/ , , capacitor://localhost,myapp://",
		"AUTH_TRUSTED_PROXIES":   "10.0.0.0/8, 192.168.1.7, ::ffff:172.16.0.1, 2001:db8::/32",
		"DATABASE_URL":           "postgres://u@db/app?sslmode=disable",
		"AUTH_COOKIE_PREFIX":     "myapp",
		"AUTH_SESSION_MAX_AGE":   "2592000",
		"EMAIL_PROVIDER_API_KEY": "re_123",
		"EMAIL_FROM":             "Acme <auth@acme.example>",
		"EMAIL_PROVIDER_URL":     "http://127.0.0.1:9999",
		"AUTH_EMAIL_CHANGE_LINK": "false",
		"AUTH_DELETION_GRACE":    "168h",
		"LOG_LEVEL":              "debug",
		"LOG_FORMAT":             "JSON",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 8080 || cfg.BaseURL != "https://auth.example.com" || !cfg.Secure || !cfg.UsesPostgres() ||
		cfg.CookiePrefix != "myapp" || cfg.SessionMaxAge != 30*24*time.Hour || cfg.LogFormat != "json" || cfg.EmailProviderAPIKey != "re_123" ||
		cfg.EmailFrom != "Acme <auth@acme.example>" || cfg.EmailProviderURL != "http://127.0.0.1:9999" || cfg.EmailChangeLinks || cfg.DeletionGrace != 7*24*time.Hour {
		t.Fatalf("cfg: %+v", cfg)
	}
	if got := strings.Join(cfg.TrustedOrigins, " "); got != "https://app.example.com capacitor://localhost myapp://" {
		t.Fatalf("trusted origins: %q", got)
	}
	var proxies []string
	for _, p := range cfg.TrustedProxies {
		proxies = append(proxies, p.String())
	}
	if got := strings.Join(proxies, " "); got != "10.0.0.0/8 192.168.1.7/32 172.16.0.1/32 2001:db8::/32" {
		t.Fatalf("trusted proxies: %q", got)
	}
	if cfg.NoProxy || !cfg.ProxySet() {
		t.Fatalf("proxies listed: NoProxy %v, ProxySet %v", cfg.NoProxy, cfg.ProxySet())
	}
	if d, err := Load(env(map[string]string{"AUTH_SECRET": goodSecret, "AUTH_SESSION_MAX_AGE": "720h", "PORT": "4000"})); err != nil || d.SessionMaxAge != 720*time.Hour || d.BaseURL != "http://localhost:4000" {
		t.Fatalf("duration form: %+v %v", d, err)
	} else if d.ProxySet() {
		t.Fatal("no AUTH_TRUSTED_PROXIES, yet a proxy setting")
	}
}

// AUTH_TRUSTED_PROXIES=none says clients connect directly (catalogue D35); it cannot be mixed
// with proxies.
func TestLoad_NoProxy(t *testing.T) {
	for _, v := range []string{"none", " NONE ", "None,"} {
		cfg, err := Load(env(map[string]string{"AUTH_SECRET": goodSecret, "AUTH_TRUSTED_PROXIES": v}))
		if err != nil || !cfg.NoProxy || len(cfg.TrustedProxies) != 0 || !cfg.ProxySet() {
			t.Fatalf("%q: %+v, %v", v, cfg, err)
		}
	}
	for _, v := range []string{"none, 10.0.0.0/8", "10.0.0.1,none", "nobody"} {
		if _, err := Load(env(map[string]string{"AUTH_SECRET": goodSecret, "AUTH_TRUSTED_PROXIES": v})); err == nil || !strings.Contains(err.Error(), "AUTH_TRUSTED_PROXIES") {
			t.Fatalf("%q: %v, want an error naming the variable", v, err)
		}
	}
}

// Every bad variable is reported, by name; the https rules refuse a missing or short secret
// (catalogue P125).
func TestLoad_ErrorsNameTheVariable(t *testing.T) {
	cases := map[string]map[string]string{
		"PORT":                   {"PORT": "http"},
		"AUTH_URL":               {"AUTH_URL": "auth.example.com"},
		"AUTH_SECRET":            {"AUTH_URL": "https://auth.example.com"},
		"AUTH_TRUSTED_ORIGINS":   {"AUTH_TRUSTED_ORIGINS": "*"},
		"AUTH_TRUSTED_PROXIES":   {"AUTH_TRUSTED_PROXIES": "10.0.0.0/33"},
		"DATABASE_URL":           {"DATABASE_URL": "mysql://x"},
		"AUTH_COOKIE_PREFIX":     {"AUTH_COOKIE_PREFIX": "a b"},
		"AUTH_SESSION_MAX_AGE":   {"AUTH_SESSION_MAX_AGE": "-5"},
		"LOG_LEVEL":              {"LOG_LEVEL": "loud"},
		"SITE_NAME":              {"SITE_NAME": "a\nb"},
		"EMAIL_FROM":             {"EMAIL_PROVIDER_API_KEY": "re_1"},
		"EMAIL_PROVIDER_URL":     {"EMAIL_PROVIDER_URL": "ftp://x"},
		"AUTH_EMAIL_CHANGE_LINK": {"AUTH_EMAIL_CHANGE_LINK": "maybe"},
		"AUTH_DELETION_GRACE":    {"AUTH_DELETION_GRACE": "5m"},
		"DEBUG_PPROF_ADDR":       {"DEBUG_PPROF_ADDR": "0.0.0.0:6060"},
		"SITE_PRIVACY_URL":       {"SITE_PRIVACY_URL": "javascript:alert(1)"},
		"SITE_TERMS_URL":         {"SITE_TERMS_URL": "//evil.example/terms"},
	}
	for name, vars := range cases {
		vars["DATA_DIR"] = t.TempDir()
		if _, err := Load(env(vars)); err == nil || !strings.Contains(err.Error(), name+":") {
			t.Errorf("%s: error %v does not name the variable", name, err)
		}
	}
	for _, secret := range []string{"", "short", strings.Repeat("x", MinSecretLength-1)} {
		_, err := Load(env(map[string]string{"AUTH_URL": "https://auth.example.com", "AUTH_SECRET": secret}))
		if err == nil || !strings.Contains(err.Error(), "AUTH_SECRET") {
			t.Errorf("https with secret %q: %v", secret, err)
		}
	}
	for _, origins := range []string{"https://*", "https://*.example.com", "https://app.example.com/path", "notanorigin"} {
		if _, err := Load(env(map[string]string{"AUTH_SECRET": goodSecret, "AUTH_TRUSTED_ORIGINS": origins})); err == nil {
			t.Errorf("AUTH_TRUSTED_ORIGINS=%q accepted", origins)
		}
	}
	// The profiler is served on loopback addresses only.
	for addr, ok := range map[string]bool{"127.0.0.1:6060": true, "localhost:6060": true, "[::1]:6060": true,
		":6060": false, "10.0.0.1:6060": false, "example.com:6060": false, "127.0.0.1": false} {
		cfg, err := Load(env(map[string]string{"AUTH_SECRET": goodSecret, "DEBUG_PPROF_ADDR": addr}))
		if (err == nil) != ok || (ok && cfg.PprofAddr != addr) {
			t.Errorf("DEBUG_PPROF_ADDR=%q: %v, %q", addr, err, cfg.PprofAddr)
		}
	}
	// Several problems are all reported at once.
	_, err := Load(env(map[string]string{"PORT": "0", "LOG_FORMAT": "xml", "AUTH_SECRET": goodSecret}))
	if err == nil || !strings.Contains(err.Error(), "PORT:") || !strings.Contains(err.Error(), "LOG_FORMAT:") {
		t.Fatalf("combined errors: %v", err)
	}
}

// A configuration that fails does not write a secret into the data folder.
func TestLoad_NoSideEffectsOnError(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(env(map[string]string{"DATA_DIR": dir, "PORT": "x"})); err == nil {
		t.Fatal("bad PORT accepted")
	}
	if _, err := os.Stat(filepath.Join(dir, secretFileName)); !os.IsNotExist(err) {
		t.Fatalf("secret written despite the error: %v", err)
	}
}

// SMTP_URL is checked at start: its scheme, port and settings; a bad one names the variable and
// never repeats the password. EMAIL_FROM is required with it, and a relay reached unencrypted
// over the network is warned about.
func TestLoad_SMTPURL(t *testing.T) {
	cfg, err := Load(env(map[string]string{"AUTH_SECRET": goodSecret, "SMTP_URL": "smtp://u:p%40ss@mail.example.com:2525", "EMAIL_FROM": "Acme <auth@acme.example>"}))
	if err != nil || cfg.SMTPURL != "smtp://u:p%40ss@mail.example.com:2525" || len(cfg.Warnings) != 0 {
		t.Fatalf("%+v %v", cfg, err)
	}
	for raw, want := range map[string]string{
		"http://mail.example.com":                          "scheme",
		"smtp://u:hunter2@mail.example.com:99999":          "port",
		"smtp://:hunter2@mail.example.com":                 "without a user name",
		"smtp://u:hunter2@mail.example.com?tls=no":         "unknown setting",
		"smtp://u:hunter2@mail.example.com?starttls=maybe": "starttls",
		"smtps://u:hunter2@mail.example.com?starttls=off":  "no meaning",
		"smtp://u:hunter2@mail.example.com/path":           "nothing else",
		"smtp://u:hunter2@%zz":                             "not a URL",
	} {
		_, err := Load(env(map[string]string{"AUTH_SECRET": goodSecret, "SMTP_URL": raw, "EMAIL_FROM": "a@acme.example"}))
		if err == nil || !strings.Contains(err.Error(), "SMTP_URL:") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an SMTP_URL error about %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error repeats the password: %v", raw, err)
		}
	}
	if _, err := Load(env(map[string]string{"AUTH_SECRET": goodSecret, "SMTP_URL": "smtp://mail.example.com"})); err == nil || !strings.Contains(err.Error(), "EMAIL_FROM: required with SMTP_URL") {
		t.Fatalf("SMTP_URL without EMAIL_FROM: %v", err)
	}
	if _, err := Load(env(map[string]string{"AUTH_SECRET": goodSecret, "SMTP_URL": "smtp://mail.example.com", "EMAIL_FROM": "not an address"})); err == nil || !strings.Contains(err.Error(), "EMAIL_FROM:") {
		t.Fatalf("a sender that is no address: %v", err)
	}
	cfg, err = Load(env(map[string]string{"AUTH_SECRET": goodSecret, "SMTP_URL": "smtp://mail.example.com?starttls=off", "EMAIL_FROM": "a@acme.example"}))
	if err != nil || len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], "unencrypted") {
		t.Fatalf("starttls=off to another host: %v %q", err, cfg.Warnings)
	}
	cfg, err = Load(env(map[string]string{"AUTH_SECRET": goodSecret, "SMTP_URL": "smtp://127.0.0.1:25?starttls=off", "EMAIL_FROM": "a@acme.example"}))
	if err != nil || len(cfg.Warnings) != 0 {
		t.Fatalf("starttls=off on this host: %v %q", err, cfg.Warnings)
	}
}

// A refused WEBHOOK_URL is named by its place and host in the error, which goes to the log: its
// user part, path and query may hold the receiver's credentials (review of issue 17).
func TestLoad_WebhookURLErrorsKeepItsSecrets(t *testing.T) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 32))
	for _, url := range []string{
		"https://user:hunter2pw@app.example.com/hooks",
		"ftp://app.example.com/hooks?token=hunter2tok",
		"https://app.example.com/hooks?token=hunter2tok#frag",
		"https://ok.example.com, ht!tp://hunter2x",
	} {
		_, err := Load(env(map[string]string{"AUTH_SECRET": goodSecret, "WEBHOOK_URL": url, "WEBHOOK_SECRET": secret}))
		if err == nil || !strings.Contains(err.Error(), "WEBHOOK_URL") {
			t.Fatalf("%q: %v, want a WEBHOOK_URL error", url, err)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("the error quotes a secret of the URL: %v", err)
		}
	}
}

// WEBHOOK_URL takes http(s) endpoints without credentials; WEBHOOK_SECRET is required with it,
// in the Standard Webhooks form (whsec_ and base64 of 24-64 bytes).
func TestLoad_Webhooks(t *testing.T) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 32))
	cfg, err := Load(env(map[string]string{"AUTH_SECRET": goodSecret, "WEBHOOK_URL": "https://app.example.com/hooks, http://127.0.0.1:9000/x?y=1", "WEBHOOK_SECRET": secret}))
	if err != nil || len(cfg.WebhookURLs) != 2 || cfg.WebhookSecret != secret {
		t.Fatalf("%+v %v", cfg.WebhookURLs, err)
	}
	for vars, want := range map[[2]string]string{
		{"ftp://x", secret}:                         "WEBHOOK_URL:",
		{"https://user:pw@app.example.com", secret}: "WEBHOOK_URL:",
		{"https://app.example.com", ""}:             "WEBHOOK_SECRET: required",
		{"https://app.example.com", "secret"}:       "WEBHOOK_SECRET:",
		{"https://app.example.com", "whsec_!!"}:     "WEBHOOK_SECRET:",
		{"https://app.example.com", "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 8))}: "WEBHOOK_SECRET:",
	} {
		_, err := Load(env(map[string]string{"AUTH_SECRET": goodSecret, "WEBHOOK_URL": vars[0], "WEBHOOK_SECRET": vars[1]}))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v, want an error %q", vars, err, want)
		}
	}
}

// AUTH_DEFAULT_LOCALE is one of the service's languages, English unless set.
func TestLoad_DefaultLocale(t *testing.T) {
	base := map[string]string{"DATA_DIR": t.TempDir(), "AUTH_SECRET": goodSecret}
	cfg, err := Load(env(base))
	if err != nil || cfg.DefaultLocale != "en" {
		t.Fatalf("default: %q, %v", cfg.DefaultLocale, err)
	}
	base["AUTH_DEFAULT_LOCALE"] = " DE "
	if cfg, err := Load(env(base)); err != nil || cfg.DefaultLocale != "de" {
		t.Fatalf("de: %q, %v", cfg.DefaultLocale, err)
	}
	base["AUTH_DEFAULT_LOCALE"] = "pt"
	if _, err := Load(env(base)); err == nil || !strings.Contains(err.Error(), `AUTH_DEFAULT_LOCALE: "pt" is not a language of the service: de, en, es, fr`) {
		t.Fatalf("pt: %v", err)
	}
}

// EMAIL_TEMPLATES_DIR is loaded and checked with the rest of the configuration: a broken template
// is reported like any other bad value, with its file and line.
func TestLoad_EmailTemplatesDir(t *testing.T) {
	base := map[string]string{"DATA_DIR": t.TempDir(), "AUTH_SECRET": goodSecret}
	cfg, err := Load(env(base))
	if err != nil || cfg.EmailTemplates != nil {
		t.Fatalf("unset: %v, %v", cfg.EmailTemplates, err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "welcome.fr.subject"), []byte("Salut {{site_name}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base["EMAIL_TEMPLATES_DIR"] = dir
	if cfg, err := Load(env(base)); err != nil || cfg.EmailTemplates == nil || cfg.EmailTemplates.Dir() != dir {
		t.Fatalf("templates: %v, %v", cfg.EmailTemplates, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "welcome.html"), []byte("<p>\n{{nope}}</p>"), 0o644); err != nil {
		t.Fatal(err)
	}
	base["PORT"] = "nope"
	_, err = Load(env(base))
	for _, want := range []string{"PORT:", "EMAIL_TEMPLATES_DIR: " + filepath.Join(dir, "welcome.html") + ":2: {{nope}}"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}
