package middleware

import (
	"context"
	"encoding/binary"
	"errors"
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
	mu      sync.Mutex
	buckets map[string]*rateBucket
	_       [48]byte // keep shards on separate cache lines
}

type rateBucket struct {
	count   int
	resetAt int64 // unix nanoseconds
}

// DefaultMaxRateKeys bounds the in-memory limiter: about 20 MB at most.
const DefaultMaxRateKeys = 100_000

const rateShards = 64

// NewMemoryRateStore returns a store holding at most maxKeys keys.
func NewMemoryRateStore(maxKeys int) *MemoryRateStore {
	if maxKeys < rateShards {
		maxKeys = rateShards
	}
	s := &MemoryRateStore{shards: make([]rateShard, rateShards), seed: maphash.MakeSeed(), perShard: maxKeys / rateShards}
	for i := range s.shards {
		s.shards[i].buckets = make(map[string]*rateBucket)
	}
	return s
}

// Take counts one request.
func (s *MemoryRateStore) Take(key string, rule Rule, now time.Time) (bool, time.Time, error) {
	sh := &s.shards[maphash.String(s.seed, key)%rateShards]
	n := now.UnixNano()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := sh.buckets[key]
	if b == nil {
		if len(sh.buckets) >= s.perShard {
			sh.evict(n, s.perShard)
		}
		b = &rateBucket{resetAt: n + int64(rule.Window)}
		sh.buckets[key] = b
	} else if n >= b.resetAt {
		b.count, b.resetAt = 0, n+int64(rule.Window)
	}
	b.count++
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

// KVStorage is the storage interface of Fiber's middleware, with contexts, which
// gofiber/storage/postgres implements.
type KVStorage interface {
	GetWithContext(ctx context.Context, key string) ([]byte, error)
	SetWithContext(ctx context.Context, key string, val []byte, exp time.Duration) error
}

// sharedStoreTimeout bounds one counter update, so a stalled database cannot park requests.
const sharedStoreTimeout = 2 * time.Second

// SharedRateStore keeps counters in a Fiber storage (RATE_LIMIT_STORE=postgres) so every
// instance of a fleet sees the same buckets. The storage's Set overwrites, so the count is exact
// within an instance (a lock per shard serialises read and write) and approximate across
// instances, which per-IP limits can afford: the exact limits are in auth_throttle. Rows expire
// with their window and the storage deletes them every minute.
type SharedRateStore struct {
	kv    KVStorage
	locks [rateShards]sync.Mutex
	seed  maphash.Seed
}

// NewSharedRateStore counts in kv.
func NewSharedRateStore(kv KVStorage) *SharedRateStore {
	return &SharedRateStore{kv: kv, seed: maphash.MakeSeed()}
}

// Take counts one request.
func (s *SharedRateStore) Take(key string, rule Rule, now time.Time) (bool, time.Time, error) {
	mu := &s.locks[maphash.String(s.seed, key)%rateShards]
	mu.Lock()
	defer mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), sharedStoreTimeout)
	defer cancel()
	n := now.UnixNano()
	var count, resetAt int64
	raw, err := s.kv.GetWithContext(ctx, "rl:"+key)
	if err != nil {
		return false, time.Time{}, err
	}
	if len(raw) == 16 {
		count, resetAt = int64(binary.BigEndian.Uint64(raw)), int64(binary.BigEndian.Uint64(raw[8:]))
	} else if len(raw) != 0 {
		return false, time.Time{}, errors.New("ratelimit: malformed counter")
	}
	if n >= resetAt {
		count, resetAt = 0, n+int64(rule.Window)
	}
	count++
	buf := make([]byte, 16)
	binary.BigEndian.PutUint64(buf, uint64(count))
	binary.BigEndian.PutUint64(buf[8:], uint64(resetAt))
	if err := s.kv.SetWithContext(ctx, "rl:"+key, buf, time.Duration(resetAt-n)+time.Second); err != nil {
		return false, time.Time{}, err
	}
	return count <= int64(rule.Max), time.Unix(0, resetAt), nil
}
