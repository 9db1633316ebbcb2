package lograte

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestLimitLetsOneLineThroughARepeat(t *testing.T) {
	var l Limit
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	steps := []struct {
		at   time.Duration
		want bool
	}{
		{0, true},                         // the first
		{time.Second, false},              // within the minute
		{Repeat - time.Nanosecond, false}, // still within
		{Repeat, true},                    // a minute after the first
		{Repeat + 30*time.Second, false},  // within the second minute
		{Repeat - time.Second, false},     // a caller that read the time before the last line
		{-time.Hour, true},                // the clock set back by more than a Repeat: said at once
		{-time.Hour + time.Second, false},
	}
	for _, s := range steps {
		if got := l.Allow(t0.Add(s.at)); got != s.want {
			t.Fatalf("Allow(t0%+v) = %v, want %v", s.at, got, s.want)
		}
	}
	l.Reset()
	if !l.Allow(t0.Add(-time.Hour + 2*time.Second)) {
		t.Fatal("after Reset the next line must go through")
	}
}

func TestLimitLetsOneOfConcurrentCallersThrough(t *testing.T) {
	var l Limit
	now := time.Now()
	var through atomic.Int32
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if l.Allow(now) {
				through.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := through.Load(); n != 1 {
		t.Fatalf("%d of 64 concurrent callers let through, want 1", n)
	}
}
