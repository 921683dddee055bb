package storetest

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sessiond/sessiond/store"
)

// testKeys checks the key store: create, look up, list with filters, revoke (first time
// kept), batched last-use updates that only move forward, and pruning of expired derived keys.
func (s *suite) testKeys(t *testing.T) {
	ctx, st, _ := s.setup(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	admin := &store.Key{ID: "k1admin", Hash: bytes.Repeat([]byte{1}, 32), Name: "ops", Project: store.AllProjects,
		Scopes: []string{"admin", "read"}, CreatedAt: at}
	team := &store.Key{ID: "k2team", Hash: bytes.Repeat([]byte{2}, 32), Name: "ci", Project: "alpha",
		Scopes: []string{"append", "read"}, CreatedAt: at.Add(time.Second), ExpiresAt: at.Add(90 * 24 * time.Hour)}
	token := &store.Key{ID: "k3token", Hash: bytes.Repeat([]byte{3}, 32), Project: "alpha", Scopes: []string{"read"},
		Session: "S-1", Parent: "k2team", CreatedAt: at.Add(2 * time.Second), ExpiresAt: at.Add(5 * time.Minute)}
	for _, k := range []*store.Key{admin, team, token} {
		if err := st.CreateKey(ctx, k); err != nil {
			t.Fatalf("CreateKey(%s): %v", k.ID, err)
		}
	}
	if err := st.CreateKey(ctx, &store.Key{ID: "k1admin", Hash: []byte{9}, Project: "x", Scopes: []string{"read"}, CreatedAt: at}); !errors.Is(err, store.ErrKeyExists) {
		t.Errorf("CreateKey with a taken id: %v, want ErrKeyExists", err)
	}
	got, err := st.Key(ctx, "k2team")
	if err != nil {
		t.Fatalf("Key: %v", err)
	}
	if d := cmp.Diff(*team, got); d != "" {
		t.Errorf("Key(k2team) differs from what was stored (-want +got):\n%s", d)
	}
	if _, err := st.Key(ctx, "nope"); !errors.Is(err, store.ErrKeyNotFound) {
		t.Errorf("Key(unknown): %v, want ErrKeyNotFound", err)
	}

	ids := func(f store.KeyFilter) []string {
		t.Helper()
		ks, err := st.ListKeys(ctx, f)
		if err != nil {
			t.Fatalf("ListKeys(%+v): %v", f, err)
		}
		var out []string
		for _, k := range ks {
			out = append(out, k.ID)
		}
		return out
	}
	for _, c := range []struct {
		f    store.KeyFilter
		want []string
	}{
		{store.KeyFilter{}, []string{"k1admin", "k2team"}},
		{store.KeyFilter{Derived: true}, []string{"k1admin", "k2team", "k3token"}},
		{store.KeyFilter{Project: "alpha"}, []string{"k2team"}},
		{store.KeyFilter{Project: "alpha", Derived: true}, []string{"k2team", "k3token"}},
		{store.KeyFilter{Project: store.AllProjects}, []string{"k1admin"}},
		{store.KeyFilter{Project: "beta"}, nil},
	} {
		if d := cmp.Diff(c.want, ids(c.f)); d != "" {
			t.Errorf("ListKeys(%+v) (-want +got):\n%s", c.f, d)
		}
	}

	// LapsedKeys: none is revoked yet; k3token expires 5 minutes after at, k2team 90 days.
	lapsed := func(now time.Time, ids ...string) []string {
		t.Helper()
		ks, err := st.LapsedKeys(ctx, ids, now)
		if err != nil {
			t.Fatalf("LapsedKeys(%v, %v): %v", ids, now, err)
		}
		var out []string
		for _, k := range ks {
			out = append(out, k.ID)
		}
		slices.Sort(out)
		return out
	}
	all := []string{"k1admin", "k2team", "k3token", "nope", "k1admin' OR '1'='1"}
	for _, c := range []struct {
		now  time.Time
		ids  []string
		want []string
	}{
		{at, all, nil},
		{at.Add(5*time.Minute - time.Millisecond), all, nil},
		{at.Add(5 * time.Minute), all, []string{"k3token"}}, // expired at its ExpiresAt
		{at.Add(91 * 24 * time.Hour), all, []string{"k2team", "k3token"}},
		{at.Add(91 * 24 * time.Hour), []string{"k2team", "k2team"}, []string{"k2team"}},
		{at.Add(91 * 24 * time.Hour), []string{"k1admin", "nope"}, nil},
		{at.Add(91 * 24 * time.Hour), nil, nil},
	} {
		if d := cmp.Diff(c.want, lapsed(c.now, c.ids...)); d != "" {
			t.Errorf("LapsedKeys(%v, at+%v) (-want +got):\n%s", c.ids, c.now.Sub(at), d)
		}
	}
	if ks, err := st.LapsedKeys(ctx, []string{"k2team"}, at.Add(91*24*time.Hour)); err != nil || len(ks) != 1 || cmp.Diff(*team, ks[0]) != "" {
		t.Errorf("LapsedKeys(k2team) = %v, %v; want the key as stored", ks, err)
	}
	if _, err := st.LapsedKeys(ctx, make([]string, store.MaxLapsedKeys+1), at); err == nil {
		t.Errorf("LapsedKeys of %d ids: no error", store.MaxLapsedKeys+1)
	}

	rev, err := st.RevokeKey(ctx, "k2team", at.Add(time.Hour))
	if err != nil {
		t.Fatalf("RevokeKey: %v", err)
	}
	if !rev.RevokedAt.Equal(at.Add(time.Hour)) {
		t.Errorf("RevokedAt = %v, want %v", rev.RevokedAt, at.Add(time.Hour))
	}
	if d := cmp.Diff([]string{"k2team"}, lapsed(at, all...)); d != "" {
		t.Errorf("LapsedKeys after a revocation (-want +got):\n%s", d)
	}
	rev, err = st.RevokeKey(ctx, "k2team", at.Add(2*time.Hour))
	if err != nil || !rev.RevokedAt.Equal(at.Add(time.Hour)) {
		t.Errorf("second RevokeKey: %v, RevokedAt %v; want the first revocation time %v kept", err, rev.RevokedAt, at.Add(time.Hour))
	}
	if _, err := st.RevokeKey(ctx, "nope", at); !errors.Is(err, store.ErrKeyNotFound) {
		t.Errorf("RevokeKey(unknown): %v, want ErrKeyNotFound", err)
	}

	used := at.Add(3 * time.Hour)
	if err := st.TouchKeys(ctx, map[string]time.Time{"k1admin": used, "k3token": used, "unknown": used}); err != nil {
		t.Fatalf("TouchKeys: %v", err)
	}
	if err := st.TouchKeys(ctx, map[string]time.Time{"k1admin": used.Add(-time.Minute)}); err != nil {
		t.Fatalf("TouchKeys (earlier): %v", err)
	}
	if k, _ := st.Key(ctx, "k1admin"); !k.LastUsedAt.Equal(used) {
		t.Errorf("LastUsedAt = %v, want %v (an earlier use must not move it back)", k.LastUsedAt, used)
	}
	if err := st.TouchKeys(ctx, nil); err != nil {
		t.Errorf("TouchKeys(nil): %v", err)
	}

	n, err := st.DeleteExpiredKeys(ctx, at.Add(time.Minute))
	if err != nil || n != 0 {
		t.Errorf("DeleteExpiredKeys before the token expired: %d, %v; want 0", n, err)
	}
	n, err = st.DeleteExpiredKeys(ctx, at.Add(365*24*time.Hour))
	if err != nil || n != 1 {
		t.Errorf("DeleteExpiredKeys after every expiry: %d, %v; want 1 (only the derived key)", n, err)
	}
	if d := cmp.Diff([]string{"k1admin", "k2team"}, ids(store.KeyFilter{Derived: true})); d != "" {
		t.Errorf("keys after pruning (-want +got):\n%s", d)
	}
}
