// Package wire holds the shapes sessiond serializes beyond the contract's own objects: what the
// session domain answers (transcript, lineage, status, work window, sweep, assessment, archives,
// progress) and the lifecycle state the store keeps beside a session. The domain produces them,
// the HTTP API sends them as they are, and the Go client decodes them.
//
// It imports only package contract, so that package api and the Go client (package client)
// can use these shapes without importing the domain (session) or the storage (store). The
// session and store packages name them under their old names through type aliases.
package wire
