package api

import (
	"slices"

	"github.com/sessiond/sessiond/contract"
)

// codeMeanings says when the HTTP API answers each of its own error codes. The command error
// codes of the contract that the API uses with the same meaning are explained by
// [contract.CommandErrorMeaning]; a code listed in both (SESSION_NOT_FOUND, ...) has the wider
// meaning here.
var codeMeanings = map[contract.ErrorCode]string{
	contract.CodeMalformed:           "the request is not acceptable: the body is not acceptable JSON (syntax, invalid UTF-8, duplicate keys, nesting over 128, a number out of range, trailing data), a bad query parameter, or an empty batch",
	contract.CodeContractViolation:   "the body is JSON but breaks the contract; details lists every problem with its JSON Pointer and rule",
	contract.CodeTooLarge:            "the body, a batch or one event is over its limit",
	contract.CodeSessionNotFound:     "the session in the URL does not exist",
	contract.CodeSessionExists:       "create was given a session_id that is taken",
	contract.CodeRunNotFound:         "the run in the URL does not exist",
	contract.CodeSequenceConflict:    "an append's expectedSequence is not the log's last sequence; fields has expected and actual",
	contract.CodeIdempotencyConflict: "an idempotencyKey already used in the session for different content",
	contract.CodeEventIDConflict:     "an eventId already used in the session under another idempotencyKey",
	contract.CodeSessionMismatch:     "an event's or command's sessionId is not the session in the URL",
	contract.CodeInvalidTransition:   "a run status event whose status change the run status table does not allow",
	contract.CodeInvalidState:        "the change is not allowed in the current state: a lifecycle change the record status does not allow, a heartbeat or warm on a closed or archived session, or a run status event that would start a second active run",
	contract.CodeUnsupportedMedia:    "the body's Content-Type is not one the endpoint accepts",
	contract.CodeMethodNotAllowed:    "the endpoint exists but not with this method; the Allow header lists the methods it takes",
	contract.CodeNotFound:            "no endpoint has this path",
	contract.CodeUnavailable:         "the server is shutting down",
	contract.CodeInternal:            "a bug: the server logged it",
	contract.CodeArchiveInvalid:      "an archive file fails verification: truncated, checksum mismatch, newer version, or events and runs that break the contract",
	contract.CodeArchiveNotFound:     "no archive by that name (or none for the project)",
	contract.CodeRestoreConflict:     "restore of a session that is still in the store",
	contract.CodeSessionMoved:        "the log moved while the session was being archived; nothing changed",
	contract.CodeNotConfigured:       "an archive endpoint on a server started with --archive-dir - (no archive directory)",
	contract.CodeLeaseLost:           "the lease given (Sessiond-Lease header, or a renewal's or release's leaseId and token) is not the run's current lease: stale, forged, malformed, another run's, released or expired; nothing was written",
	contract.CodeUnauthenticated:     "the server requires a credential (docs/security.md) and the request has none, or one that is not valid, revoked or expired; the WWW-Authenticate header says which; nothing was done",
	contract.CodeForbidden:           "the credential is valid but may not do this: the route needs a scope it lacks (the message names it), another project, every project, or another session; nothing was done",
	contract.CodeRateLimited:         "the key (the client address without authentication) is over its request rate, its number of concurrent streams or its part of the request bodies in flight (serve --max-inflight-body-bytes-per-client); retry after the Retry-After header's seconds",
	contract.CodeKeyNotFound:         "no API key has this id (or none the caller may see)",
	contract.CodeLeaseRequired:       "an append from a runtime to a run that a worker holds a lease on carries no Sessiond-Lease header; nothing was written",
	contract.CodeStoreUnwritable:     "the store refuses writes (a failed sync of the SQLite WAL, until sessiond restarts), and GET /readyz says so: a load balancer should send writes elsewhere; the appends whose sync failed answer COMMIT_OUTCOME_UNKNOWN",
	contract.CodeOverloaded:          "the request bodies in flight already take the server's memory budget for bodies (serve --max-inflight-body-bytes) and this one waited for room in vain; nothing was read or written; retry after the Retry-After header's seconds",
	contract.CodeRequestTimeout:      "the request body did not arrive within the body timeout (serve --body-timeout); nothing was written",
	contract.CodeHeadersTooLarge:     "the request line and headers are over the server's limit (1 MiB); nothing was read",

	contract.CodeStoreFull:        "the store's disk (or database quota) is full: nothing of the request was written; GET /readyz answers the same until space is freed, and writes are taken again without a restart; retry after the Retry-After header's seconds",
	contract.CodeStoreUnavailable: "the database cannot be reached (a failover, a restart, a network partition): nothing is known to be written; retry after the Retry-After header's seconds",
	contract.CodeCommitUnknown:    "the store lost its connection while committing a write, which may or may not have been stored: send the same request again with the same idempotency keys, and the answer says which (accepted or duplicate)",
}

// Codes returns every error code the API answers, sorted: its own codes and the command error
// codes of the contract.
func Codes() []contract.ErrorCode {
	codes := make([]contract.ErrorCode, 0, len(statusByCode))
	for c := range statusByCode {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return codes
}

// CodeMeaning says when the API answers an error code (one of [Codes]); "" for an unknown code.
func CodeMeaning(code contract.ErrorCode) string {
	if m, ok := codeMeanings[code]; ok {
		return m
	}
	return contract.CommandErrorMeaning(code)
}
