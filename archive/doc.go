// Package archive is sessiond's archive file: its format (a JSON header and a checksummed
// content holding a session's record, snapshot, lifecycle state, runs and every event byte for
// byte; [Encode] and [Decode], which verifies it), the names archives are stored under (safe
// file names that cannot leave the archive directory: [SafeName], [FileName], [ProjectDir],
// [Within]), the atomic write that leaves either the old state or a complete file
// ([WriteFileAtomic]), and the archive directory ([List], [Find], [Save]).
//
// It knows nothing of the store's sessions or locks: package session decides when to archive
// and restore and turns this package's refusals ([ErrInvalid], [ErrNotFound]) into error codes.
// docs/lifecycle.md describes the file and the directory.
package archive
