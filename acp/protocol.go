package acp

import "encoding/json"

// ProtocolVersion is the ACP major version this client speaks (the schema's v1).
const ProtocolVersion = 1

// The ACP methods this package sends or serves.
const (
	MethodInitialize        = "initialize"
	MethodSessionNew        = "session/new"
	MethodSessionLoad       = "session/load"
	MethodSessionPrompt     = "session/prompt"
	MethodSessionCancel     = "session/cancel"
	MethodSessionUpdate     = "session/update"
	MethodRequestPermission = "session/request_permission"
	MethodReadTextFile      = "fs/read_text_file"
	MethodWriteTextFile     = "fs/write_text_file"
	MethodTerminalCreate    = "terminal/create"
	MethodTerminalOutput    = "terminal/output"
	MethodTerminalRelease   = "terminal/release"
	MethodTerminalWait      = "terminal/wait_for_exit"
	MethodTerminalKill      = "terminal/kill"
)

// Implementation names a client or agent (InitializeRequest.clientInfo, agentInfo).
type Implementation struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// FileSystemCapabilities says which fs/* methods the client serves.
type FileSystemCapabilities struct {
	ReadTextFile  bool `json:"readTextFile"`
	WriteTextFile bool `json:"writeTextFile"`
}

// ClientCapabilities is what the client advertises in initialize.
type ClientCapabilities struct {
	FS       FileSystemCapabilities `json:"fs"`
	Terminal bool                   `json:"terminal"`
}

// InitializeRequest is the params of initialize.
type InitializeRequest struct {
	ProtocolVersion    int                `json:"protocolVersion"`
	ClientCapabilities ClientCapabilities `json:"clientCapabilities"`
	ClientInfo         *Implementation    `json:"clientInfo,omitempty"`
}

// InitializeResponse is the result of initialize (the fields this client reads).
type InitializeResponse struct {
	ProtocolVersion   int `json:"protocolVersion"`
	AgentCapabilities struct {
		LoadSession bool `json:"loadSession"`
	} `json:"agentCapabilities"`
	AgentInfo   *Implementation   `json:"agentInfo,omitempty"`
	AuthMethods []json.RawMessage `json:"authMethods,omitempty"`
}

// NewSessionRequest is the params of session/new.
type NewSessionRequest struct {
	Cwd        string            `json:"cwd"`
	MCPServers []json.RawMessage `json:"mcpServers"`
}

// NewSessionResponse is the result of session/new (the fields this client reads).
type NewSessionResponse struct {
	SessionID string `json:"sessionId"`
}

// LoadSessionRequest is the params of session/load.
type LoadSessionRequest struct {
	SessionID  string            `json:"sessionId"`
	Cwd        string            `json:"cwd"`
	MCPServers []json.RawMessage `json:"mcpServers"`
}

// PromptRequest is the params of session/prompt: the user's message as content blocks.
type PromptRequest struct {
	SessionID string            `json:"sessionId"`
	Prompt    []json.RawMessage `json:"prompt"`
}

// StopReason is why the agent ended a prompt turn.
type StopReason string

// The stop reasons of ACP v1.
const (
	StopEndTurn         StopReason = "end_turn"
	StopMaxTokens       StopReason = "max_tokens"
	StopMaxTurnRequests StopReason = "max_turn_requests"
	StopRefusal         StopReason = "refusal"
	StopCancelled       StopReason = "cancelled"
)

// PromptResponse is the result of session/prompt.
type PromptResponse struct {
	StopReason StopReason `json:"stopReason"`
}

// CancelNotification is the params of session/cancel.
type CancelNotification struct {
	SessionID string `json:"sessionId"`
}

// SessionNotification is the params of session/update.
type SessionNotification struct {
	SessionID string          `json:"sessionId"`
	Update    json.RawMessage `json:"update"`
}

// SessionUpdate is the union of the session/update kinds, discriminated by SessionUpdate; the
// fields of each kind this client maps are here, the rest is kept raw where the mapping keeps it.
type SessionUpdate struct {
	SessionUpdate string `json:"sessionUpdate"`

	// user_message_chunk, agent_message_chunk, agent_thought_chunk (ContentChunk)
	Content   json.RawMessage `json:"content,omitempty"`
	MessageID *string         `json:"messageId,omitempty"`

	// tool_call, tool_call_update (ToolCall, ToolCallUpdate); Content is the tool's content list
	ToolCall

	// plan
	Entries []PlanEntry `json:"entries,omitempty"`

	// usage_update
	Used *int64 `json:"used,omitempty"`
	Size *int64 `json:"size,omitempty"`
}

// ToolCall holds the fields of a ToolCall or ToolCallUpdate (all optional in an update but
// toolCallId). Content is decoded by the caller: in a SessionUpdate it shares the "content" key.
type ToolCall struct {
	ToolCallID string          `json:"toolCallId,omitempty"`
	Title      *string         `json:"title,omitempty"`
	Name       *string         `json:"name,omitempty"`
	Kind       *string         `json:"kind,omitempty"`
	Status     *string         `json:"status,omitempty"`
	Locations  json.RawMessage `json:"locations,omitempty"`
	RawInput   json.RawMessage `json:"rawInput,omitempty"`
	RawOutput  json.RawMessage `json:"rawOutput,omitempty"`
}

// ToolCallContent is one item of a tool call's content: "content" (a content block), "diff"
// or "terminal".
type ToolCallContent struct {
	Type       string          `json:"type"`
	Content    json.RawMessage `json:"content,omitempty"`
	Path       string          `json:"path,omitempty"`
	OldText    *string         `json:"oldText,omitempty"`
	NewText    string          `json:"newText,omitempty"`
	TerminalID string          `json:"terminalId,omitempty"`
}

// PlanEntry is one entry of an agent's plan.
type PlanEntry struct {
	Content  string `json:"content"`
	Priority string `json:"priority"`
	Status   string `json:"status"`
}

// PermissionOption is one choice a permission request offers.
type PermissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

// RequestPermissionRequest is the params of session/request_permission.
type RequestPermissionRequest struct {
	SessionID string             `json:"sessionId"`
	ToolCall  json.RawMessage    `json:"toolCall"`
	Options   []PermissionOption `json:"options"`
}

// RequestPermissionOutcome is "cancelled", or "selected" with the chosen option.
type RequestPermissionOutcome struct {
	Outcome  string `json:"outcome"`
	OptionID string `json:"optionId,omitempty"`
}

// RequestPermissionResponse is the result of session/request_permission.
type RequestPermissionResponse struct {
	Outcome RequestPermissionOutcome `json:"outcome"`
}

// ReadTextFileRequest is the params of fs/read_text_file (line is 1-based).
type ReadTextFileRequest struct {
	SessionID string  `json:"sessionId"`
	Path      string  `json:"path"`
	Line      *uint32 `json:"line,omitempty"`
	Limit     *uint32 `json:"limit,omitempty"`
}

// ReadTextFileResponse is the result of fs/read_text_file.
type ReadTextFileResponse struct {
	Content string `json:"content"`
}

// WriteTextFileRequest is the params of fs/write_text_file.
type WriteTextFileRequest struct {
	SessionID string `json:"sessionId"`
	Path      string `json:"path"`
	Content   string `json:"content"`
}

// EnvVariable is one environment variable of terminal/create.
type EnvVariable struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// CreateTerminalRequest is the params of terminal/create.
type CreateTerminalRequest struct {
	SessionID       string        `json:"sessionId"`
	Command         string        `json:"command"`
	Args            []string      `json:"args,omitempty"`
	Env             []EnvVariable `json:"env,omitempty"`
	Cwd             *string       `json:"cwd,omitempty"`
	OutputByteLimit *uint64       `json:"outputByteLimit,omitempty"`
}

// CreateTerminalResponse is the result of terminal/create.
type CreateTerminalResponse struct {
	TerminalID string `json:"terminalId"`
}

// TerminalRequest is the params of terminal/output, release, wait_for_exit and kill.
type TerminalRequest struct {
	SessionID  string `json:"sessionId"`
	TerminalID string `json:"terminalId"`
}

// TerminalExitStatus is how a terminal's command ended.
type TerminalExitStatus struct {
	ExitCode *uint32 `json:"exitCode"`
	Signal   *string `json:"signal"`
}

// TerminalOutputResponse is the result of terminal/output.
type TerminalOutputResponse struct {
	Output     string              `json:"output"`
	Truncated  bool                `json:"truncated"`
	ExitStatus *TerminalExitStatus `json:"exitStatus,omitempty"`
}

// empty is the result of the methods that answer {}.
type empty struct{}
