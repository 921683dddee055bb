// The ordered, batching writer the framework adapters record through: events are written in
// the order they were recorded, one batch in flight at a time, and while a batch is in flight
// the next one gathers (a streamed reply's consecutive text deltas become one event).

import type { EventInput, AppendResponse } from "./client.js";
import type { Job } from "./worker.js";

/** Where a recorder writes: a worker's Job (under its lease), or anything that appends a batch. */
export interface RecordTarget {
  append(events: EventInput[]): Promise<AppendResponse>;
}

/** The text of a message event's parts, when they are all text parts. */
const onlyText = (parts: unknown[]): string | undefined => {
  let out = "";
  for (const p of parts) {
    const t = p as { type?: string; text?: unknown };
    if (t?.type !== "text" || typeof t.text !== "string") return undefined;
    out += t.text;
  }
  return out;
};

/**
 * Records events into a session in order. record() never waits; flush() waits until every
 * event recorded so far is stored and throws the first write error (a LEASE_LOST, say), after
 * which nothing more is written.
 */
export class Recorder {
  private readonly target: RecordTarget;
  private queue: EventInput[] = [];
  private writing: Promise<void> | undefined;
  private failure: unknown;
  /** How many events were stored. */
  written = 0;

  constructor(target: RecordTarget) {
    this.target = target;
  }

  /** Queues an event; a streaming text or reasoning delta is merged into the one queued just before it. */
  record(ev: EventInput): void {
    if (this.failure !== undefined) return;
    const last = this.queue[this.queue.length - 1];
    if (last && mergeInto(last, ev)) return;
    this.queue.push(ev);
    this.writing ??= this.drain();
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0 && this.failure === undefined) {
      const batch = this.queue;
      this.queue = [];
      try {
        await this.target.append(batch);
        this.written += batch.length;
      } catch (e) {
        this.failure = e;
        this.queue = [];
      }
    }
    this.writing = undefined;
  }

  /** Waits until everything recorded is stored; throws the first write error. */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
    if (this.failure !== undefined) throw this.failure;
  }

  /** The first write error, if any. */
  get error(): unknown {
    return this.failure;
  }
}

/** Merges ev into last when both are streaming deltas of the same message or reasoning. */
function mergeInto(last: EventInput, ev: EventInput): boolean {
  if (last.eventType !== ev.eventType || last.runId !== ev.runId) return false;
  if (last.eventType === "message" && ev.eventType === "message") {
    const a = last.payload, b = ev.payload;
    if (a.messageId !== b.messageId || a.operation !== "append" || b.operation !== "append" || a.role !== b.role || a.status !== "streaming") return false;
    const ta = onlyText(a.parts), tb = onlyText(b.parts);
    if (ta === undefined || tb === undefined) return false;
    a.parts = ta + tb === "" ? [] : [{ type: "text", text: ta + tb }];
    a.status = b.status;
    return true;
  }
  if (last.eventType === "reasoning" && ev.eventType === "reasoning") {
    const a = last.payload, b = ev.payload;
    if (a.reasoningId !== b.reasoningId || a.status !== "streaming") return false;
    a.text += b.text;
    a.status = b.status;
    return true;
  }
  return false;
}

/** The current time as the contract's timestamps want it. */
export const nowISO = (): string => new Date().toISOString();

/** How a recorded run ended. */
export type RunEnd = { status: "completed" } | { status: "stopped" } | { status: "failed"; error: unknown } | { status: "lease-lost" };

/**
 * Appends a job's terminal status (and, for a failure, an error event before it), with the
 * timestamps and duration the contract asks for; nothing when the lease was lost. It flushes
 * the recorder first.
 */
export async function finishRun(job: Job, rec: Recorder, startedAt: number, end: RunEnd, errorCode = "AGENT_ERROR"): Promise<void> {
  if (end.status === "lease-lost") return;
  await rec.flush();
  const durationMs = Math.max(0, Math.round(performance.now() - startedAt));
  if (end.status === "failed") {
    const message = end.error instanceof Error ? end.error.message : String(end.error);
    await job.append({ eventType: "error", payload: { code: errorCode, message: message || "the agent failed", retryable: false } } as EventInput);
    await job.status("failed", { failedAt: nowISO(), durationMs });
  } else if (end.status === "stopped") {
    await job.status("stopped", { stoppedAt: nowISO(), durationMs });
  } else {
    await job.status("completed", { completedAt: nowISO(), durationMs });
  }
}

/** Whether the job's run was asked to stop (rather than its lease being lost). */
export const endOfAbort = (job: Job): RunEnd => (job.signal.reason === "lease-lost" ? { status: "lease-lost" } : { status: "stopped" });
