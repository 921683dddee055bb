package contract

// This file is the one home of sessiond's error codes: the command error codes of the contract
// (the enum of a command result's error.code), the codes of the HTTP API, and the codes that end
// an event stream. The schema of a command result, the session domain's refusals and the HTTP
// API's status table (package api) all use these constants, so a misspelt code does not compile.
// What each code means is said beside the table that uses it: [CommandErrorMeaning] for the
// command error codes, api.CodeMeaning for the others.

// ErrorCode is a stable error code: what a client branches on. It marshals as its string.
type ErrorCode string

// Command error codes of the contract, in the contract's order ([ErrorCodes]).
const (
	CodeSessionNotFound         ErrorCode = "SESSION_NOT_FOUND"          // unknown session
	CodeRunNotFound             ErrorCode = "RUN_NOT_FOUND"              // unknown run
	CodeActiveRunNotFound       ErrorCode = "ACTIVE_RUN_NOT_FOUND"       // the command needs an active run
	CodeRunAlreadyFinished      ErrorCode = "RUN_ALREADY_FINISHED"       // the target run has ended
	CodeStopTimeout             ErrorCode = "STOP_TIMEOUT"               // a stop was not confirmed in time
	CodeCommandNotSupported     ErrorCode = "COMMAND_NOT_SUPPORTED"      // the command type is not supported
	CodeCapabilityUnavailable   ErrorCode = "CAPABILITY_UNAVAILABLE"     // the snapshot lacks a capability
	CodeSequenceConflict        ErrorCode = "SEQUENCE_CONFLICT"          // expectedSequence did not match
	CodeInvalidState            ErrorCode = "INVALID_SESSION_STATE"      // not allowed in the current state
	CodeTargetEventNotFound     ErrorCode = "TARGET_EVENT_NOT_FOUND"     // the event pointed at is not in the log
	CodeTargetEventNotRetryable ErrorCode = "TARGET_EVENT_NOT_RETRYABLE" // the event pointed at cannot be retried
	CodeApprovalNotFound        ErrorCode = "APPROVAL_NOT_FOUND"         // no such approval
	CodeApprovalAlreadyResolved ErrorCode = "APPROVAL_ALREADY_RESOLVED"  // the approval was resolved
	CodeSourceThreadNotFound    ErrorCode = "SOURCE_THREAD_NOT_FOUND"    // a fork's source thread is unknown
	CodeSourceMessageNotFound   ErrorCode = "SOURCE_MESSAGE_NOT_FOUND"   // a fork's source message is unknown
	CodeSourceRunNotFound       ErrorCode = "SOURCE_RUN_NOT_FOUND"       // a fork's source run is unknown
	CodeSourceLineageInvalid    ErrorCode = "SOURCE_LINEAGE_INVALID"     // a fork's message and run do not belong together
	CodeActiveBranchNotFound    ErrorCode = "ACTIVE_BRANCH_NOT_FOUND"    // the active branch named does not exist
	CodeCommandExecutionFailed  ErrorCode = "COMMAND_EXECUTION_FAILED"   // allowed, but could not be applied
)

// Error codes of the HTTP API beside the command error codes ([APIErrorCodes]).
const (
	CodeMalformed           ErrorCode = "MALFORMED_REQUEST"      // not acceptable JSON, bad query parameter
	CodeContractViolation   ErrorCode = "CONTRACT_VIOLATION"     // the body breaks the contract
	CodeTooLarge            ErrorCode = "TOO_LARGE"              // body, batch or event over a limit
	CodeSessionExists       ErrorCode = "SESSION_EXISTS"         // create with a taken id
	CodeIdempotencyConflict ErrorCode = "IDEMPOTENCY_CONFLICT"   // key reused with other content
	CodeEventIDConflict     ErrorCode = "EVENT_ID_CONFLICT"      // eventId reused under another key
	CodeSessionMismatch     ErrorCode = "SESSION_MISMATCH"       // event names another session
	CodeInvalidTransition   ErrorCode = "INVALID_RUN_TRANSITION" // run status change not allowed
	CodeUnsupportedMedia    ErrorCode = "UNSUPPORTED_MEDIA_TYPE" // Content-Type not accepted
	CodeMethodNotAllowed    ErrorCode = "METHOD_NOT_ALLOWED"     // the path exists, not with this method
	CodeNotFound            ErrorCode = "NOT_FOUND"              // no such endpoint
	CodeUnavailable         ErrorCode = "UNAVAILABLE"            // shutting down
	CodeInternal            ErrorCode = "INTERNAL"               // a bug; the server logged it
	CodeArchiveInvalid      ErrorCode = "ARCHIVE_INVALID"        // an archive file that fails verification
	CodeArchiveNotFound     ErrorCode = "ARCHIVE_NOT_FOUND"      // no such archive
	CodeRestoreConflict     ErrorCode = "RESTORE_CONFLICT"       // the session is already in the store
	CodeSessionMoved        ErrorCode = "SESSION_MOVED"          // the log moved while archiving
	CodeNotConfigured       ErrorCode = "NOT_CONFIGURED"         // the server has no archive directory
	CodeLeaseLost           ErrorCode = "LEASE_LOST"             // the lease given is not the run's current one
	CodeLeaseRequired       ErrorCode = "LEASE_REQUIRED"         // the run is leased; the append carries no lease
	CodeStoreUnwritable     ErrorCode = "STORE_UNWRITABLE"       // readiness: the store refuses writes
	CodeOverloaded          ErrorCode = "OVERLOADED"             // too many request bytes in flight
	CodeRequestTimeout      ErrorCode = "REQUEST_TIMEOUT"        // the body did not arrive in time
	CodeHeadersTooLarge     ErrorCode = "HEADERS_TOO_LARGE"      // the request's headers are over the limit
	CodeUnauthenticated     ErrorCode = "UNAUTHENTICATED"        // no valid credential
	CodeForbidden           ErrorCode = "FORBIDDEN"              // the credential lacks a scope or project
	CodeRateLimited         ErrorCode = "RATE_LIMITED"           // over the key's request rate, streams or body bytes
	CodeKeyNotFound         ErrorCode = "KEY_NOT_FOUND"          // no such API key
)

// Availability codes: the request may be sound, but the server or its store cannot serve it
// now. Each is retryable ([RetryFor]); none of them is ever answered as INTERNAL.
const (
	CodeStoreFull        ErrorCode = "STORE_FULL"             // the store's disk or quota is full
	CodeStoreUnavailable ErrorCode = "STORE_UNAVAILABLE"      // the database cannot be reached
	CodeCommitUnknown    ErrorCode = "COMMIT_OUTCOME_UNKNOWN" // a write may or may not have committed
)

// Codes of the final block of an event stream (api.SSEStreamError): why the server ended the
// stream ([StreamErrorCodes]). They come inside a stream already answered 200, so they have no
// HTTP status.
const (
	CodeSubscriberTooSlow ErrorCode = "SUBSCRIBER_TOO_SLOW" // the stream fell too far behind the head
	CodeShuttingDown      ErrorCode = "SHUTTING_DOWN"       // the server is shutting down
	CodeStreamFailed      ErrorCode = "STREAM_FAILED"       // reading the log failed
	CodeCredentialRevoked ErrorCode = "CREDENTIAL_REVOKED"  // the stream's credential was revoked or expired
)

// Codes of the error events the server appends about a run (an "error" event's payload.code,
// [RunErrorCodes]): why the server ended a run nobody else would end. They are not answers to a
// request, so they have no HTTP status.
const (
	CodeHeartbeatLost ErrorCode = "HEARTBEAT_LOST" // the sweeper: the session went silent
	CodeLeaseExpired  ErrorCode = "LEASE_EXPIRED"  // the lease expirer: the run's lease was not renewed
	CodeQueueTimeout  ErrorCode = "QUEUE_TIMEOUT"  // the queue timeout: no worker claimed the run in time
)

var (
	// ErrorCodes are the command error codes of the contract, in the contract's order: the
	// enum of a command result's error.code.
	ErrorCodes = []ErrorCode{
		CodeSessionNotFound, CodeRunNotFound, CodeActiveRunNotFound, CodeRunAlreadyFinished,
		CodeStopTimeout, CodeCommandNotSupported, CodeCapabilityUnavailable, CodeSequenceConflict,
		CodeInvalidState, CodeTargetEventNotFound, CodeTargetEventNotRetryable,
		CodeApprovalNotFound, CodeApprovalAlreadyResolved, CodeSourceThreadNotFound,
		CodeSourceMessageNotFound, CodeSourceRunNotFound, CodeSourceLineageInvalid,
		CodeActiveBranchNotFound, CodeCommandExecutionFailed,
	}
	// APIErrorCodes are the error codes the HTTP API answers beside the command error codes.
	APIErrorCodes = []ErrorCode{
		CodeMalformed, CodeContractViolation, CodeTooLarge, CodeSessionExists,
		CodeIdempotencyConflict, CodeEventIDConflict, CodeSessionMismatch, CodeInvalidTransition,
		CodeUnsupportedMedia, CodeMethodNotAllowed, CodeNotFound, CodeUnavailable, CodeInternal,
		CodeArchiveInvalid, CodeArchiveNotFound, CodeRestoreConflict, CodeSessionMoved,
		CodeNotConfigured, CodeLeaseLost, CodeLeaseRequired, CodeStoreUnwritable, CodeOverloaded,
		CodeRequestTimeout, CodeHeadersTooLarge,
		CodeUnauthenticated, CodeForbidden,
		CodeRateLimited, CodeKeyNotFound,
		CodeStoreFull, CodeStoreUnavailable, CodeCommitUnknown,
	}
	// StreamErrorCodes are the codes that end an event stream.
	StreamErrorCodes = []ErrorCode{CodeSubscriberTooSlow, CodeShuttingDown, CodeStreamFailed, CodeCredentialRevoked}
	// RunErrorCodes are the codes of the error events the server appends about a run.
	RunErrorCodes = []ErrorCode{CodeHeartbeatLost, CodeLeaseExpired, CodeQueueTimeout}
)

// Retry is what a client may do after an answer with an error code: the one table of
// retryable codes, which the server (its Retry-After header), the Go client and the docs use.
type Retry struct {
	// Retryable is true when sending the same request again, unchanged (the same idempotency
	// keys), is safe and may succeed later: the refusal was about the server's state, not the
	// request's.
	Retryable bool
	// AfterSeconds is the wait the server suggests before the retry (its Retry-After header);
	// 0 when it suggests none.
	AfterSeconds int
}

// retryByCode lists the retryable codes; every other code is final for the request as sent.
var retryByCode = map[ErrorCode]Retry{
	CodeUnavailable:      {Retryable: true, AfterSeconds: 1},  // shutting down: another instance, or this one restarted
	CodeOverloaded:       {Retryable: true, AfterSeconds: 1},  // body budget full
	CodeRateLimited:      {Retryable: true, AfterSeconds: 1},  // over the key's rate or streams
	CodeRequestTimeout:   {Retryable: true},                   // the body came too slowly
	CodeStoreUnwritable:  {Retryable: true, AfterSeconds: 5},  // the store refuses writes
	CodeStoreFull:        {Retryable: true, AfterSeconds: 30}, // an operator must free space first
	CodeStoreUnavailable: {Retryable: true, AfterSeconds: 1},  // the database is switching or away
	CodeCommitUnknown:    {Retryable: true, AfterSeconds: 1},  // the retry with the same keys tells
}

// RetryFor says whether an answer with code may be retried unchanged, and after how long.
func RetryFor(code ErrorCode) Retry { return retryByCode[code] }

// Retryable reports whether an answer with code may be retried unchanged ([RetryFor]).
func Retryable(code ErrorCode) bool { return retryByCode[code].Retryable }

// codeStrings returns codes as strings, for a schema enum.
func codeStrings(codes []ErrorCode) []string {
	out := make([]string, len(codes))
	for i, c := range codes {
		out[i] = string(c)
	}
	return out
}

// CodedError is an error that carries its stable error code. Every error of this module that
// stands for a refusal a client can act on implements it — the domain's refusals
// (session.RejectError, session.InvalidError), the store's refusals (its conflict, limit,
// lease and run errors, and its not-found and exists sentinels) and the HTTP API's error
// (api.Error) — so each edge turns any of them into its answer in one place (the server's
// apiError). What an edge tells the client to do about it (a route, a command) is the edge's
// to say, not the error's.
type CodedError interface {
	error
	ErrorCode() ErrorCode
}

// ProblemsCode is the code of a document refused for these problems: MALFORMED_REQUEST when
// one is of the JSON layer (the document is not acceptable JSON; TOO_LARGE when that one is
// its size), else CONTRACT_VIOLATION.
func ProblemsCode(probs []Problem) ErrorCode {
	for _, p := range probs {
		if p.Layer == LayerJSON {
			if p.Rule == "maxBytes" {
				return CodeTooLarge
			}
			return CodeMalformed
		}
	}
	return CodeContractViolation
}
