package middleware

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"codeauth/auth"

	"github.com/gofiber/fiber/v2"
)

// Rule is one per-IP limit: at most Max requests per Window from one client address.
type Rule struct {
	Name   string
	Max    int
	Window time.Duration
}

// The per-IP limits (CONTRACT.md "Limits").
var (
	// RuleDefault covers every API request: 100 per minute per address.
	RuleDefault = Rule{Name: "api", Max: 100, Window: 60 * time.Second}
	// RuleSendCode covers requests for a code: 20 per minute per address.
	RuleSendCode = Rule{Name: "send-code", Max: 20, Window: 60 * time.Second}
	// RuleSignIn covers code verifications: 30 per minute per address.
	RuleSignIn = Rule{Name: "sign-in", Max: 30, Window: 60 * time.Second}
)

// unresolvedKey is the one bucket per rule that requests without a resolvable address share:
// limited, never unlimited.
const unresolvedKey = "unresolved"

// RateStore counts requests per key in fixed windows.
type RateStore interface {
	// Take counts one request for key under rule at now and reports whether it is within the
	// limit, and when the key's window ends.
	Take(key string, rule Rule, now time.Time) (allowed bool, resetAt time.Time, err error)
}

// RateLimiter enforces Rules per client address (RateKey) on the routes it guards.
type RateLimiter struct {
	store    RateStore
	now      func() time.Time
	observer Observer
}

// NewRateLimiter returns a limiter counting in store, reading time from now, and telling
// observer (when not nil) of each request it refuses.
func NewRateLimiter(store RateStore, now func() time.Time, observer Observer) *RateLimiter {
	if now == nil {
		now = time.Now
	}
	return &RateLimiter{store: store, now: now, observer: observer}
}

// Limit returns a handler that counts each request under rule and refuses the ones over the
// limit with an auth.RateLimitError (429 with Retry-After and X-Retry-After).
func (l *RateLimiter) Limit(rule Rule) fiber.Handler {
	return func(c *fiber.Ctx) error {
		key := RateKey(c)
		if key == "" {
			key = unresolvedKey
		}
		now := l.now()
		allowed, resetAt, err := l.store.Take(rule.Name+"|"+key, rule, now)
		if err != nil {
			return err
		}
		if !allowed {
			if l.observer != nil {
				l.observer.Refused(rule.Name)
			}
			wait := resetAt.Sub(now)
			if wait < time.Second {
				wait = time.Second
			}
			return &auth.RateLimitError{RetryAfter: wait}
		}
		return c.Next()
	}
}

// MemoryRateStore keeps counters in memory, in shards so that requests rarely wait for each
// other. It holds at most maxKeys keys: expired windows are swept when a shard fills up, and if
// the shard is still full some live windows are dropped, so a flood of addresses cannot grow
// memory without bound. Dropping a live window early can only let that address start again;
// the database-backed limits (per address and per code) do not depend on it.
type MemoryRateStore struct {
	shards   []rateShard
	seed     maphash.Seed
	perShard int
}

type rateShard struct {
	mu sync.Mutex
	// buckets are keyed by their key's hash (maphash, seeded at random per process: two keys
	// share a counter with a chance of one in 2^64 a pair, which no client can aim at), and hold
	// their counters by value, so the map has no pointers: the collector never scans it, and a
	// key costs no allocation of its own.
	buckets map[uint64]rateBucket
	_       [48]byte // keep shards on separate cache lines
}

type rateBucket struct {
	count   int
	resetAt int64 // unix nanoseconds
}

// DefaultMaxRateKeys bounds the in-memory limiter: about 4 MB at most.
const DefaultMaxRateKeys = 100_000

const rateShards = 64

// NewMemoryRateStore returns a store holding at most maxKeys keys.
func NewMemoryRateStore(maxKeys int) *MemoryRateStore {
	if maxKeys < rateShards {
		maxKeys = rateShards
	}
	s := &MemoryRateStore{shards: make([]rateShard, rateShards), seed: maphash.MakeSeed(), perShard: maxKeys / rateShards}
	for i := range s.shards {
		s.shards[i].buckets = make(map[uint64]rateBucket)
	}
	return s
}

// Take counts one request.
func (s *MemoryRateStore) Take(key string, rule Rule, now time.Time) (bool, time.Time, error) {
	h := maphash.String(s.seed, key)
	sh := &s.shards[h%rateShards]
	n := now.UnixNano()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b, ok := sh.buckets[h]
	if !ok {
		if len(sh.buckets) >= s.perShard {
			sh.evict(n, s.perShard)
		}
		b = rateBucket{resetAt: n + int64(rule.Window)}
	} else if n >= b.resetAt {
		b.count, b.resetAt = 0, n+int64(rule.Window)
	}
	b.count++
	sh.buckets[h] = b
	return b.count <= rule.Max, time.Unix(0, b.resetAt), nil
}

// evict makes room in a full shard: expired windows first, then arbitrary live ones (Go's map
// order), down to three quarters of the capacity so eviction is not paid on every insert.
func (sh *rateShard) evict(now int64, capacity int) {
	for k, b := range sh.buckets {
		if now >= b.resetAt {
			delete(sh.buckets, k)
		}
	}
	excess := len(sh.buckets) - capacity*3/4
	for k := range sh.buckets {
		if excess <= 0 {
			break
		}
		delete(sh.buckets, k)
		excess--
	}
}

// Len is the number of keys held.
func (s *MemoryRateStore) Len() int {
	n := 0
	for i := range s.shards {
		s.shards[i].mu.Lock()
		n += len(s.shards[i].buckets)
		s.shards[i].mu.Unlock()
	}
	return n
}

// CountFunc counts one request for key in one atomic step shared by every instance: the key's
// count in its current window goes up by one, or starts again at 1 in a window ending at resetAt
// when the key's window has passed at now. It returns the count and when the window ends.
type CountFunc func(ctx context.Context, key string, resetAt, now time.Time) (count int, windowEnd time.Time, err error)

// sharedStoreTimeout bounds one counter update, so a stalled database cannot park requests.
const sharedStoreTimeout = 2 * time.Second

// sharedRateKeyPrefix starts the keys of the per-IP counters in the database's counter table,
// apart from the rules' own per-address counters there.
const sharedRateKeyPrefix = "ip:"

// SharedRateStore keeps the per-IP counters in the database (RATE_LIMIT_STORE=postgres), so every
// instance of a fleet counts in the same buckets: one atomic upsert per request (CountFunc),
// exact across any number of instances. Counters whose window has passed go with the prune.
type SharedRateStore struct {
	count CountFunc
}

// NewSharedRateStore counts with count.
func NewSharedRateStore(count CountFunc) *SharedRateStore {
	return &SharedRateStore{count: count}
}

// Take counts one request.
func (s *SharedRateStore) Take(key string, rule Rule, now time.Time) (bool, time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), sharedStoreTimeout)
	defer cancel()
	n, end, err := s.count(ctx, sharedRateKeyPrefix+key, now.Add(rule.Window), now)
	if err != nil {
		return false, time.Time{}, err
	}
	return n <= rule.Max, end, nil
}
