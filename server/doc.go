// Package server serves sessiond's v1 HTTP API over a session.Service: sessions, event appends
// (one event, a JSON array or NDJSON, all or nothing), reads, runs, and live Server-Sent Event
// streams that resume from Last-Event-ID without gap or repeat. Errors use the envelope and
// code table of package api.
//
// Where things are: routes.go (the declared route table) and access.go (who may call what);
// tail.go (the one loop every stream runs: the session stream, the change feed in feed.go and
// the bridges' run streams in bridges.go, over the ring of stream.go); errors.go (apiError, the
// one adapter from an error that carries a code to the API's answer) and remedies.go (what to
// do about a refusal of the domain, in the API's routes and sessiond's commands).
package server
