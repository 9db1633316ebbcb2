package auth

import (
	"sync"
	"time"
)

// revokeLocally stops this instance's cookie caches from answering for the sessions, which
// have ended, and counts them (Stats.SessionsEnded).
func (s *Service) revokeLocally(ids []string) {
	now := s.now()
	s.stats.sessionsEnded.Add(int64(len(ids)))
	for _, id := range ids {
		s.revoked.add(id, now, now.Add(CookieCacheTTL))
	}
}

// revocations remembers sessions revoked in this process until any cookie cache that could still
// vouch for them has expired, so a signed-out browser replaying its cache is refused at once.
// Other instances learn of the revocation through the database once the cache expires; a process
// started since (a restart) trusts no cache sealed before it started (Service.started).
type revocations struct {
	mu    sync.RWMutex
	until map[string]time.Time
	sweep int
}

func newRevocations() *revocations {
	return &revocations{until: map[string]time.Time{}, sweep: 1024}
}

func (r *revocations) add(id string, now, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.until) >= r.sweep {
		for k, t := range r.until {
			if !now.Before(t) {
				delete(r.until, k)
			}
		}
		r.sweep = 2 * len(r.until)
		if r.sweep < 1024 {
			r.sweep = 1024
		}
	}
	r.until[id] = until
}

func (r *revocations) has(id string, now time.Time) bool {
	r.mu.RLock()
	t, ok := r.until[id]
	r.mu.RUnlock()
	return ok && now.Before(t)
}
