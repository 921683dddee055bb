// Package bridge projects a session's log onto the protocols of two front-end ecosystems:
// the Vercel AI SDK's UI message stream (protocol v1, what useChat reads) and AG-UI (what
// CopilotKit's HttpAgent reads). docs/bridges.md has the mapping tables.
//
// There is one projection: a [Fold] reads the contract events of a log in order and turns
// each into protocol-neutral [Op]s (a text part starts, grows, ends; a tool call gets its
// input, its output; a run waits for an approval, finishes; an event with no home is carried
// whole). Each protocol then has two consumers of the same ops: an encoder that writes them
// as that protocol's stream ([UIEncoder], [AppendAGUI]), and a reducer that folds them into
// that protocol's messages for history ([UIHistory], [AGUIHistory]). What a client builds
// from the stream and what the history answers therefore come from the same folding.
//
// The package also decodes the requests of both protocols (the AI SDK's chat request, AG-UI's
// RunAgentInput) strictly and reads what they ask for: a user message, approvals answered in
// the client ([Decision]). It is a pure projection: it imports only package contract, and
// carrying a request out (appending the message and the run it queues, the approval and stop
// commands) is package session's (session.Chat).
//
// Files: event.go (an event as the fold reads it), fold.go (the fold and its ops), aisdk.go
// (UI message stream chunks and UIMessages), agui.go (AG-UI events and messages), request.go
// (the requests), jsonw.go (the small JSON writer the encoders share).
package bridge
