// The HTTP client of sessiond: sessions, appends, reads, the live stream, commands and the
// worker protocol's claims and leases. It uses fetch and web streams only, so it runs in Node 20
// and in browsers; the contract's types and the retryable codes come from ./contract.js, which
// is generated from the server's own tables.

import {
  Retryable,
  type AgentSessionCommand,
  type AgentSessionCommandResult,
  type AgentSessionEvent,
  type Run,
} from "./contract.js";

/** An error answered by sessiond (or a transport failure, code "NETWORK"). */
export class SessiondError extends Error {
  /** The stable code to branch on (one of ErrorCodes, or "NETWORK"). */
  readonly code: string;
  /** The HTTP status it came with; 0 for a transport failure. */
  readonly status: number;
  /** The contract problems of a rejected document, as the server lists them. */
  readonly details: unknown[];
  /** Structured facts such as a SEQUENCE_CONFLICT's {expected, actual}. */
  readonly fields: Record<string, unknown>;
  /** The server's Retry-After in seconds, when it sent one. */
  readonly retryAfter?: number;

  constructor(code: string, message: string, status: number, details: unknown[] = [], fields: Record<string, unknown> = {}, retryAfter?: number) {
    const problems = details.slice(0, 5).map((d) => {
      const p = d as { path?: string; message?: string };
      return `; ${p.path ?? ""}: ${p.message ?? ""}`;
    });
    super(`${code}: ${message}${problems.join("")}`);
    this.name = "SessiondError";
    this.code = code;
    this.status = status;
    this.details = details;
    this.fields = fields;
    this.retryAfter = retryAfter;
  }

  /** Whether the same request may be sent again unchanged (the generated retryable table). */
  get retryable(): boolean {
    return this.code === "NETWORK" || this.code in Retryable;
  }
}

/** Options of a Client. */
export interface ClientOptions {
  /** The server's base URL, such as http://127.0.0.1:8080. */
  baseUrl: string;
  /** An API key, sent as a bearer token. */
  apiKey?: string;
  /** The fetch to use (default globalThis.fetch). */
  fetch?: typeof fetch;
  /** How many times a retryable failure is retried (default 4). */
  maxRetries?: number;
  /** The first wait between retries in ms, doubled each time (default 100). */
  minBackoffMs?: number;
  /** The cap of the wait between retries in ms, Retry-After included (default 5000). */
  maxBackoffMs?: number;
}

/** The fields the client fills in when an event given to append lacks them. */
type Filled = "contract" | "eventId" | "sessionId" | "sequence" | "idempotencyKey" | "occurredAt";
/** An event to append: an AgentSessionEvent whose envelope fields may be left out. */
export type EventInput = AgentSessionEvent extends infer E
  ? E extends AgentSessionEvent
    ? Omit<E, Filled> & Partial<Pick<E, Filled>>
    : never
  : never;

type CommandFilled = "contract" | "commandId" | "sessionId" | "idempotencyKey" | "expectedSequence" | "issuedAt";
/** A command to send: an AgentSessionCommand whose envelope fields may be left out. */
export type CommandInput = AgentSessionCommand extends infer C
  ? C extends AgentSessionCommand
    ? Omit<C, CommandFilled> & Partial<Pick<C, CommandFilled>>
    : never
  : never;

/** One event's outcome in an append's answer. */
export interface AppendResult {
  eventId: string;
  sequence: number;
  status: "accepted" | "duplicate";
}

/** The answer of an append. */
export interface AppendResponse {
  results: AppendResult[];
  lastSequence: number;
  interrupted?: { runId: string; results: AppendResult[] };
}

/** Options of an append. */
export interface AppendOptions {
  /** The last sequence the caller saw: the batch is refused SEQUENCE_CONFLICT if the log ends elsewhere. */
  expectedSequence?: number;
  /** The multitask strategy: "reject", "enqueue" or "interrupt". */
  multitask?: string;
  /** A lease's header value, sent as Sessiond-Lease. */
  lease?: string;
  signal?: AbortSignal;
}

/** A page of stored events. */
export interface EventPage {
  events: AgentSessionEvent[];
  lastSequence: number;
}

/** The filter of a claim. */
export interface ClaimRequest {
  project?: string;
  agent_id?: string;
  role?: string;
  capabilities?: string[];
  /** How long to wait for a run ("10s"; at most "30s"). */
  wait?: string;
  /** The lease's length ("30s" by default). */
  leaseTtl?: string;
}

/** A lease held on a run. */
export interface Lease {
  leaseId: string;
  token: number;
  expiresAt: string;
  /** The Sessiond-Lease header value of appends under this lease. */
  header: string;
}

/** A claimed run. */
export interface Claim {
  run: Run;
  lease: Lease;
  attempt: number;
}

/** Options of follow. */
export interface FollowOptions {
  /** The last sequence already seen (default -1: from the start). */
  after?: number;
  /** Ends the iteration. */
  signal?: AbortSignal;
  /** Told of each reconnect, with the cursor and the cause. */
  onReconnect?: (after: number, cause: unknown) => void;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });

/** A new random id (for eventId, idempotencyKey, commandId). */
export const newId = (): string => globalThis.crypto.randomUUID();

const sessionPath = (id: string) => "/v1/sessions/" + encodeURIComponent(id);

/** A client of one sessiond server. */
export class Client {
  readonly baseUrl: string;
  private readonly apiKey?: string;
  private readonly fetchFn: typeof fetch;
  private readonly maxRetries: number;
  private readonly minBackoffMs: number;
  private readonly maxBackoffMs: number;

  constructor(opts: ClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, "");
    this.apiKey = opts.apiKey;
    this.fetchFn = opts.fetch ?? globalThis.fetch.bind(globalThis);
    this.maxRetries = opts.maxRetries ?? 4;
    this.minBackoffMs = opts.minBackoffMs ?? 100;
    this.maxBackoffMs = opts.maxBackoffMs ?? 5000;
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const h: Record<string, string> = { ...extra };
    if (this.apiKey) h["Authorization"] = "Bearer " + this.apiKey;
    return h;
  }

  /**
   * Sends a request and decodes its JSON answer, retrying transport failures and retryable
   * codes (only: every other code is final) with a doubling wait capped at maxBackoffMs, or the
   * server's Retry-After when it is longer. Every request it sends is safe to repeat: appends
   * and commands carry their idempotency keys.
   */
  async request<T>(method: string, path: string, body?: string, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<T | undefined> {
    let backoff = this.minBackoffMs;
    for (let attempt = 0; ; attempt++) {
      let err: SessiondError;
      try {
        const resp = await this.fetchFn(this.baseUrl + path, { method, body, headers: this.headers(headers), signal });
        const text = await resp.text();
        if (resp.status < 300) return resp.status === 204 || text === "" ? undefined : (JSON.parse(text) as T);
        err = decodeError(resp.status, text, resp.headers.get("Retry-After"));
        if (path.includes("/commands") && resp.status < 500) {
          // A command's refusal comes as its result when the command was judged.
          try {
            const res = JSON.parse(text);
            if (res?.contract === "AgentSessionCommandResult") return res as T;
          } catch {}
        }
      } catch (e) {
        if (signal?.aborted) throw e;
        if (e instanceof SessiondError) throw e;
        err = new SessiondError("NETWORK", `${method} ${path}: ${e instanceof Error ? e.message : String(e)} (is the server running at ${this.baseUrl}?)`, 0);
      }
      if (!err.retryable || attempt >= this.maxRetries) throw err;
      const wait = Math.min(Math.max(backoff, (err.retryAfter ?? 0) * 1000), this.maxBackoffMs);
      await sleep(wait, signal);
      backoff = Math.min(backoff * 2, this.maxBackoffMs);
    }
  }

  /** Creates a session (POST /v1/sessions); the body is the session record's fields and snapshot. */
  async createSession(req: Record<string, unknown>): Promise<Record<string, unknown>> {
    return (await this.request<Record<string, unknown>>("POST", "/v1/sessions", JSON.stringify(req), { "Content-Type": "application/json" }))!;
  }

  /** Returns a session record. */
  async getSession(id: string): Promise<Record<string, unknown>> {
    return (await this.request<Record<string, unknown>>("GET", sessionPath(id)))!;
  }

  /**
   * Appends one event or a batch, all or nothing. Each event lacking them gets a new eventId,
   * the same value as its idempotencyKey, occurredAt now and the session's id, once: a retry
   * sends the same keys, so an event the server already stored is answered "duplicate".
   */
  async append(sessionId: string, events: EventInput | EventInput[], opts: AppendOptions = {}): Promise<AppendResponse> {
    const list = Array.isArray(events) ? events : [events];
    const now = new Date().toISOString();
    const lines = list.map((e) => {
      const eventId = e.eventId ?? newId();
      return JSON.stringify({
        contract: "AgentSessionEvent",
        eventId,
        sessionId,
        sequence: 0,
        idempotencyKey: e.idempotencyKey ?? eventId,
        occurredAt: now,
        ...e,
      });
    });
    return this.appendNDJSON(sessionId, lines.join("\n") + "\n", opts);
  }

  /** Appends NDJSON text (one complete event per line) as one batch, as given. */
  async appendNDJSON(sessionId: string, ndjson: string, opts: AppendOptions = {}): Promise<AppendResponse> {
    const q = new URLSearchParams();
    if (opts.expectedSequence !== undefined) q.set("expectedSequence", String(opts.expectedSequence));
    if (opts.multitask) q.set("multitask", opts.multitask);
    const headers: Record<string, string> = { "Content-Type": "application/x-ndjson" };
    if (opts.lease) headers["Sessiond-Lease"] = opts.lease;
    const qs = q.size ? "?" + q.toString() : "";
    return (await this.request<AppendResponse>("POST", sessionPath(sessionId) + "/events" + qs, ndjson, headers, opts.signal))!;
  }

  /** Reads a page of up to limit events after sequence after (default -1: from the start). */
  async readEvents(sessionId: string, opts: { after?: number; limit?: number } = {}): Promise<EventPage> {
    const q = new URLSearchParams({ after: String(opts.after ?? -1) });
    if (opts.limit) q.set("limit", String(opts.limit));
    return (await this.request<EventPage>("GET", sessionPath(sessionId) + "/events?" + q.toString()))!;
  }

  /**
   * Returns a session's transcript (GET /v1/sessions/{id}/transcript): the folded state a UI
   * draws (messages, reasoning, tools, approvals, steers, usage totals by run, ...), as JSON.
   */
  async transcript(sessionId: string): Promise<Record<string, any>> {
    return (await this.request<Record<string, any>>("GET", sessionPath(sessionId) + "/transcript"))!;
  }

  /** Returns a session's runs with their leases. */
  async runs(sessionId: string): Promise<(Run & { attempt: number; fencingToken: number; lease: Lease | null })[]> {
    const out = await this.request<{ runs: (Run & { attempt: number; fencingToken: number; lease: Lease | null })[] }>("GET", sessionPath(sessionId) + "/runs");
    return out!.runs;
  }

  /**
   * Follows a session's live stream from after: yields every event once, in order, and
   * reconnects with Last-Event-ID after a dropped connection or a server cut-off, so nothing is
   * missed or repeated. It ends when signal aborts, and throws a SessiondError that retrying
   * cannot fix (SESSION_NOT_FOUND, FORBIDDEN, ...).
   */
  async *follow(sessionId: string, opts: FollowOptions = {}): AsyncGenerator<AgentSessionEvent> {
    let cursor = opts.after ?? -1;
    let backoff = this.minBackoffMs;
    const signal = opts.signal;
    while (!signal?.aborted) {
      let cause: unknown;
      try {
        const resp = await this.fetchFn(this.baseUrl + sessionPath(sessionId) + "/events/stream", {
          headers: this.headers({ Accept: "text/event-stream", "Last-Event-ID": String(cursor) }),
          signal,
        });
        if (resp.status !== 200) {
          const err = decodeError(resp.status, await resp.text(), resp.headers.get("Retry-After"));
          if (!err.retryable) throw err;
          cause = err;
        } else {
          for await (const block of sseBlocks(resp.body!)) {
            if (block.event === "stream.error") {
              cause = new Error("stream ended by server: " + block.data);
              break;
            }
            if (block.id !== undefined && block.event?.startsWith("ev.") && block.data !== undefined) {
              const seq = Number(block.id);
              if (seq > cursor) {
                cursor = seq;
                backoff = this.minBackoffMs;
                yield JSON.parse(block.data) as AgentSessionEvent;
              }
            } else if (block.id !== undefined) {
              cursor = Math.max(cursor, Number(block.id));
            }
          }
          cause ??= new Error("stream closed");
        }
      } catch (e) {
        if (signal?.aborted) return;
        if (e instanceof SessiondError && !e.retryable) throw e;
        cause = e;
      }
      opts.onReconnect?.(cursor, cause);
      try {
        await sleep(backoff, signal);
      } catch {
        return;
      }
      backoff = Math.min(backoff * 2, this.maxBackoffMs);
    }
  }

  /**
   * Sends a command and returns its result; a rejected command is a result (outcome
   * "rejected", error), not an exception. Fields left out are filled: a new commandId and
   * idempotencyKey, issuedAt now, and expectedSequence the log's current last sequence.
   * wait (such as "10s") is passed for a stop to wait for its confirmation.
   */
  async command(sessionId: string, cmd: CommandInput, opts: { wait?: string } = {}): Promise<AgentSessionCommandResult> {
    const commandId = cmd.commandId ?? newId();
    const expectedSequence = cmd.expectedSequence ?? (await this.readEvents(sessionId, { limit: 1 })).lastSequence;
    const body = JSON.stringify({
      contract: "AgentSessionCommand",
      commandId,
      sessionId,
      idempotencyKey: cmd.idempotencyKey ?? commandId,
      expectedSequence,
      issuedAt: new Date().toISOString(),
      ...cmd,
    });
    const qs = opts.wait ? "?wait=" + encodeURIComponent(opts.wait) : "";
    return (await this.request<AgentSessionCommandResult>("POST", sessionPath(sessionId) + "/commands" + qs, body, { "Content-Type": "application/json" }))!;
  }

  /** Asks a run to stop. */
  stop(sessionId: string, runId: string, opts: { reason?: string; wait?: string } = {}): Promise<AgentSessionCommandResult> {
    return this.command(sessionId, { commandType: "stop", runId, payload: opts.reason ? { reason: opts.reason } : {} }, opts);
  }

  /** Steers a running run with text. */
  steer(sessionId: string, runId: string, text: string): Promise<AgentSessionCommandResult> {
    return this.command(sessionId, { commandType: "steer", runId, payload: { targetRunId: runId, text } });
  }

  /** Approves a pending approval of run runId. */
  approve(sessionId: string, runId: string, approvalId: string, reason?: string): Promise<AgentSessionCommandResult> {
    return this.command(sessionId, { commandType: "approval", runId, payload: { approvalId, decision: "approved", ...(reason ? { reason } : {}) } });
  }

  /** Rejects a pending approval of run runId. */
  reject(sessionId: string, runId: string, approvalId: string, reason?: string): Promise<AgentSessionCommandResult> {
    return this.command(sessionId, { commandType: "approval", runId, payload: { approvalId, decision: "rejected", ...(reason ? { reason } : {}) } });
  }

  /** Claims the oldest queued run matching req, waiting up to req.wait; undefined when none came. */
  async claim(req: ClaimRequest, signal?: AbortSignal): Promise<Claim | undefined> {
    return this.request<Claim>("POST", "/v1/runs/claim", JSON.stringify(req), { "Content-Type": "application/json" }, signal);
  }

  /** Renews a lease for leaseTtl (such as "30s"); LEASE_LOST means the run is no longer yours. */
  async renewLease(run: { sessionId: string; runId: string }, lease: Lease, leaseTtl?: string): Promise<Lease> {
    const body = JSON.stringify({ leaseId: lease.leaseId, token: lease.token, ...(leaseTtl ? { leaseTtl } : {}) });
    return (await this.request<Lease>("POST", leasePath(run), body, { "Content-Type": "application/json" }))!;
  }

  /** Gives a lease up. */
  async releaseLease(run: { sessionId: string; runId: string }, lease: Lease): Promise<void> {
    await this.request("POST", leasePath(run) + "/release", JSON.stringify({ leaseId: lease.leaseId, token: lease.token }), { "Content-Type": "application/json" });
  }
}

const leasePath = (run: { sessionId: string; runId: string }) => sessionPath(run.sessionId) + "/runs/" + encodeURIComponent(run.runId) + "/lease";

function decodeError(status: number, text: string, retryAfter: string | null): SessiondError {
  const after = retryAfter !== null && /^\d+$/.test(retryAfter) ? Number(retryAfter) : undefined;
  try {
    const e = JSON.parse(text)?.error;
    if (e && typeof e.code === "string") return new SessiondError(e.code, e.message ?? "", status, e.details ?? [], e.fields ?? {}, after);
  } catch {}
  return new SessiondError("HTTP_" + status, text.trim() || `HTTP ${status}`, status, [], {}, after);
}

/** One server-sent events block. */
interface SSEBlock {
  id?: string;
  event?: string;
  data?: string;
}

/** Splits a text/event-stream body into blocks; a block cut off by the end of the body is dropped. */
async function* sseBlocks(body: ReadableStream<Uint8Array>): AsyncGenerator<SSEBlock> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let block: SSEBlock = {};
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, "");
        buf = buf.slice(nl + 1);
        if (line === "") {
          if (block.id !== undefined || block.event !== undefined || block.data !== undefined) yield block;
          block = {};
        } else if (line.startsWith(":")) {
          continue;
        } else {
          const i = line.indexOf(":");
          const field = i < 0 ? line : line.slice(0, i);
          const value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
          if (field === "id") block.id = value;
          else if (field === "event") block.event = value;
          else if (field === "data") block.data = block.data === undefined ? value : block.data + "\n" + value;
        }
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}
