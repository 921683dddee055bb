// Package importer turns agent transcripts that are already on disk into sessiond sessions:
// Claude Code session files (~/.claude/projects/*/*.jsonl) and Codex rollouts
// (~/.codex/sessions/…/rollout-*.jsonl). A parser reads a file into [Transcript]s (the
// session, its contract events) and a [Report] that accounts for every line: mapped to
// events, merged into another line's event (fragments of one message, duplicate records), or
// skipped with a reason. [Writer] writes transcripts through the HTTP API (package client), in
// batches, so that it works while a server holds the store; [Writer.Import] reads files and
// writes each one's transcripts as soon as it is read, reading and writing at once.
//
// Every id is derived from the source (the transcript's own session id, its line numbers and
// message ids), so importing a file again writes nothing new: every event is a duplicate.
// docs/agents.md has the mapping tables: what is kept, what is dropped and why.
package importer
