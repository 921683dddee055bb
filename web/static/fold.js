// The transcript fold of docs/api.md ("GET /v1/sessions/{id}/transcript"), in the page: it
// starts from the server's projection and applies live events, or starts empty and folds a
// log prefix (time travel). The rules are the server's (session/transcript.go); each change
// replaces only the item it touches, so the views of the other items are not re-rendered.

// emptyTranscript is the transcript of an empty log.
export function emptyTranscript(sessionId) {
  return {
    sessionId, lastSequence: -1, messages: [], reasoning: [], plan: null, tasks: [], tools: [],
    artifacts: [], testResults: [], summaries: [], approvals: [], diffs: [], workspaceFiles: [], terminals: [],
    usage: { latest: null, total: { inputTokens: 0, outputTokens: 0, totalTokens: 0 }, byRun: {} },
    errors: [], steers: [], resumable: false,
  };
}

// The lists kept by id, and the field that is the id.
export const KEYED = {
  messages: "messageId", reasoning: "reasoningId", tasks: "taskId", tools: "toolCallId",
  artifacts: "artifactId", testResults: "testId", summaries: "summaryId", approvals: "approvalId",
  diffs: "path", workspaceFiles: "path", terminals: "terminalId", steers: "commandId",
};

// Fold holds a transcript and applies events to it. t.version counts changes.
export class Fold {
  constructor(transcript) {
    // The server encodes an empty list as null; the page keeps every list an array.
    const t = { ...emptyTranscript(transcript.sessionId) };
    for (const [k, v] of Object.entries(transcript)) if (v !== null && v !== undefined) t[k] = v;
    for (const list of [...Object.keys(KEYED), "errors"]) t[list] = [...(t[list] || [])];
    const u = t.usage || {};
    t.usage = { latest: u.latest || null, total: { inputTokens: 0, outputTokens: 0, totalTokens: 0, ...(u.total || {}) }, byRun: { ...(u.byRun || {}) } };
    t.version = 0;
    this.t = t;
    this.index = {};
    for (const [list, key] of Object.entries(KEYED)) {
      const m = new Map();
      t[list].forEach((item, i) => m.set(item[key], i));
      this.index[list] = m;
    }
  }

  // upsert puts item at id's place in list (or appends it) and answers the previous item.
  upsert(list, id, make) {
    const arr = this.t[list], m = this.index[list];
    const i = m.get(id);
    if (i === undefined) {
      m.set(id, arr.length);
      arr.push(make(undefined));
      return;
    }
    arr[i] = make(arr[i]);
  }

  // apply folds one stored event; events at or below lastSequence are ignored (no duplicate).
  // It answers whether the event was applied.
  apply(ev) {
    const t = this.t;
    if (ev.sequence <= t.lastSequence) return false;
    t.lastSequence = ev.sequence;
    t.version++;
    const p = ev.payload;
    switch (ev.eventType) {
      case "message":
        this.upsert("messages", p.messageId, (old) => {
          const m = old ? { ...old } : { messageId: p.messageId, parts: [] };
          m.role = p.role;
          m.sequence = ev.sequence;
          if (ev.runId) m.runId = ev.runId;
          m.parts = p.operation === "replace" ? [...p.parts] : [...m.parts, ...p.parts];
          if (p.status) m.status = p.status;
          return m;
        });
        break;
      case "reasoning":
        this.upsert("reasoning", p.reasoningId, (old) => ({
          reasoningId: p.reasoningId, text: (old ? old.text : "") + p.text, status: p.status,
        }));
        break;
      case "plan":
        t.plan = p;
        break;
      case "task": this.upsert("tasks", p.taskId, () => p); break;
      case "tool":
        this.upsert("tools", p.toolCallId, (old) => {
          if (!old) return p;
          const m = { ...p };
          if (m.input === undefined) m.input = old.input;
          if (m.output === undefined) m.output = old.output;
          if (!m.startedAt) m.startedAt = old.startedAt;
          return m;
        });
        break;
      case "approval":
        this.upsert("approvals", p.approvalId, (old) => {
          if (!old) return p;
          const m = { ...p };
          if (!m.toolCallId) m.toolCallId = old.toolCallId;
          if (m.requestedAction === undefined) m.requestedAction = old.requestedAction;
          if (m.description === undefined) m.description = old.description;
          return m;
        });
        break;
      case "artifact": this.upsert("artifacts", p.artifactId, () => p); break;
      case "usage": {
        const add = (u) => ({
          inputTokens: u.inputTokens + (p.inputTokens || 0), outputTokens: u.outputTokens + (p.outputTokens || 0),
          totalTokens: u.totalTokens + (p.totalTokens || 0),
        });
        const zero = { inputTokens: 0, outputTokens: 0, totalTokens: 0 };
        t.usage = { latest: p, total: add(t.usage.total), byRun: t.usage.byRun };
        if (ev.runId) t.usage.byRun = { ...t.usage.byRun, [ev.runId]: add(t.usage.byRun[ev.runId] || zero) };
        break;
      }
      case "resume": t.resumable = p.resumable; break;
      case "error": t.errors = [...t.errors, p]; break;
      case "diff": this.upsert("diffs", p.path, () => p); break;
      case "workspace-file": this.upsert("workspaceFiles", p.path, () => p); break;
      case "terminal":
        this.upsert("terminals", p.terminalId, (old) => {
          const m = old ? { ...old } : { terminalId: p.terminalId, output: "" };
          if (p.stream !== "status") m.output += p.chunk;
          if (p.exitCode !== undefined) m.exitCode = p.exitCode;
          return m;
        });
        break;
      case "test-result": this.upsert("testResults", p.testId, () => p); break;
      case "steer": this.upsert("steers", p.commandId, () => p); break;
      case "summary": this.upsert("summaries", p.summaryId, () => p); break;
      default: break; // status: the run projection, kept by the page from the session resource
    }
    return true;
  }
}

// LIST_OF is the transcript list of each event type whose events are about one item (its
// events update the item): the message, the tool call, the terminal... The other types
// (status, plan, usage, error, resume) are one entry per event.
export const LIST_OF = {
  message: "messages", reasoning: "reasoning", task: "tasks", tool: "tools", approval: "approvals",
  artifact: "artifacts", diff: "diffs", "workspace-file": "workspaceFiles", terminal: "terminals",
  "test-result": "testResults", steer: "steers", summary: "summaries",
};

// The 17 event kinds of the contract; each arrives on the stream as "ev.<kind>".
export const KINDS = ["message", "reasoning", "plan", "task", "tool", "approval", "status", "artifact",
  "usage", "resume", "error", "diff", "workspace-file", "terminal", "test-result", "steer", "summary"];

// partText is what a message part shows: its text, a plain string, or its JSON.
export function partText(part) {
  if (typeof part === "string") return part;
  if (part && part.type === "text" && typeof part.text === "string") return part.text;
  return "```json\n" + JSON.stringify(part, null, 2) + "\n```";
}

// messageText is the markdown of a message's parts. Text parts are usually streamed chunks
// of one text, so they are joined as they are, as `sessiond view` joins them ("The fl" +
// "aky test" is one word); a part that is not text (shown as a JSON block) stands in a
// paragraph of its own.
export function messageText(parts) {
  let out = "";
  for (const part of parts) {
    const isText = typeof part === "string" || (part && part.type === "text" && typeof part.text === "string");
    out += isText ? partText(part) : `${out && !out.endsWith("\n\n") ? "\n\n" : ""}${partText(part)}\n\n`;
  }
  return out;
}

// eventLine is a one-line description of an event for the event log.
export function eventLine(ev) {
  const p = ev.payload || {};
  switch (ev.eventType) {
    case "message": return `${p.role}: ${(p.parts || []).map((x) => (typeof x === "string" ? x : x && x.text) || "").join(" ").slice(0, 160)}`;
    case "status": return `${ev.runId ? "run " + ev.runId + " " : ""}${p.status}${p.detail ? ": " + p.detail : ""}`;
    case "tool": return `${p.toolName} ${p.status}`;
    case "approval": return `${p.title} (${p.status})`;
    case "error": return `${p.code}: ${p.message}`;
    case "terminal": return `${p.terminalId} ${p.stream}${p.exitCode !== undefined ? " exit " + p.exitCode : ""}`;
    case "test-result": return `${p.name} ${p.status}`;
    case "diff": case "workspace-file": return `${p.path} ${p.status || p.operation}`;
    case "steer": return `${p.status}: ${p.text}`;
    case "summary": return `summary ${p.status}`;
    case "task": return `${p.title} ${p.status}`;
    case "plan": return `plan ${p.status}`;
    case "usage": return `${p.totalTokens ?? "?"} tokens`;
    case "artifact": return `${p.name} ${p.status}`;
    case "resume": return p.resumable ? "resumable" : "not resumable";
    case "reasoning": return `reasoning ${p.status}`;
    default: return ev.eventType;
  }
}
