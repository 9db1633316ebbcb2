package middleware

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestMemoryRateStore_FixedWindow(t *testing.T) {
	s := NewMemoryRateStore(DefaultMaxRateKeys)
	rule := Rule{Name: "t", Max: 3, Window: time.Minute}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 1; i <= 5; i++ {
		ok, reset, _ := s.Take("k", rule, now.Add(time.Duration(i)*time.Second))
		if ok != (i <= 3) || !reset.Equal(now.Add(time.Second+time.Minute)) {
			t.Fatalf("request %d: allowed=%v reset=%v", i, ok, reset)
		}
	}
	if ok, _, _ := s.Take("other", rule, now); !ok {
		t.Fatal("keys are not independent")
	}
	if ok, _, _ := s.Take("k", rule, now.Add(61*time.Second)); !ok {
		t.Fatal("the window did not reset")
	}
}

// Catalogue D41: under parallel load exactly Max requests pass.
func TestMemoryRateStore_ExactUnderConcurrency(t *testing.T) {
	s := NewMemoryRateStore(DefaultMaxRateKeys)
	rule := Rule{Name: "t", Max: 10, Window: time.Minute}
	now := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	passed := 0
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, _, _ := s.Take("k", rule, now); ok {
				mu.Lock()
				passed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if passed != 10 {
		t.Fatalf("%d passed, want 10", passed)
	}
}

// Catalogue D42: one million distinct client addresses cannot grow the limiter past its cap.
func TestMemoryRateStore_BoundedUnderAFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("floods a million keys")
	}
	s := NewMemoryRateStore(DefaultMaxRateKeys)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	now := time.Now()
	for i := 0; i < 1_000_000; i++ {
		key := fmt.Sprintf("api|%d.%d.%d.%d", i>>24&255, i>>16&255, i>>8&255, i&255)
		s.Take(key, RuleDefault, now.Add(time.Duration(i)*time.Microsecond))
		if i%100_000 == 0 && s.Len() > DefaultMaxRateKeys {
			t.Fatalf("%d keys after %d addresses, cap %d", s.Len(), i, DefaultMaxRateKeys)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("1,000,000 addresses: %d keys held (cap %d), heap grew %.1f MB", s.Len(), DefaultMaxRateKeys, float64(grown)/1e6)
	if s.Len() > DefaultMaxRateKeys {
		t.Fatalf("%d keys held, cap %d", s.Len(), DefaultMaxRateKeys)
	}
	if grown > 64<<20 {
		t.Fatalf("heap grew %d bytes for a limiter capped at %d keys", grown, DefaultMaxRateKeys)
	}
	// A live bucket still counts after the flood.
	rule := Rule{Name: "t", Max: 1, Window: time.Hour}
	s.Take("survivor", rule, now)
	if ok, _, _ := s.Take("survivor", rule, now); ok {
		t.Fatal("a fresh bucket lost its count")
	}
}

// BenchmarkMemoryRateStore measures the per-IP check every API request pays, from many
// goroutines at once, and reports the heap the limiter holds.
func BenchmarkMemoryRateStore(b *testing.B) {
	s := NewMemoryRateStore(DefaultMaxRateKeys)
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			s.Take(fmt.Sprintf("api|10.0.%d.%d", i>>8&255, i&255), RuleDefault, now)
		}
	})
	b.ReportMetric(float64(s.Len()), "keys")
}
