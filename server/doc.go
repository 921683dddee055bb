// Package server serves sessiond's v1 HTTP API over a store.Store: sessions, event appends
// (one event, a JSON array or NDJSON, all or nothing), reads, runs, and live Server-Sent Event
// streams that resume from Last-Event-ID without gap or repeat. Errors use the envelope and
// code table of package api.
package server
