package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/sessiond/sessiond/auth"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres"
	"github.com/sessiond/sessiond/store/sqlite"
	"github.com/sessiond/sessiond/wire"
)

func init() {
	commands["keys"] = command{summary: "make, list and revoke API keys (docs/security.md)", args: "<create|list|revoke> [key-id]",
		about: `keys create --project P --scopes read,append,command,admin [--name N] [--expires 90d]
    makes a key and prints its secret, once: the store keeps only its hash.
    --project "*" makes a key for every project.
keys list                lists the keys (never their secrets).
keys revoke <key-id>     revokes a key: it and the keys derived from it stop working.

By default the command works on the store directly (--data, or --store for PostgreSQL), so
the first key can be made before the server runs; stop a SQLite server first, or pass
--server URL (and an admin key in --api-key or SESSIOND_KEY) to go through the server's API.`,
		run: runKeys}
}

func runKeys(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	cl := newCommandLine("keys", stdout, stderr)
	fs := cl.fs
	data := fs.String("data", "./sessiond-data", "data directory of the embedded SQLite store")
	storeURL := fs.String("store", "", "a PostgreSQL URL instead of --data")
	server := fs.String("server", "", "go through this server's API instead of the store (env SESSIOND_SERVER is not used here)")
	key := fs.String("api-key", os.Getenv("SESSIOND_KEY"), "with --server: an admin key (env SESSIOND_KEY)")
	project := fs.String("project", "", `create: the project the key may act on ("*": every project)`)
	scopes := fs.String("scopes", "", "create: comma-separated scopes: read, append, command, admin")
	name := fs.String("name", "", "create: a label for people")
	expires := fs.String("expires", "", "create: lifetime, e.g. 90d or 720h (default: until revoked)")
	asJSON := fs.Bool("json", false, "print JSON for programs instead of text for people")
	pos, code, ok := cl.parse(args)
	if !ok {
		return code
	}
	verb := pos[0]
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	createOnly := []string{"project", "scopes", "name", "expires"}
	switch verb {
	case "create":
		if len(pos) > 1 {
			return cl.usageError(fmt.Sprintf("unexpected argument %q: keys create takes no key id", pos[1]))
		}
		if *project == "" || *scopes == "" {
			return cl.usageError("keys create needs --project and --scopes")
		}
	case "list", "revoke":
		for _, f := range createOnly {
			if set[f] {
				return cl.usageError(fmt.Sprintf("--%s is a flag of keys create, not keys %s", f, verb))
			}
		}
		if verb == "revoke" && len(pos) != 2 {
			return cl.usageError("keys revoke needs the key's id (keys list shows it)")
		}
		if verb == "list" && len(pos) > 1 {
			return cl.usageError(fmt.Sprintf("unexpected argument %q: keys list takes none", pos[1]))
		}
	default:
		return cl.usageError(fmt.Sprintf("unknown verb %q: keys takes create, list or revoke", verb))
	}
	if *server != "" && (set["data"] || set["store"]) {
		return cl.usageError("--server goes through the API; --data and --store go to the store: give one")
	}
	ctx := context.Background()
	var k keyBackend
	if *server != "" {
		k = httpKeys{client.New(*server, nil).WithKey(*key)}
	} else {
		st, code := openKeyStore(ctx, *data, *storeURL, stderr)
		if st == nil {
			return code
		}
		defer st.Close()
		k = storeKeys{auth.NewKeyring(st, auth.KeyringOptions{})}
	}
	switch verb {
	case "create":
		req := wire.CreateKeyRequest{Name: *name, Project: *project, ExpiresIn: *expires}
		for _, s := range strings.Split(*scopes, ",") {
			if s = strings.TrimSpace(s); s != "" {
				req.Scopes = append(req.Scopes, s)
			}
		}
		ck, err := k.create(ctx, req)
		if err != nil {
			return keysFail(stderr, "keys create", err)
		}
		if *asJSON {
			printJSON(stdout, ck)
			return 0
		}
		fmt.Fprintf(stdout, "%s\n", ck.Secret)
		fmt.Fprintf(stderr, "key %s: project %s, scopes %s%s\nThe line above is the key; it is not shown again. Send it as Authorization: Bearer <key>, or set SESSIOND_KEY for the CLI.\n",
			ck.Key.ID, ck.Key.Project, strings.Join(ck.Key.Scopes, ","), expiry(ck.Key))
	case "list":
		ks, err := k.list(ctx)
		if err != nil {
			return keysFail(stderr, "keys list", err)
		}
		if *asJSON {
			printJSON(stdout, wire.KeyList{Keys: ks})
			return 0
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tPROJECT\tSCOPES\tCREATED\tEXPIRES\tLAST USED\tREVOKED")
		for _, key := range ks {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", key.ID, orDash(key.Name), key.Project, strings.Join(key.Scopes, ","),
				key.CreatedAt, orDash(key.ExpiresAt), orDash(key.LastUsedAt), orDash(key.RevokedAt))
		}
		tw.Flush()
	case "revoke":
		rk, err := k.revoke(ctx, pos[1])
		if err != nil {
			return keysFail(stderr, "keys revoke", err)
		}
		if *asJSON {
			printJSON(stdout, rk)
			return 0
		}
		fmt.Fprintf(stdout, "key %s revoked at %s\n", rk.ID, rk.RevokedAt)
	}
	return 0
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func expiry(k wire.Key) string {
	if k.ExpiresAt == "" {
		return ", no expiry"
	}
	return ", expires " + k.ExpiresAt
}

func keysFail(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "sessiond %s: %v\n", cmd, err)
	return 1
}

// openKeyStore opens the store the keys live in; nil and the exit code on failure.
func openKeyStore(ctx context.Context, data, storeURL string, stderr io.Writer) (store.Store, int) {
	if storeURL != "" {
		st, err := postgres.Open(ctx, storeURL, postgres.Options{})
		if err != nil {
			fmt.Fprintf(stderr, "sessiond keys: open store: %v\nhint: check that PostgreSQL at %s is reachable\n", err, redactURL(storeURL))
			return nil, 1
		}
		return st, 0
	}
	st, err := sqlite.Open(ctx, data, sqlite.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "sessiond keys: %v\nhint: %s; or go through the running server: sessiond keys --server URL with an admin key\n", err, dataDirHint(data))
		return nil, 1
	}
	return st, 0
}

// keyBackend is where keys are made: the store directly, or a server's API.
type keyBackend interface {
	create(ctx context.Context, req wire.CreateKeyRequest) (*wire.CreatedKey, error)
	list(ctx context.Context) ([]wire.Key, error)
	revoke(ctx context.Context, id string) (*wire.Key, error)
}

type httpKeys struct{ c *client.Client }

func (h httpKeys) create(ctx context.Context, req wire.CreateKeyRequest) (*wire.CreatedKey, error) {
	return h.c.CreateKey(ctx, req)
}

func (h httpKeys) list(ctx context.Context) ([]wire.Key, error) {
	l, err := h.c.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	return l.Keys, nil
}

func (h httpKeys) revoke(ctx context.Context, id string) (*wire.Key, error) {
	return h.c.RevokeKey(ctx, id)
}

type storeKeys struct{ kr *auth.Keyring }

func (s storeKeys) create(ctx context.Context, req wire.CreateKeyRequest) (*wire.CreatedKey, error) {
	spec := auth.KeySpec{Name: req.Name, Project: req.Project}
	var err error
	if spec.Scopes, err = auth.SetOf(req.Scopes); err != nil {
		return nil, fmt.Errorf("--scopes: %w", err)
	}
	if req.ExpiresIn != "" {
		if spec.TTL, err = auth.ParseLifetime(req.ExpiresIn); err != nil {
			return nil, fmt.Errorf("--expires: %w", err)
		}
	}
	secret, k, err := s.kr.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &wire.CreatedKey{Key: auth.WireKey(k), Secret: secret}, nil
}

func (s storeKeys) list(ctx context.Context) ([]wire.Key, error) {
	ks, err := s.kr.List(ctx, store.KeyFilter{})
	if err != nil {
		return nil, err
	}
	out := make([]wire.Key, 0, len(ks))
	for _, k := range ks {
		out = append(out, auth.WireKey(k))
	}
	return out, nil
}

func (s storeKeys) revoke(ctx context.Context, id string) (*wire.Key, error) {
	if !auth.ValidKeyID(id) {
		return nil, fmt.Errorf("%q is not a key id (16 hex digits; keys list shows them)", id)
	}
	k, err := s.kr.Revoke(ctx, id)
	if err != nil {
		return nil, err
	}
	w := auth.WireKey(k)
	return &w, nil
}
