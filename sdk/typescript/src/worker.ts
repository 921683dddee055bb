// The worker loop of the runtime protocol (docs/runtime.md): claim a queued run with a long
// poll, renew its lease in the background, carry the lease (Sessiond-Lease) on every write,
// release it when the task is done, and abort the task's AbortSignal when the run is asked to
// stop or the lease is lost. Steer commands and approval decisions aimed at the run reach the
// task through its Job as they are appended (onSteer, takeSteers, approval).

import type { AgentSessionEvent, ApprovalPayload, SteerPayload, ToolPayload } from "./contract.js";
import { Client, SessiondError, type AppendOptions, type AppendResponse, type Claim, type ClaimRequest, type EventInput, type Lease } from "./client.js";

/** Guidance a steer command sent to the run: the server's "accepted" steer event. */
export interface Steer {
  /** The steer command's id, which the steer's "applied" or "failed" event repeats. */
  commandId: string;
  /** The guidance. */
  text: string;
  /** When the job heard of it (performance.now()). */
  receivedAt: number;
}

/** An approval decision: the server's approval event with status "approved" or "rejected". */
export interface ApprovalDecision {
  approvalId: string;
  decision: "approved" | "rejected";
  /** When the job heard of it (performance.now()). */
  receivedAt: number;
}

/** What requestApproval appends: the tool pending, the approval requested, the run waiting. */
export interface ApprovalRequest {
  approvalId: string;
  toolCallId: string;
  toolName: string;
  title: string;
  input?: unknown;
  description?: string;
}

/** A claimed run in a worker's hands. */
export class Job {
  /** What the claim answered: the run, its lease, its attempt. */
  readonly claim: Claim;
  /** Aborted when a stop command reaches the run (reason "stop"), the lease is lost ("lease-lost") or the worker is stopped hard. */
  readonly signal: AbortSignal;
  private current: Lease;
  private readonly client: Client;
  private readonly steers = new Map<string, Steer>();
  private readonly steerListeners = new Set<(s: Steer) => void>();
  private readonly decisions = new Map<string, ApprovalDecision>();
  private readonly approvalWaiters = new Map<string, ((d: ApprovalDecision) => void)[]>();

  constructor(client: Client, claim: Claim, signal: AbortSignal) {
    this.client = client;
    this.claim = claim;
    this.current = claim.lease;
    this.signal = signal;
  }

  /** The run's session. */
  get sessionId(): string {
    return this.claim.run.sessionId;
  }

  /** The run's id. */
  get runId(): string {
    return this.claim.run.runId;
  }

  /**
   * Calls listener with each steer aimed at the run as soon as it is appended, and at once
   * with those that came before and are not taken yet; it returns the function that
   * unsubscribes. A listener that applies a steer should take it (takeSteers) and confirm it
   * (steerApplied).
   */
  onSteer(listener: (s: Steer) => void): () => void {
    this.steerListeners.add(listener);
    for (const s of this.steers.values()) listener(s);
    return () => this.steerListeners.delete(listener);
  }

  /** The steers that came and are not taken yet, oldest first; each is taken once. */
  takeSteers(): Steer[] {
    const out = [...this.steers.values()];
    this.steers.clear();
    return out;
  }

  /** Appends the steer as "applied" (the run followed the guidance). */
  steerApplied(s: Steer): Promise<AppendResponse> {
    return this.append({ eventType: "steer", payload: { commandId: s.commandId, targetRunId: this.runId, text: s.text, status: "applied" } } as EventInput);
  }

  /**
   * Asks for an approval: appends the tool call "pending", the approval "requested" and the
   * run's status "waiting_approval" in one batch. Wait for the decision with approval().
   */
  requestApproval(req: ApprovalRequest): Promise<AppendResponse> {
    const tool: ToolPayload = { toolCallId: req.toolCallId, toolName: req.toolName, status: "pending", ...(req.input !== undefined ? { input: req.input } : {}) };
    const approval: ApprovalPayload = { approvalId: req.approvalId, toolCallId: req.toolCallId, status: "requested", title: req.title, ...(req.description ? { description: req.description } : {}) };
    return this.append([
      { eventType: "tool", payload: tool },
      { eventType: "approval", payload: approval },
      { eventType: "status", sourceMessageId: this.claim.run.sourceMessageId, payload: { status: "waiting_approval" } },
    ] as EventInput[]);
  }

  /**
   * Resolves with the decision on approval approvalId once a person's approval command is
   * appended (at once if it already was); rejects when the job's signal aborts.
   */
  approval(approvalId: string): Promise<ApprovalDecision> {
    const known = this.decisions.get(approvalId);
    if (known) return Promise.resolve(known);
    return new Promise((resolve, reject) => {
      if (this.signal.aborted) return reject(new Error(`approval ${approvalId}: the run was ${this.signal.reason}`));
      const onAbort = () => reject(new Error(`approval ${approvalId}: the run was ${this.signal.reason}`));
      this.signal.addEventListener("abort", onAbort, { once: true });
      const list = this.approvalWaiters.get(approvalId) ?? [];
      list.push((d) => {
        this.signal.removeEventListener("abort", onAbort);
        resolve(d);
      });
      this.approvalWaiters.set(approvalId, list);
    });
  }

  /**
   * @internal The worker's watch hands each event of the run's session to the job, from the
   * start of the log: a steer already applied or failed (by an earlier attempt) is not taken
   * again, and a decision made before the claim is known at once.
   */
  observe(ev: AgentSessionEvent): void {
    if (ev.runId !== this.runId) return;
    if (ev.eventType === "steer") {
      const p = ev.payload as SteerPayload;
      if (p.status === "accepted") {
        const s: Steer = { commandId: p.commandId, text: p.text, receivedAt: performance.now() };
        this.steers.set(p.commandId, s);
        for (const l of this.steerListeners) l(s);
      } else {
        this.steers.delete(p.commandId); // applied or failed already (an earlier attempt)
      }
    } else if (ev.eventType === "approval") {
      const p = ev.payload as ApprovalPayload;
      if (p.status === "approved" || p.status === "rejected") {
        const d: ApprovalDecision = { approvalId: p.approvalId, decision: p.status, receivedAt: performance.now() };
        this.decisions.set(p.approvalId, d);
        for (const w of this.approvalWaiters.get(p.approvalId) ?? []) w(d);
        this.approvalWaiters.delete(p.approvalId);
      }
    }
  }

  /** The lease as last renewed. */
  get lease(): Lease {
    return this.current;
  }

  /** @internal */
  setLease(l: Lease) {
    this.current = l;
  }

  /** Appends events to the run's session under the job's lease; events without runId get the run's. */
  append(events: EventInput | EventInput[], opts: AppendOptions = {}): Promise<AppendResponse> {
    const list = (Array.isArray(events) ? events : [events]).map((e) => ({ runId: this.claim.run.runId, ...e }) as EventInput);
    return this.client.append(this.claim.run.sessionId, list, { ...opts, lease: this.current.header });
  }

  /** Appends the run's status under the lease ("running", "completed", "stopped", ...). */
  status(status: string, extra: Record<string, unknown> = {}): Promise<AppendResponse> {
    return this.append({ eventType: "status", sourceMessageId: this.claim.run.sourceMessageId, payload: { status, ...extra } } as EventInput);
  }
}

/** Options of a Worker. */
export interface WorkerOptions {
  /** Which runs to claim; wait defaults to "30s", leaseTtl to "30s". */
  filter: ClaimRequest;
  /**
   * Does a run's work, appending through job.append. It should return promptly once
   * job.signal aborts. When it returns, the lease is released; when it throws, or the lease
   * was lost, the lease is left to expire and the server fails or queues the run again.
   */
  task: (job: Job) => Promise<void>;
  /** Hears of failed claims, renewals, releases and task errors. */
  onError?: (err: unknown) => void;
}

const parseDuration = (s: string | undefined, def: number): number => {
  const m = s?.match(/^(\d+(?:\.\d+)?)(ms|s|m)$/);
  if (!m) return def;
  return Number(m[1]) * (m[2] === "ms" ? 1 : m[2] === "s" ? 1000 : 60000);
};

/** Claims runs one at a time and hands each to its task until stopped. */
export class Worker {
  private readonly client: Client;
  private readonly opts: WorkerOptions;
  private readonly stopping = new AbortController();

  constructor(client: Client, opts: WorkerOptions) {
    this.client = client;
    this.opts = opts;
  }

  /** Asks the worker to stop gracefully: no new claims, the run in hand is finished first. */
  stop(): void {
    this.stopping.abort(new Error("worker stopped"));
  }

  private report(err: unknown) {
    if (err !== undefined) this.opts.onError?.(err);
  }

  /** Claims and handles runs until stop() is called; resolves when the run in hand is done. */
  async run(): Promise<void> {
    const filter = { wait: "30s", leaseTtl: "30s", ...this.opts.filter };
    let backoff = 100;
    while (!this.stopping.signal.aborted) {
      let claim: Claim | undefined;
      try {
        claim = await this.client.claim(filter, this.stopping.signal);
        backoff = 100;
      } catch (e) {
        if (this.stopping.signal.aborted) return;
        this.report(e);
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 10000);
        continue;
      }
      if (claim) await this.handle(claim, parseDuration(filter.leaseTtl, 30000));
    }
  }

  private async handle(claim: Claim, ttlMs: number): Promise<void> {
    const abort = new AbortController();
    const job = new Job(this.client, claim, abort.signal);
    const run = claim.run;
    const renewer = setInterval(async () => {
      try {
        job.setLease(await this.client.renewLease(run, job.lease, `${ttlMs}ms`));
      } catch (e) {
        this.report(e);
        if (e instanceof SessiondError && e.code === "LEASE_LOST") abort.abort("lease-lost");
      }
    }, ttlMs / 3);
    // A stop command shows in the log as the run's status "stopping": follow the session's
    // stream and abort the task when it comes.
    const watch = new AbortController();
    const watching = (async () => {
      try {
        for await (const ev of this.client.follow(run.sessionId, { signal: watch.signal })) {
          if (ev.eventType === "status" && ev.runId === run.runId && ev.payload.status === "stopping") {
            abort.abort("stop");
            return;
          }
          job.observe(ev);
        }
      } catch (e) {
        if (!watch.signal.aborted) this.report(e);
      }
    })();
    let failed = false;
    try {
      await this.opts.task(job);
    } catch (e) {
      failed = true;
      this.report(e);
    } finally {
      clearInterval(renewer);
      watch.abort();
      await watching;
    }
    if (failed || abort.signal.reason === "lease-lost") return; // the lease expires
    try {
      await this.client.releaseLease(run, job.lease);
    } catch (e) {
      // A run that ended has dropped its lease already.
      if (!(e instanceof SessiondError && e.code === "LEASE_LOST")) this.report(e);
    }
  }
}
