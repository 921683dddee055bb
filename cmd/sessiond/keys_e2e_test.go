package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeysAndAuthEndToEnd makes the first key on the store before the server runs, serves with
// --auth, and uses the key from the CLI through --api-key and SESSIOND_KEY; then makes, lists and
// revokes a key through the server's API.
func TestKeysAndAuthEndToEnd(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	secret, errOut, code := runCLI(t, "", "keys", "create", "--data", data, "--project", "*", "--scopes", "read,append,command,admin", "--name", "ops")
	secret = strings.TrimSpace(secret)
	if code != 0 || !strings.HasPrefix(secret, "sk_") || !strings.Contains(errOut, "it is not shown again") {
		t.Fatalf("keys create: %d %q %q", code, secret, errOut)
	}
	if _, errOut, code := runCLI(t, "", "keys", "list", "--data", data, "--scopes", "read"); code != 2 || !strings.Contains(errOut, "--scopes is a flag of keys create") {
		t.Errorf("keys list --scopes: %d %q", code, errOut)
	}
	out, _, code := runCLI(t, "", "keys", "list", "--data", data)
	if code != 0 || !strings.Contains(out, "ops") || strings.Contains(out, secret[20:]) {
		t.Errorf("keys list: %d %q", code, out)
	}

	url, _, _ := startServe(t, "--data", data, "--auth")
	if _, errOut, code := runCLI(t, "", "list", "--server", url); code != 1 || !strings.Contains(errOut, "UNAUTHENTICATED") {
		t.Errorf("list without a key: %d %q", code, errOut)
	}
	if out, errOut, code := runCLI(t, "", "list", "--server", url, "--api-key", secret); code != 0 {
		t.Errorf("list with --api-key: %d %q %q", code, out, errOut)
	}
	t.Setenv("SESSIOND_KEY", secret)
	if out, errOut, code := runCLI(t, "", "list", "--server", url); code != 0 {
		t.Errorf("list with SESSIOND_KEY: %d %q %q", code, out, errOut)
	}

	// Through the API: a key of one project, listed, then revoked.
	out, errOut, code = runCLI(t, "", "keys", "create", "--server", url, "--project", "alpha", "--scopes", "read", "--expires", "90d", "--json")
	if code != 0 {
		t.Fatalf("keys create --server: %d %q", code, errOut)
	}
	var ck struct {
		Key    struct{ ID, ExpiresAt string }
		Secret string
	}
	if err := json.Unmarshal([]byte(out), &ck); err != nil || ck.Key.ExpiresAt == "" {
		t.Fatalf("keys create --json: %v %q", err, out)
	}
	if out, _, code := runCLI(t, "", "keys", "list", "--server", url); code != 0 || !strings.Contains(out, ck.Key.ID) {
		t.Errorf("keys list --server: %d %q", code, out)
	}
	if out, errOut, code := runCLI(t, "", "keys", "revoke", "--server", url, ck.Key.ID); code != 0 || !strings.Contains(out, "revoked at") {
		t.Errorf("keys revoke --server: %d %q %q", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, "", "list", "--server", url, "--api-key", ck.Secret); code != 1 || !strings.Contains(errOut, "revoked") {
		t.Errorf("list with the revoked key: %d %q", code, errOut)
	}
}
