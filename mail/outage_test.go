package mail

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"codeauth/models"
)

// A worker that cannot reach the database says so as a warning once, then once a minute while
// the outage lasts, never at each of its passes, and says when it gets through again.
func TestOutageLog_WarnsOnceAMinuteAndSaysWhenItEnds(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	ctx := context.Background()
	cause := fmt.Errorf("claiming: %w", models.ErrUnavailable)
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var l outageLog
	l.ended(ctx, log, models.EmailQueue, start) // no outage: nothing to say
	for i := range 30 {
		l.failed(ctx, log, models.EmailQueue, start.Add(time.Duration(i)*time.Second), cause)
	}
	if got := strings.Count(out.String(), "level=WARN"); got != 1 {
		t.Fatalf("30 failed passes in 30 s: %d warnings, want 1:\n%s", got, out.String())
	}
	l.failed(ctx, log, models.EmailQueue, start.Add(61*time.Second), cause)
	if got := strings.Count(out.String(), "level=WARN"); got != 2 {
		t.Fatalf("a pass a minute later: %d warnings, want 2:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), "failed_passes=31") || !strings.Contains(out.String(), "the database is unavailable") {
		t.Fatalf("the repeated warning does not count the passes or give the cause:\n%s", out.String())
	}
	l.ended(ctx, log, models.EmailQueue, start.Add(70*time.Second))
	l.ended(ctx, log, models.EmailQueue, start.Add(71*time.Second))
	if got := strings.Count(out.String(), "database available again"); got != 1 || !strings.Contains(out.String(), "unavailable_for=1m10s") {
		t.Fatalf("the end of the outage: said %d times:\n%s", got, out.String())
	}
	if strings.Contains(out.String(), "level=ERROR") {
		t.Fatalf("an outage logged as an error:\n%s", out.String())
	}
	// A new outage is warned about at once.
	l.failed(ctx, log, models.EmailQueue, start.Add(72*time.Second), cause)
	if got := strings.Count(out.String(), "level=WARN"); got != 3 {
		t.Fatalf("a new outage: %d warnings, want 3", got)
	}
	// A clock set back does not silence the outage until it catches up: the next pass warns.
	l.failed(ctx, log, models.EmailQueue, start.Add(10*time.Second), cause)
	if got := strings.Count(out.String(), "level=WARN"); got != 4 {
		t.Fatalf("after the clock went back: %d warnings, want 4", got)
	}
}
