// Package acp is a client of the Agent Client Protocol (ACP, https://agentclientprotocol.com):
// JSON-RPC 2.0 over a child process's stdio, one JSON message per line. It runs an agent,
// drives it (initialize, session/new or session/load, session/prompt, session/cancel), serves
// the client-side methods agents call (session/request_permission, fs/*, terminal/*) inside a
// root directory, and records everything into a sessiond session as contract events.
//
// The layers: [Conn] is the JSON-RPC connection (requests both ways, notifications, errors);
// mapping.go holds, in one place, how every ACP message becomes contract events ([Mapper]);
// [Workspace] serves the file-system and terminal methods inside the root; [Recorder] ties a
// session (through the HTTP API, package client) to an agent process.
//
// The protocol's types here follow the JSON Schema shipped in the @agentclientprotocol/sdk npm
// package (schema/v1/schema.json), which the tests validate every frame against.
package acp
