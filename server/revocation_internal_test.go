package server

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/sessiond/sessiond/auth"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres"
	"github.com/sessiond/sessiond/store/sqlite"
)

// BenchmarkCredentialCheck measures one check of the open streams' keys (revocation.go):
// 1,000 streams held by 200 keys and a stream token of each (400 ids, one read), on
// SQLite and, with SESSIOND_TEST_POSTGRES, PostgreSQL. The server makes one such check every
// credentialCheckInterval while any stream is open.
func BenchmarkCredentialCheck(b *testing.B) {
	opens := map[string]func(b *testing.B) store.Store{
		"sqlite": func(b *testing.B) store.Store {
			st, err := sqlite.Open(context.Background(), b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			return st
		},
	}
	if url := os.Getenv("SESSIOND_TEST_POSTGRES"); url != "" {
		opens["postgres"] = func(b *testing.B) store.Store {
			st, err := postgres.Open(context.Background(), url, postgres.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return st
		}
	}
	for name, open := range opens {
		b.Run(name, func(b *testing.B) {
			st := open(b)
			defer st.Close()
			ctx := context.Background()
			kr := auth.NewKeyring(st, auth.KeyringOptions{})
			w := newCredentialWatch(kr, slog.New(slog.DiscardHandler))
			var ps []auth.Principal
			for range 200 {
				key, _, err := kr.Create(ctx, auth.KeySpec{Project: "bench", Scopes: auth.AllScopes})
				if err != nil {
					b.Fatal(err)
				}
				p, err := kr.Verify(ctx, key)
				if err != nil {
					b.Fatal(err)
				}
				tok, _, err := kr.Derive(ctx, p, auth.KeySpec{Scopes: p.Scopes, TTL: 3600e9, Session: "S"})
				if err != nil {
					b.Fatal(err)
				}
				tp, err := kr.Verify(ctx, tok)
				if err != nil {
					b.Fatal(err)
				}
				ps = append(ps, p, tp)
			}
			for i := range 1000 {
				w.watch(ps[i%len(ps)])
			}
			b.ResetTimer()
			for b.Loop() {
				w.check()
			}
			if len(w.streams) != 1000 {
				b.Fatalf("%d streams watched after the checks, want 1000 (none lapsed)", len(w.streams))
			}
		})
	}
}
