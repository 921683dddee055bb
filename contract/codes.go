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
	CodeRateLimited         ErrorCode = "RATE_LIMITED"           // over the key's request rate or stream count
	CodeKeyNotFound         ErrorCode = "KEY_NOT_FOUND"          // no such API key
)

// Codes of the final block of an event stream (api.SSEStreamError): why the server ended the
// stream ([StreamErrorCodes]). They come inside a stream already answered 200, so they have no
// HTTP status.
const (
	CodeSubscriberTooSlow ErrorCode = "SUBSCRIBER_TOO_SLOW" // the stream fell too far behind the head
	CodeShuttingDown      ErrorCode = "SHUTTING_DOWN"       // the server is shutting down
	CodeStreamFailed      ErrorCode = "STREAM_FAILED"       // reading the log failed
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
	}
	// StreamErrorCodes are the codes that end an event stream.
	StreamErrorCodes = []ErrorCode{CodeSubscriberTooSlow, CodeShuttingDown, CodeStreamFailed}
)

// codeStrings returns codes as strings, for a schema enum.
func codeStrings(codes []ErrorCode) []string {
	out := make([]string, len(codes))
	for i, c := range codes {
		out[i] = string(c)
	}
	return out
}
