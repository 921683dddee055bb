// Package auth decides who a request comes from and what it may do (docs/security.md): API
// keys kept by the store as a hash of their secret ([Keyring]), scopes ([Scope]), projects as
// tenants, keys derived from others for browsers (stream tokens, web UI logins), and OIDC
// tokens of an identity provider ([OIDC]). The server's middleware (package server) asks it for
// a [Principal] and checks each route's rule against it.
//
// Files, by what they hold:
//
//   - scope.go: scopes and sets of them.
//   - key.go: the key format (sk_<id>_<secret>), generation and parsing.
//   - keyring.go: creating, verifying (cached, constant-time), revoking and listing keys, and
//     the batched last-use updates.
//   - principal.go: the identity a request acts as.
//   - oidc.go: OIDC/JWT bearer tokens and the rules that map their claims to a principal.
package auth
