// @sessiond/sdk/ai: the Vercel AI SDK adapter (ai 6; a peer dependency of this entry point
// only). It records a streamText or generateText run into the job's session (text deltas,
// reasoning, tool calls and results, usage per step, finish, abort, errors) and brings the
// commands a person sends to the run: a stop aborts the call's abortSignal, a steer becomes
// the next step's user message (prepareStep).

import { streamText, generateText, type ModelMessage, type PrepareStepFunction, type TextStreamPart, type ToolSet, type LanguageModelUsage } from "ai";
import type { EventInput } from "./client.js";
import type { Job, Steer } from "./worker.js";
import { Recorder, endOfAbort, finishRun, nowISO, type RunEnd } from "./recorder.js";

/** The usage of a step as the contract's usage event carries it. */
export function usagePayload(u: LanguageModelUsage | undefined): { inputTokens?: number; outputTokens?: number; totalTokens?: number } {
  const out: { inputTokens?: number; outputTokens?: number; totalTokens?: number } = {};
  if (u?.inputTokens !== undefined) out.inputTokens = u.inputTokens;
  if (u?.outputTokens !== undefined) out.outputTokens = u.outputTokens;
  if (u?.totalTokens !== undefined) out.totalTokens = u.totalTokens;
  else if (out.inputTokens !== undefined && out.outputTokens !== undefined) out.totalTokens = out.inputTokens + out.outputTokens;
  return out;
}

/** Options of an AIRun. */
export interface AIRunOptions<TOOLS extends ToolSet> {
  /** Your own prepareStep, called first; the steers are added to the messages it returns. */
  prepareStep?: PrepareStepFunction<TOOLS>;
  /** Told when a steer arrives (before the next step takes it). */
  onSteer?: (s: Steer) => void;
}

/** How a recorded AI SDK run ended, with its totals. */
export interface AIRunOutcome {
  end: RunEnd;
  finishReason?: string;
  totalUsage?: LanguageModelUsage;
  /** The steers the run took, in order. */
  steers: Steer[];
}

/**
 * One AI SDK call recorded into a job's session. Pass settings (abortSignal and prepareStep)
 * to streamText or generateText, then hand the result to recordStream or recordGenerate.
 */
export class AIRun<TOOLS extends ToolSet = ToolSet> {
  readonly job: Job;
  readonly recorder: Recorder;
  /** The steers taken so far, each with the index of the message it was put before. */
  private readonly injected: { at: number; message: ModelMessage; steer: Steer }[] = [];
  private readonly userPrepare?: PrepareStepFunction<TOOLS>;
  private step = 0;
  private readonly startedAt = performance.now();

  constructor(job: Job, opts: AIRunOptions<TOOLS> = {}) {
    this.job = job;
    this.recorder = new Recorder(job);
    this.userPrepare = opts.prepareStep;
    if (opts.onSteer) job.onSteer(opts.onSteer);
  }

  /** The settings to spread into streamText / generateText: the job's abortSignal and a prepareStep that adds the steers. */
  get settings(): { abortSignal: AbortSignal; prepareStep: PrepareStepFunction<TOOLS> } {
    return { abortSignal: this.job.signal, prepareStep: (o) => this.prepareStep(o) };
  }

  private async prepareStep(o: Parameters<PrepareStepFunction<TOOLS>>[0]): Promise<Awaited<ReturnType<PrepareStepFunction<TOOLS>>>> {
    const mine = (await this.userPrepare?.(o)) ?? undefined;
    const base = mine?.messages ?? o.messages;
    for (const s of this.job.takeSteers()) {
      this.injected.push({ at: base.length, message: { role: "user", content: s.text }, steer: s });
      this.recorder.record({ eventType: "steer", payload: { commandId: s.commandId, targetRunId: this.job.runId, text: s.text, status: "applied" } } as EventInput);
    }
    const placed = this.injected.filter((i) => i.at !== Number.MAX_SAFE_INTEGER);
    if (placed.length === 0) return mine;
    // Each steer stays where it was put: the SDK rebuilds a step's messages from the prompt
    // and the earlier steps' responses, so the steers are put back in every later step.
    const messages: ModelMessage[] = [];
    let k = 0;
    for (let i = 0; i <= base.length; i++) {
      while (k < placed.length && placed[k].at === i) messages.push(placed[k++].message);
      if (i < base.length) messages.push(base[i]);
    }
    return { ...(mine ?? {}), messages };
  }

  /**
   * The conversation of a finished call (its messages and its response's), with the steers
   * its steps took put back in place; from then on they are part of the messages, not put in
   * again by prepareStep.
   */
  private absorb(conversation: ModelMessage[]): ModelMessage[] {
    const placed = this.injected.filter((i) => i.at !== Number.MAX_SAFE_INTEGER);
    const out: ModelMessage[] = [];
    let k = 0;
    for (let i = 0; i <= conversation.length; i++) {
      while (k < placed.length && placed[k].at === i) out.push(placed[k++].message);
      if (i < conversation.length) out.push(conversation[i]);
    }
    for (const p of placed) p.at = Number.MAX_SAFE_INTEGER;
    return out;
  }

  /**
   * The messages that continue a finished call whose conversation was conversation: it, the
   * steers its steps took, and the steers that came during its last step, which no step took,
   * as user messages (each recorded "applied"); undefined when no steer came late.
   */
  continuation(conversation: ModelMessage[]): ModelMessage[] | undefined {
    const late = this.job.takeSteers();
    if (late.length === 0) return undefined;
    const out = this.absorb(conversation);
    for (const s of late) {
      this.injected.push({ at: Number.MAX_SAFE_INTEGER, message: { role: "user", content: s.text }, steer: s });
      this.recorder.record({ eventType: "steer", payload: { commandId: s.commandId, targetRunId: this.job.runId, text: s.text, status: "applied" } } as EventInput);
      out.push({ role: "user", content: s.text });
    }
    return out;
  }

  /** The steers this run took, in order. */
  get steers(): Steer[] {
    return this.injected.map((i) => i.steer);
  }

  private id(kind: string, id: string): string {
    return `${this.job.runId}-s${this.step}-${kind}-${id}`;
  }

  private record(ev: EventInput) {
    this.recorder.record({ sourceMessageId: this.job.claim.run.sourceMessageId, ...ev } as EventInput);
  }

  /** Records one part of streamText's fullStream. */
  recordPart(part: TextStreamPart<TOOLS>): void {
    const p = part as TextStreamPart<ToolSet>;
    switch (p.type) {
      case "start-step":
        break;
      case "text-start":
        this.record({ eventType: "message", payload: { messageId: this.id("text", p.id), role: "assistant", operation: "append", parts: [], status: "streaming" } } as EventInput);
        break;
      case "text-delta":
        this.record({ eventType: "message", payload: { messageId: this.id("text", p.id), role: "assistant", operation: "append", parts: [{ type: "text", text: p.text }], status: "streaming" } } as EventInput);
        break;
      case "text-end":
        this.record({ eventType: "message", payload: { messageId: this.id("text", p.id), role: "assistant", operation: "append", parts: [], status: "completed" } } as EventInput);
        break;
      case "reasoning-start":
        this.record({ eventType: "reasoning", payload: { reasoningId: this.id("reasoning", p.id), text: "", status: "streaming" } } as EventInput);
        break;
      case "reasoning-delta":
        this.record({ eventType: "reasoning", payload: { reasoningId: this.id("reasoning", p.id), text: p.text, status: "streaming" } } as EventInput);
        break;
      case "reasoning-end":
        this.record({ eventType: "reasoning", payload: { reasoningId: this.id("reasoning", p.id), text: "", status: "completed" } } as EventInput);
        break;
      case "tool-call":
        this.record({ eventType: "tool", payload: { toolCallId: p.toolCallId, toolName: p.toolName, status: "running", input: p.input ?? null, startedAt: nowISO() } } as EventInput);
        break;
      case "tool-result":
        this.record({ eventType: "tool", payload: { toolCallId: p.toolCallId, toolName: p.toolName, status: "completed", output: p.output ?? null, completedAt: nowISO() } } as EventInput);
        break;
      case "tool-error":
        this.record({ eventType: "tool", payload: { toolCallId: p.toolCallId, toolName: p.toolName, status: "failed", error: String(p.error instanceof Error ? p.error.message : p.error), completedAt: nowISO() } } as EventInput);
        break;
      case "tool-output-denied":
        this.record({ eventType: "tool", payload: { toolCallId: p.toolCallId, toolName: p.toolName, status: "denied" } } as EventInput);
        break;
      case "finish-step":
        this.record({ eventType: "usage", payload: usagePayload(p.usage) } as EventInput);
        this.step++;
        break;
    }
  }

  /**
   * Consumes a streamText result's fullStream, recording every part, and says how it ended
   * (without appending the run's terminal status: finish does). It does not throw for the
   * model's errors or an abort.
   */
  async consume(result: { fullStream: AsyncIterable<TextStreamPart<TOOLS>> }): Promise<AIRunOutcome> {
    let end: RunEnd = { status: "completed" };
    let finishReason: string | undefined;
    let totalUsage: LanguageModelUsage | undefined;
    try {
      for await (const part of result.fullStream) {
        this.recordPart(part);
        if (part.type === "finish") {
          finishReason = part.finishReason;
          totalUsage = part.totalUsage;
        } else if (part.type === "abort") {
          end = endOfAbort(this.job);
        } else if (part.type === "error") {
          end = this.job.signal.aborted ? endOfAbort(this.job) : { status: "failed", error: part.error };
        }
      }
    } catch (e) {
      end = this.job.signal.aborted ? endOfAbort(this.job) : { status: "failed", error: e };
    }
    return { end, finishReason, totalUsage, steers: this.steers };
  }

  /** Appends the run's terminal status for end (completed, stopped, or failed after an error event). */
  finish(end: RunEnd): Promise<void> {
    return finishRun(this.job, this.recorder, this.startedAt, end, "MODEL_ERROR");
  }

  /**
   * Consumes a streamText result's fullStream, recording every part, and appends the run's
   * terminal status: completed, stopped (the stop aborted the call), or failed (an error
   * event first). It does not throw for the model's errors or an abort: see the outcome.
   */
  async recordStream(result: { fullStream: AsyncIterable<TextStreamPart<TOOLS>> }): Promise<AIRunOutcome> {
    const out = await this.consume(result);
    await this.finish(out.end);
    return out;
  }

  /**
   * Records a generateText call once its promise settles: every step's reasoning, text, tool
   * calls and results and usage, then the terminal status. An abort (the stop) or a failure
   * becomes the run's stopped or failed status.
   */
  async recordGenerate(call: Promise<{ steps: { content: unknown[]; usage: LanguageModelUsage }[]; finishReason: string; totalUsage: LanguageModelUsage }>): Promise<AIRunOutcome> {
    let end: RunEnd = { status: "completed" };
    try {
      const r = await call;
      for (const step of r.steps) {
        for (const c of step.content as { type: string; text?: string; toolCallId?: string; toolName?: string; input?: unknown; output?: unknown; error?: unknown }[]) {
          if (c.type === "text") {
            this.recordPart({ type: "text-start", id: "0" } as TextStreamPart<TOOLS>);
            this.recordPart({ type: "text-delta", id: "0", text: c.text ?? "" } as TextStreamPart<TOOLS>);
            this.recordPart({ type: "text-end", id: "0" } as TextStreamPart<TOOLS>);
          } else if (c.type === "reasoning") {
            this.recordPart({ type: "reasoning-start", id: "0" } as TextStreamPart<TOOLS>);
            this.recordPart({ type: "reasoning-delta", id: "0", text: c.text ?? "" } as TextStreamPart<TOOLS>);
            this.recordPart({ type: "reasoning-end", id: "0" } as TextStreamPart<TOOLS>);
          } else if (c.type === "tool-call" || c.type === "tool-result" || c.type === "tool-error") {
            this.recordPart(c as TextStreamPart<TOOLS>);
          }
        }
        this.recordPart({ type: "finish-step", usage: step.usage } as TextStreamPart<TOOLS>);
      }
      await finishRun(this.job, this.recorder, this.startedAt, end, "MODEL_ERROR");
      return { end, finishReason: r.finishReason, totalUsage: r.totalUsage, steers: this.steers };
    } catch (e) {
      end = this.job.signal.aborted ? endOfAbort(this.job) : { status: "failed", error: e };
      await finishRun(this.job, this.recorder, this.startedAt, end, "MODEL_ERROR");
      return { end, steers: this.steers };
    }
  }
}

/** streamText's parameters, less the ones the run sets. */
export type StreamTextParams<TOOLS extends ToolSet> = Omit<Parameters<typeof streamText<TOOLS>>[0], "abortSignal">;
/** generateText's parameters, less the ones the run sets. */
export type GenerateTextParams<TOOLS extends ToolSet> = Omit<Parameters<typeof generateText<TOOLS>>[0], "abortSignal">;

/**
 * Runs streamText as the job's run: appends "running", streams the model's work into the
 * session, and ends the run completed, stopped or failed. A stop command aborts the call; a
 * steer command is the next step's user message, and a steer that comes during the last step
 * continues the conversation: streamText again, with the messages so far and the steer.
 */
export async function streamTextRun<TOOLS extends ToolSet>(job: Job, params: StreamTextParams<TOOLS>, opts: Omit<AIRunOptions<TOOLS>, "prepareStep"> & { maxContinuations?: number } = {}): Promise<AIRunOutcome> {
  const run = new AIRun<TOOLS>(job, { ...opts, prepareStep: params.prepareStep });
  await job.status("running", { startedAt: nowISO() });
  const p = params as StreamTextParams<TOOLS> & { prompt?: unknown; messages?: ModelMessage[] };
  let messages: ModelMessage[] | undefined = p.messages ?? (typeof p.prompt === "string" ? [{ role: "user", content: p.prompt }] : undefined);
  let call = { ...params, ...run.settings } as Parameters<typeof streamText<TOOLS>>[0];
  let out: AIRunOutcome;
  for (let n = 0; ; n++) {
    const result = streamText<TOOLS>(call);
    out = await run.consume(result);
    if (out.end.status !== "completed" || messages === undefined || n >= (opts.maxContinuations ?? 16)) break;
    const next = run.continuation([...messages, ...(await result.response).messages]);
    if (!next) break;
    messages = next;
    const { prompt: _prompt, ...rest } = call as typeof call & { prompt?: unknown };
    call = { ...rest, messages } as Parameters<typeof streamText<TOOLS>>[0];
  }
  await run.finish(out.end);
  return out;
}

/** Runs generateText as the job's run, as streamTextRun does (recorded when the call returns). */
export async function generateTextRun<TOOLS extends ToolSet>(job: Job, params: GenerateTextParams<TOOLS>, opts: Omit<AIRunOptions<TOOLS>, "prepareStep"> = {}): Promise<AIRunOutcome> {
  const run = new AIRun<TOOLS>(job, { ...opts, prepareStep: params.prepareStep });
  await job.status("running", { startedAt: nowISO() });
  return run.recordGenerate(generateText<TOOLS>({ ...params, ...run.settings } as Parameters<typeof generateText<TOOLS>>[0]));
}
