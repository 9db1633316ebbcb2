// Package lograte keeps a failure that repeats (a database outage met by every request, a timer
// that retries every 100 ms) to one log line an interval, so that an outage is said, and goes on
// being said, without burying the log.
package lograte

import (
	"sync/atomic"
	"time"
)

// Repeat is how often the service says again that a failure it has already logged goes on.
const Repeat = time.Minute

// Limit lets one log line through per Repeat. Its zero value lets the first through. It is safe
// for concurrent use: of callers that meet it at once, one is let through.
type Limit struct {
	// last is when a line was last let through, Unix nanoseconds; 0 means never.
	last atomic.Int64
}

// Allow reports whether a line may be written at now: the first time, once Repeat has passed
// since the last line let through, or when the clock has been set back by more than Repeat
// before that line. A now a little before the last line's is within its Repeat too: requests
// read the time when they start and fail in any order, and one that started earlier but failed
// later must not say it again.
func (l *Limit) Allow(now time.Time) bool {
	n, last := now.UnixNano(), l.last.Load()
	if last != 0 && n-last < int64(Repeat) && last-n <= int64(Repeat) {
		return false
	}
	return l.last.CompareAndSwap(last, n)
}

// Reset lets the next line through, as after the failure has ended.
func (l *Limit) Reset() { l.last.Store(0) }
