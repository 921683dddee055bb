package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/sessiond/sessiond/auth"
	"github.com/sessiond/sessiond/server"
)

// authFlags are serve's flags of authentication, CORS and per-key limits (docs/security.md).
type authFlags struct {
	on           *bool
	insecureHTTP *bool
	oidcIssuer   *string
	oidcAudience *string
	oidcProject  *string
	rate         *float64
	burst        *int
	streams      *int
	cors         stringList
	cookieSecure *bool
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func addAuthFlags(fs *flag.FlagSet) *authFlags {
	a := &authFlags{
		on:           fs.Bool("auth", false, "require a credential on every request but health, the OpenAPI document and the web UI's files: an API key (sessiond keys create) or an OIDC token; needed off loopback"),
		insecureHTTP: fs.Bool("insecure-http", false, "with --auth off loopback: serve plain HTTP (keys cross the network in clear; use it behind a TLS-terminating proxy only)"),
		oidcIssuer:   fs.String("oidc-issuer", "", "also accept JWTs of this OIDC issuer (URL); needs --oidc-audience and --auth"),
		oidcAudience: fs.String("oidc-audience", "", "the audience (aud) the OIDC tokens must name"),
		oidcProject:  fs.String("oidc-project-claim", "sessiond_project", "the OIDC claim that holds the project (\"*\": every project)"),
		rate:         fs.Float64("rate-limit", 0, "requests a second each key may make, sustained (0: no limit); over it: 429 with Retry-After"),
		burst:        fs.Int("rate-burst", 0, "requests a key may make at once above --rate-limit (default twice the rate)"),
		streams:      fs.Int("max-streams-per-key", 0, "event streams and change feeds each key may hold open at once (0: no limit)"),
		cookieSecure: fs.Bool("cookie-secure", false, "mark the web UI's login cookie Secure on every request, for TLS ended by a proxy in front (with --tls-cert it is Secure already)"),
	}
	fs.Var(&a.cors, "cors-origin", "allow browser pages of this origin (https://app.example.com) to call the API; repeatable; none by default")
	return a
}

// check applies the rule of non-loopback addresses: off loopback the server needs --auth
// (or --insecure-allow-remote), and, with --auth, TLS (tls: the server serves TLS itself) or
// --insecure-http, which logs a warning.
func (a *authFlags) check(addr, metricsAddr, adminAddr string, allowRemote, tls bool, log *slog.Logger) error {
	if *a.rate < 0 || *a.burst < 0 || *a.streams < 0 {
		return errors.New("--rate-limit, --rate-burst and --max-streams-per-key must not be negative")
	}
	if (*a.oidcIssuer == "") != (*a.oidcAudience == "") {
		return errors.New("--oidc-issuer and --oidc-audience go together\nhint: give both, e.g. --oidc-issuer https://idp.example.com --oidc-audience sessiond")
	}
	if *a.oidcIssuer != "" && !*a.on {
		return errors.New("--oidc-issuer needs --auth\nhint: add --auth")
	}
	for _, o := range a.cors {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || o != u.Scheme+"://"+u.Host {
			return fmt.Errorf("--cors-origin %q is not an origin\nhint: give scheme and host only, e.g. --cors-origin https://app.example.com", o)
		}
	}
	// The side listeners (metrics, pprof) have no authentication: loopback only, unless
	// the operator says the network is trusted.
	for _, side := range []string{metricsAddr, adminAddr} {
		if side == "" {
			continue
		}
		if err := checkLoopback(side); err != nil && !allowRemote {
			return fmt.Errorf("%v\nhint: the metrics and admin listeners have no authentication; keep them on 127.0.0.1 or ::1, or pass --insecure-allow-remote if the network is trusted", err)
		}
	}
	if err := checkLoopback(addr); err != nil {
		switch {
		case *a.on && tls:
		case *a.on && !*a.insecureHTTP:
			return fmt.Errorf("%v over plain HTTP\nhint: serve TLS (--tls-cert, --tls-key), or put a TLS-terminating proxy in front and pass --insecure-http (docs/security.md, \"Behind a proxy\")", err)
		case *a.on:
			log.Warn("serving plain HTTP off loopback: keys and session data cross the network in clear; use a TLS-terminating proxy in front", "addr", addr)
		case allowRemote:
			log.Warn("serving without authentication off loopback (--insecure-allow-remote): anyone who reaches the address can read and write every session", "addr", addr)
		default:
			return fmt.Errorf("%v without authentication\nhint: pass --auth and make a key with sessiond keys create (docs/security.md), or listen on 127.0.0.1 or ::1", err)
		}
	}
	return nil
}

// apply sets the server options of the flags; with --oidc-issuer it reads the provider's
// discovery document.
func (a *authFlags) apply(ctx context.Context, o *server.Options) error {
	o.Auth = *a.on
	o.RateLimit, o.RateBurst, o.MaxStreamsPerKey = *a.rate, *a.burst, *a.streams
	o.CORSOrigins = a.cors
	o.CookieSecure = *a.cookieSecure
	if *a.oidcIssuer != "" {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		v, err := auth.NewOIDC(dctx, auth.OIDCOptions{Issuer: *a.oidcIssuer, Audience: *a.oidcAudience, ProjectClaim: *a.oidcProject})
		if err != nil {
			return fmt.Errorf("%w\nhint: check that %s/.well-known/openid-configuration is reachable from this host", err, strings.TrimSuffix(*a.oidcIssuer, "/"))
		}
		o.Tokens = v
	}
	return nil
}
