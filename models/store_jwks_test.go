package models

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Of the instances that add the same generation of signing key at once, exactly one row goes
// in and exactly one caller is told so; the others read the winner's key.
func TestStoreAddSigningKeyOnePerGeneration(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store, another func() *Store) {
		ctx := context.Background()
		stores := []*Store{s, another()}
		now := time.Now().UTC().Truncate(time.Microsecond)
		var wg sync.WaitGroup
		won := make([]bool, 8)
		for i := range won {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := SigningKey{ID: "kid-" + string(rune('a'+i)), Generation: 1, Algorithm: "EdDSA",
					PublicKey: []byte{1}, PrivateKey: []byte{2}, ActiveFrom: now, CreatedAt: now}
				ok, err := stores[i%2].AddSigningKey(ctx, key)
				if err != nil {
					t.Error(err)
				}
				won[i] = ok
			}()
		}
		wg.Wait()
		winners := 0
		for _, ok := range won {
			if ok {
				winners++
			}
		}
		keys, err := s.SigningKeys(ctx)
		if err != nil || winners != 1 || len(keys) != 1 {
			t.Fatalf("%d callers told they won, %d keys (%v), want one of each", winners, len(keys), err)
		}
		next := keys[0]
		next.ID, next.Generation = "kid-next", 2
		if ok, err := s.AddSigningKey(ctx, next); !ok || err != nil {
			t.Fatalf("the next generation: %v, %v", ok, err)
		}
		if keys, _ = s.SigningKeys(ctx); len(keys) != 2 || keys[0].ID != "kid-next" {
			t.Fatalf("keys %v, want the newest generation first", keys)
		}
		if n, err := s.DeleteSigningKeys(ctx, []string{keys[1].ID}); n != 1 || err != nil {
			t.Fatalf("delete: %d, %v", n, err)
		}
		if n, err := s.DeleteSigningKeys(ctx, nil); n != 0 || err != nil {
			t.Fatalf("delete none: %d, %v", n, err)
		}
	})
}
