package mail

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"codeauth/models"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// KindWebhook is the outbox kind of a webhook delivery: one event to one endpoint.
const KindWebhook Kind = models.OutboxKindWebhook

// Webhook delivery policy.
const (
	// WebhookRetry is how long a delivery is retried before it is given up: three days, so a
	// receiver down over a weekend loses nothing.
	WebhookRetry = 72 * time.Hour
	// webhookTimeout bounds one delivery attempt; a receiver should answer at once and do its
	// work afterwards (Standard Webhooks).
	webhookTimeout = 15 * time.Second
	// webhookMaxBackoff caps the wait between attempts: hourly once the receiver has been down for
	// a while.
	webhookMaxBackoff = time.Hour
	// minWebhookSecret and maxWebhookSecret bound the signing key's length in bytes.
	minWebhookSecret, maxWebhookSecret = 24, 64
	// webhookSecretPrefix starts a Standard Webhooks secret.
	webhookSecretPrefix = "whsec_"
)

// WebhookBackoff is the wait before webhook delivery attempt n+1 after n failures: 10 s, 20 s,
// 40 s … up to an hour.
func WebhookBackoff(attempts int) time.Duration {
	d := 5 * time.Second << min(attempts, 12)
	return min(d, webhookMaxBackoff)
}

// Webhooks delivers lifecycle events to the configured endpoints (WEBHOOK_URL), signed and shaped
// as the Standard Webhooks specification says: a JSON body {type, timestamp, data}, and the
// webhook-id (the event's, the same on every retry, for deduplication), webhook-timestamp (of the
// attempt) and webhook-signature (v1, HMAC-SHA256 of id.timestamp.body under WEBHOOK_SECRET)
// headers. Redirects are not followed; any 2xx answer is a delivery.
type Webhooks struct {
	endpoints []string
	signer    *standardwebhooks.Webhook
	client    *http.Client
	now       func() time.Time
}

// CheckWebhookURL checks one WEBHOOK_URL endpoint: an absolute http(s) URL without credentials.
func CheckWebhookURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
		return errors.New("is not an http(s) URL")
	}
	if u.User != nil {
		return errors.New("must not carry a user or password (the signature authenticates the request)")
	}
	if len(raw) > 2000 {
		return errors.New("is longer than 2,000 characters")
	}
	return nil
}

// CheckWebhookSecret checks a WEBHOOK_SECRET: whsec_ and the base64 of 24 to 64 random bytes.
func CheckWebhookSecret(secret string) error {
	_, err := webhookKey(secret)
	return err
}

func webhookKey(secret string) ([]byte, error) {
	raw, ok := strings.CutPrefix(secret, webhookSecretPrefix)
	if !ok {
		return nil, errors.New(`must start with "whsec_" (echo whsec_$(openssl rand -base64 32))`)
	}
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return nil, errors.New("must be whsec_ followed by base64 (echo whsec_$(openssl rand -base64 32))")
	}
	if len(key) < minWebhookSecret || len(key) > maxWebhookSecret {
		return nil, fmt.Errorf("must hold %d to %d bytes after whsec_ (it holds %d)", minWebhookSecret, maxWebhookSecret, len(key))
	}
	return key, nil
}

// NewWebhooks returns the deliverer for the endpoints, signing with secret, stamping attempts
// with now.
func NewWebhooks(endpoints []string, secret string, now func() time.Time) (*Webhooks, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("webhooks: no endpoint")
	}
	for _, e := range endpoints {
		if err := CheckWebhookURL(e); err != nil {
			return nil, fmt.Errorf("WEBHOOK_URL: %w", err)
		}
	}
	key, err := webhookKey(secret)
	if err != nil {
		return nil, fmt.Errorf("WEBHOOK_SECRET: %w", err)
	}
	signer, err := standardwebhooks.NewWebhookRaw(key)
	if err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	client := &http.Client{
		Transport: newHTTPTransport(),
		Timeout:   webhookTimeout,
		// A redirect could send the signed event anywhere: it is a failed delivery instead.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Webhooks{endpoints: slices.Clone(endpoints), signer: signer, client: client, now: now}, nil
}

// Endpoints are the configured endpoints, each of which gets every event.
func (w *Webhooks) Endpoints() []string { return w.endpoints }

// NewEventID makes a webhook-id: msg_ and 128 random bits, as Standard Webhooks' examples do.
func NewEventID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "msg_" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// EventBody is the JSON body of an event: {type, timestamp, data}, data holding userId and the
// event's own fields.
func EventBody(ev models.Event, at time.Time) ([]byte, error) {
	data := make(map[string]any, len(ev.Data)+1)
	for k, v := range ev.Data {
		data[k] = v
	}
	data["userId"] = ev.UserID
	return json.Marshal(struct {
		Type      string         `json:"type"`
		Timestamp time.Time      `json:"timestamp"`
		Data      map[string]any `json:"data"`
	}{ev.Type, at.UTC(), data})
}

// noWebhooksReason is the record of a webhook an instance without WEBHOOK_URL gave up: no instance
// with it delivered it in its retry time.
const noWebhooksReason = "no instance with WEBHOOK_URL delivered it in its retry time"

// errEndpointRemoved is why a delivery to an endpoint no longer configured is dropped.
var errEndpointRemoved = errors.New("the endpoint is no longer in WEBHOOK_URL")

// deliver posts one event's body to endpoint, signed for this attempt.
func (w *Webhooks) deliver(ctx context.Context, endpoint, id string, body []byte) error {
	if !slices.Contains(w.endpoints, endpoint) {
		return errEndpointRemoved
	}
	at := w.now()
	signature, err := w.signer.Sign(id, at, body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return &PermanentError{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "codeauth-webhooks")
	req.Header.Set(standardwebhooks.HeaderWebhookID, id)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(at.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, signature)
	resp, err := w.client.Do(req)
	if err != nil {
		// The URL's address, not the whole error, which may repeat a query string.
		return fmt.Errorf("webhook to %s: %w", EndpointHost(endpoint), errors.Unwrap(err))
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook to %s: HTTP %d", EndpointHost(endpoint), resp.StatusCode)
	}
	return nil
}

// EndpointHost is the host of an endpoint, for logs, errors and the record of a delivery given
// up: never its user part, path or query, which may carry credentials.
func EndpointHost(endpoint string) string {
	if u, err := url.Parse(endpoint); err == nil {
		return u.Host
	}
	return "?"
}

// webhookPayload is what a webhook delivery's row holds, sealed: the endpoint, the event's id,
// the account it is about (the lane it goes in; empty in rows of versions before lanes per
// account, which share one lane per endpoint) and its body.
type webhookPayload struct {
	Endpoint string `json:"endpoint"`
	ID       string `json:"id"`
	Account  string `json:"account,omitempty"`
	Body     []byte `json:"body"`
}

// PrepareWebhook seals the delivery of the event id about account with body, made at, to
// endpoint and returns the row that queues it, due now, for the transaction of the change to
// write. The row's recipient is the endpoint's host, for operators; the endpoint itself is in the
// sealed payload. Its created_at is at, which orders an account's deliveries to the endpoint
// (lanes).
func (o *Outbox) PrepareWebhook(endpoint, id, account string, body []byte, at time.Time) (models.OutboxMessage, error) {
	now := o.clock()
	rowID := newRowID()
	sealed, err := o.seal(rowID, webhookPayload{Endpoint: endpoint, ID: id, Account: account, Body: body}, false)
	if err != nil {
		return models.OutboxMessage{}, fmt.Errorf("mail: sealing a webhook: %w", err)
	}
	return models.OutboxMessage{
		ID: rowID, Kind: string(KindWebhook), Recipient: EndpointHost(endpoint), Payload: sealed,
		Status: models.OutboxPending, NextAttemptAt: now, CreatedAt: at.UTC().Truncate(time.Microsecond),
	}, nil
}

// SetWebhooks has the outbox deliver webhook rows through w; without it they wait.
func (o *Outbox) SetWebhooks(w *Webhooks) { o.hooks = w }

// openWebhooks opens the payloads of the batch's webhook rows still to send, for their lanes and
// their delivery; a row that cannot be opened is given up here (no retry can change a payload).
// Only an instance with webhooks has webhook rows in a batch (deliverDue claims none without).
func (o *Outbox) openWebhooks(ctx context.Context, batch []models.OutboxMessage, outcomes []outcome, errs []error) []*webhookPayload {
	hooks := make([]*webhookPayload, len(batch))
	for i, row := range batch {
		if outcomes[i] != 0 || row.Kind != string(KindWebhook) {
			continue
		}
		var p webhookPayload
		if err := o.openSealed(row, &p); err != nil {
			o.log.ErrorContext(ctx, "outbox: giving up on a webhook that cannot be opened", "id", row.ID, "error", err)
			outcomes[i], errs[i] = outcomeAbandoned, fmt.Errorf("unreadable: %w", err)
			continue
		}
		hooks[i] = &p
	}
	return hooks
}

// sendWebhook delivers one claimed webhook row, whose payload openWebhooks opened (p). A failure
// is retried (WebhookBackoff) until WebhookRetry after the event, then given up; a delivery to
// an endpoint taken out of WEBHOOK_URL is dropped.
func (o *Outbox) sendWebhook(ctx context.Context, row models.OutboxMessage, p *webhookPayload) (outcome, error) {
	sendCtx, cancel := context.WithTimeout(ctx, webhookTimeout)
	err := o.hooks.deliver(sendCtx, p.Endpoint, p.ID, p.Body)
	cancel()
	switch {
	case err == nil:
		return outcomeSent, nil
	case errors.Is(err, errEndpointRemoved):
		o.log.InfoContext(ctx, "outbox: dropping a webhook to an endpoint no longer configured", "id", row.ID, "host", row.Recipient)
		return outcomeDropped, err
	}
	var permanent *PermanentError
	if errors.As(err, &permanent) || !o.clock().Before(row.CreatedAt.Add(WebhookRetry)) {
		o.log.ErrorContext(ctx, "outbox: giving up on a webhook", "id", row.ID, "event", p.ID, "attempts", row.Attempts, "error", err)
		return outcomeAbandoned, err
	}
	o.log.WarnContext(ctx, "outbox: webhook delivery failed, will retry", "id", row.ID, "event", p.ID, "attempts", row.Attempts, "error", err)
	return outcomeFailed, err
}
