package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"codeauth/middleware"
)

// logFlushDelay is how long a log line may wait in logBuffer before it is written out.
const logFlushDelay = 100 * time.Millisecond

// logBufferSize is logBuffer's buffer: a record that does not fit in what is left of it writes
// the buffer out first, so no record is split between two writes.
const logBufferSize = 64 << 10

// logBuffer is where the service's log records go before stderr. At the default level every
// request writes an access-log line, and a system call of its own for each was about a fifth of a
// cookie-cache read's CPU; so access-log lines are gathered and written out together,
// logFlushDelay after the first of them, when the buffer fills, with the next record of another
// kind (flushingHandler writes the buffer out after each), and when the command ends (Close). The
// price: a crash or a kill loses the access-log lines not yet written out, normally those of its
// last logFlushDelay; every other record is out already.
type logBuffer struct {
	mu     sync.Mutex
	dst    io.Writer
	w      *bufio.Writer
	timer  *time.Timer
	delay  time.Duration // logFlushDelay but in tests
	closed bool
}

// newLogBuffer returns a logBuffer in front of dst that writes a line out at most delay after it
// came.
func newLogBuffer(dst io.Writer, delay time.Duration) *logBuffer {
	b := &logBuffer{dst: dst, w: bufio.NewWriterSize(dst, logBufferSize), delay: delay}
	b.timer = time.AfterFunc(time.Hour, func() { _ = b.Flush() })
	b.timer.Stop()
	return b
}

// Write adds p, one record, to the buffer, and schedules its write-out. After Close it writes
// p out at once.
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(p) > b.w.Available() && b.w.Buffered() > 0 {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
	}
	first := b.w.Buffered() == 0 // the first line since the last write-out schedules the next
	n, err := b.w.Write(p)
	if err != nil {
		b.w.Reset(b.dst)
		return n, err
	}
	switch {
	case b.closed:
		err = b.flushLocked()
	case first && b.w.Buffered() > 0:
		b.timer.Reset(b.delay)
	}
	return n, err
}

// Flush writes out what the buffer holds.
func (b *logBuffer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}

// flushLocked is Flush with b.mu held. A write-out that fails drops what the buffer held rather
// than every record after it (bufio.Writer keeps its first error), so logging resumes once
// stderr takes writes again (a full disk freed, say).
func (b *logBuffer) flushLocked() error {
	err := b.w.Flush()
	if err != nil {
		b.w.Reset(b.dst)
	}
	return err
}

// Close writes out what the buffer holds; later records are written out one by one.
func (b *logBuffer) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.timer.Stop()
	return b.Flush()
}

// flushingHandler writes a logBuffer out after each record but an access-log line below WARN, so
// that start-up lines, job reports, warnings and errors are seen at once and survive a crash
// that follows them.
type flushingHandler struct {
	slog.Handler
	buf *logBuffer
}

// Handle passes r on, and writes the buffer out unless r is an access-log line below WARN.
func (h flushingHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Message != middleware.AccessLogMessage || r.Level >= slog.LevelWarn {
		if ferr := h.buf.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

// WithAttrs keeps the write-out on the handler with attrs.
func (h flushingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return flushingHandler{h.Handler.WithAttrs(attrs), h.buf}
}

// WithGroup keeps the write-out on the handler with the group.
func (h flushingHandler) WithGroup(name string) slog.Handler {
	return flushingHandler{h.Handler.WithGroup(name), h.buf}
}
