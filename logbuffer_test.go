package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"codeauth/config"
	"codeauth/middleware"
)

// lockedBuffer is a bytes.Buffer that the test reads while the logBuffer's timer writes to it.
type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuffer) Writes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writes
}

// Access-log lines are gathered and written out together, shortly after the first of them; any
// other record (a start-up line, a warning) is written out at once with everything before it;
// Close writes out the rest, and a line logged after Close goes out at once.
func TestLogBuffer(t *testing.T) {
	var out lockedBuffer
	buf := newLogBuffer(&out, time.Hour) // no write-out by the timer before the test asks
	log := slog.New(flushingHandler{slog.NewTextHandler(buf, nil), buf})

	for i := range 100 {
		log.Info(middleware.AccessLogMessage, "n", i)
	}
	if s := out.String(); s != "" {
		t.Fatalf("access-log lines written out at once: %q", s[:min(len(s), 80)])
	}
	buf.timer.Reset(0) // the delay is over
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(out.String(), "n=99"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("access-log lines not written out when their delay was over")
		}
	}
	if w := out.Writes(); w != 1 {
		t.Fatalf("100 access-log lines took %d writes, want 1", w)
	}

	log.Info(middleware.AccessLogMessage, "path", "/before")
	log.With("component", "outbox").Warn("delivery failed")
	if s := out.String(); !strings.Contains(s, "path=/before") || !strings.Contains(s, "delivery failed") {
		t.Fatalf("a warning, and the line before it, not written out at once:\n%s", s)
	}
	log.Info(middleware.AccessLogMessage, "path", "/before-start")
	log.Info("smtp relay", "addr", "localhost:25")
	if s := out.String(); !strings.Contains(s, "path=/before-start") || !strings.Contains(s, "smtp relay") {
		t.Fatalf("an INFO record other than the access log not written out at once:\n%s", s)
	}
	log.Error(middleware.AccessLogMessage, "status", 500)
	if !strings.Contains(out.String(), "status=500") {
		t.Fatal("the access-log line of a 500 (ERROR) not written out at once")
	}

	log.Info(middleware.AccessLogMessage, "path", "/last")
	if err := buf.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "path=/last") {
		t.Fatal("Close did not write out what the buffer held")
	}
	log.Info("after the end")
	if !strings.Contains(out.String(), "after the end") {
		t.Fatal("a line logged after Close was not written out at once")
	}
}

// Records from many goroutines at once each arrive whole (run with -race).
func TestLogBuffer_Concurrent(t *testing.T) {
	var out lockedBuffer
	buf := newLogBuffer(&out, logFlushDelay)
	log := slog.New(slog.NewTextHandler(buf, nil))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				log.Info(middleware.AccessLogMessage, "line", fmt.Sprintf("%d-%d", g, i))
			}
		})
	}
	wg.Wait()
	if err := buf.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 8*500 {
		t.Fatalf("%d lines, want %d", len(lines), 8*500)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "time=") || !strings.Contains(l, "msg=request line=") {
			t.Fatalf("a line broken up: %q", l)
		}
	}
}

// A line waits no longer than the buffer's delay: the first write after a write-out schedules the
// next one.
func TestLogBuffer_WritesOutAfterItsDelay(t *testing.T) {
	var out lockedBuffer
	buf := newLogBuffer(&out, 10*time.Millisecond)
	log := slog.New(flushingHandler{slog.NewTextHandler(buf, nil), buf})
	for round := range 3 {
		log.Info(middleware.AccessLogMessage, "round", round)
		want := fmt.Sprintf("round=%d", round)
		for deadline := time.Now().Add(5 * time.Second); !strings.Contains(out.String(), want); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("an access-log line (%s) not written out within 5 s of its 10 ms delay", want)
			}
		}
	}
}

// splitWriter records each write it is given, and fails those while fail is set.
type splitWriter struct {
	mu     sync.Mutex
	writes []string
	fail   bool
}

func (w *splitWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail {
		return 0, fmt.Errorf("no space left on device")
	}
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// A record that does not fit in what is left of the buffer writes the buffer out first, so every
// write to stderr ends at the end of a record; and a write-out that fails (a full disk) loses what
// the buffer held, not every record after it.
func TestLogBuffer_WholeRecordsAndRecovery(t *testing.T) {
	var out splitWriter
	buf := newLogBuffer(&out, time.Hour)
	log := slog.New(flushingHandler{slog.NewTextHandler(buf, nil), buf})
	pad := strings.Repeat("x", 1000)
	for i := range 200 { // about 200 KB: the 64 KB buffer fills several times
		log.Info(middleware.AccessLogMessage, "n", i, "pad", pad)
	}
	if err := buf.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(out.writes) < 3 {
		t.Fatalf("%d writes for 200 KB of lines", len(out.writes))
	}
	for i, w := range out.writes {
		if !strings.HasSuffix(w, "\n") || !strings.HasPrefix(w, "time=") {
			t.Fatalf("write %d does not hold whole records: starts %q, ends %q", i, w[:min(len(w), 20)], w[max(len(w)-20, 0):])
		}
	}

	out.fail = true
	log.Info(middleware.AccessLogMessage, "path", "/lost")
	log.Warn("disk full") // its write-out fails
	out.fail = false
	log.Warn("disk freed")
	if last := out.writes[len(out.writes)-1]; !strings.Contains(last, "disk freed") {
		t.Fatalf("logging did not resume after a failed write: the last write is %q", last)
	}
}

// The logger the service runs with batches access-log lines behind the request-id handler, in
// either format, and writes them out with the next record of another kind.
func TestNewLogger_BatchesOnlyAccessLines(t *testing.T) {
	defer slog.SetDefault(slog.Default())
	for _, format := range []string{"text", "json"} {
		var out lockedBuffer
		log, buf := newLogger(config.Config{LogLevel: slog.LevelInfo, LogFormat: format}, &out)
		buf.delay = time.Hour // no write-out by the timer while the test looks
		log.With("component", "http").WithGroup("req").Info(middleware.AccessLogMessage, "path", "/api/auth/ok")
		if s := out.String(); s != "" {
			t.Fatalf("%s: an access-log line written out at once: %q", format, s)
		}
		log.Info("account created")
		if s := out.String(); !strings.Contains(s, "/api/auth/ok") || !strings.Contains(s, "account created") {
			t.Fatalf("%s: another record did not write out the access-log line before it:\n%s", format, s)
		}
		buf.Close()
	}
}
