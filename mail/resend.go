package mail

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/resend/resend-go/v3"
)

// Resend delivers through Resend's official SDK. Each message's outbox id is its Idempotency-Key,
// so a message retried after a lost answer is not sent twice.
type Resend struct {
	client *resend.Client
	from   string
}

// String names the transport for the start-up log.
func (r *Resend) String() string { return "resend " + r.client.BaseURL.Host }

// NewResend returns a Resend mailer for cfg; cfg.BaseURL, when set, replaces the API address.
func NewResend(cfg ProviderConfig) (*Resend, error) {
	httpClient := &http.Client{Timeout: 15 * time.Second, Transport: statusTransport{newHTTPTransport()}}
	client := resend.NewCustomClient(httpClient, cfg.APIKey)
	if cfg.BaseURL != "" {
		u, err := url.Parse(strings.TrimSuffix(cfg.BaseURL, "/") + "/")
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("EMAIL_PROVIDER_URL: %q is not an http(s) URL", cfg.BaseURL)
		}
		client.BaseURL = u
	}
	return &Resend{client: client, from: cfg.From}, nil
}

// statusKey carries a holder for the provider's HTTP status through the SDK, whose errors do not
// say whether a failure is worth retrying.
type statusKey struct{}

type statusTransport struct{ next http.RoundTripper }

func (t statusTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if holder, ok := req.Context().Value(statusKey{}).(*int); ok && resp != nil {
		*holder = resp.StatusCode
	}
	return resp, err
}

// Send hands m to Resend. 401 and 403 refuse the credentials (CredentialsError, retried); the
// other 4xx answers but 408, 409 and 429 refuse the message itself (PermanentError); everything
// else is worth retrying.
func (r *Resend) Send(ctx context.Context, m Message) error {
	status := 0
	ctx = context.WithValue(ctx, statusKey{}, &status)
	_, err := r.client.Emails.SendWithOptions(ctx, &resend.SendEmailRequest{
		From:    r.from,
		To:      []string{m.To},
		Subject: m.Subject,
		Html:    m.HTML,
		Text:    m.Text,
		Tags:    []resend.Tag{{Name: "kind", Value: strings.ReplaceAll(string(m.Kind), "-", "_")}},
	}, &resend.SendEmailOptions{IdempotencyKey: m.ID})
	if err == nil {
		return nil
	}
	err = fmt.Errorf("resend (HTTP %d): %w", status, err)
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return &CredentialsError{Err: err}
	}
	if status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests &&
		status != http.StatusConflict {
		return &PermanentError{Err: err}
	}
	return err
}
