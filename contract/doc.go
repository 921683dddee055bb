// Package contract is the door every sessiond contract object goes through: Go types for the
// objects of the shared contract (events, commands, command results, runs, view models, the
// session record and their parts), a strict JSON parser, and a validator that agrees with the
// published JSON Schemas and adds the contract's cross-field rules ([Rules]). docs/reference.md,
// generated from the same tables, lists every field, rule, command policy and status.
//
// [Validate] parses a document of a given kind and returns nil or a *[ValidationError] listing
// every [Problem], each with a JSON Pointer, the rule or schema keyword that failed, its layer
// ("json", "schema" or "rule") and a message. [DecodeEvent], [DecodeCommand] and [Decode]
// validate and decode into the types; [CheckEvent] validates and returns the canonical bytes
// the store keeps; [Marshal] encodes a decoded object back to the same JSON.
//
// The parser rejects invalid UTF-8, lone surrogate escapes, duplicate keys, nesting deeper
// than [DefaultMaxDepth], numbers beyond float64, trailing data and documents over
// [DefaultMaxBytes] (see [Limits]). docs/contract.md describes every check for users.
package contract
