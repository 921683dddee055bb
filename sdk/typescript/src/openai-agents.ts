// @sessiond/sdk/openai-agents: the OpenAI Agents SDK adapter (@openai/agents, a peer
// dependency of this entry point only). A tracing processor records the spans of a run into
// its job's session (agents, handoffs and guardrails as tasks, each turn's usage) and run hooks
// record what the spans do not carry (tool calls with their call ids, inputs and outputs, each
// agent's final output as an assistant message). A stop command aborts the run's signal; a
// steer is put before the next model call as a user message (callModelInputFilter).

import { Runner, addTraceProcessor, generateTraceId, type Agent, type AgentInputItem, type RunConfig, type RunResult, type Span, type Trace, type TracingProcessor } from "@openai/agents";
import type { EventInput } from "./client.js";
import type { Job, Steer } from "./worker.js";
import { Recorder, endOfAbort, finishRun, nowISO, type RunEnd } from "./recorder.js";

/**
 * A TracingProcessor that sends the spans of the runs attached to it (by trace id) to their
 * recorders; spans of other traces are ignored. Register it once (sessiondTracing() does) and
 * attach a run with AgentsRun.
 */
export class SessiondTracingProcessor implements TracingProcessor {
  private readonly runs = new Map<string, AgentsRun>();

  /** @internal Attaches a run's trace. */
  attach(traceId: string, run: AgentsRun): void {
    this.runs.set(traceId, run);
  }

  /** @internal Detaches a run's trace. */
  detach(traceId: string): void {
    this.runs.delete(traceId);
  }

  async onTraceStart(_trace: Trace): Promise<void> {}
  async onTraceEnd(_trace: Trace): Promise<void> {}

  async onSpanStart(span: Span<any>): Promise<void> {
    this.runs.get(span.traceId)?.spanStarted(span);
  }

  async onSpanEnd(span: Span<any>): Promise<void> {
    this.runs.get(span.traceId)?.spanEnded(span);
  }

  async shutdown(): Promise<void> {}
  async forceFlush(): Promise<void> {}
}

let shared: SessiondTracingProcessor | undefined;

/**
 * The process's SessiondTracingProcessor, added to the SDK's trace processors the first time
 * (addTraceProcessor, beside the exporters already set). Tracing must be on for the spans to
 * be recorded (it is unless disabled, e.g. by OPENAI_AGENTS_DISABLE_TRACING).
 */
export function sessiondTracing(): SessiondTracingProcessor {
  if (!shared) {
    shared = new SessiondTracingProcessor();
    addTraceProcessor(shared);
  }
  return shared;
}

/** Options of an AgentsRun. */
export interface AgentsRunOptions {
  /** The processor the run's trace is attached to (default sessiondTracing()). */
  processor?: SessiondTracingProcessor;
  /** More of the Runner's configuration; traceId and callModelInputFilter are the run's. */
  config?: Partial<RunConfig>;
  /** Told when a steer arrives (before the next model call takes it). */
  onSteer?: (s: Steer) => void;
}

/** How a recorded Agents SDK run ended. */
export interface AgentsRunOutcome {
  end: RunEnd;
  result?: RunResult<any, any>;
  /** The steers the run took, in order. */
  steers: Steer[];
}

const parse = (s: unknown): unknown => {
  if (typeof s !== "string") return s ?? null;
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
};

/** One Agents SDK run recorded into a job's session, through a Runner it configures. */
export class AgentsRun {
  readonly job: Job;
  readonly recorder: Recorder;
  /** The run's trace id: its spans are recorded into the job's session. */
  readonly traceId = generateTraceId();
  /** The Runner to run agents with: the trace id, the steering filter and the hooks are set. */
  readonly runner: Runner;
  private readonly processor: SessiondTracingProcessor;
  private readonly injected: { at: number; item: AgentInputItem; steer: Steer }[] = [];
  private readonly startedAt = performance.now();
  private turn = 0;

  constructor(job: Job, opts: AgentsRunOptions = {}) {
    this.job = job;
    this.recorder = new Recorder(job);
    this.processor = opts.processor ?? sessiondTracing();
    if (opts.onSteer) job.onSteer(opts.onSteer);
    const userFilter = opts.config?.callModelInputFilter;
    this.runner = new Runner({
      traceIncludeSensitiveData: true,
      workflowName: `sessiond ${job.sessionId} ${job.runId}`,
      ...opts.config,
      traceId: this.traceId,
      callModelInputFilter: async (args) => {
        const data = userFilter ? await userFilter(args) : args.modelData;
        return { ...data, input: this.steered(data.input) };
      },
    });
    this.hook();
  }

  private record(ev: EventInput) {
    this.recorder.record({ sourceMessageId: this.job.claim.run.sourceMessageId, ...ev } as EventInput);
  }

  /** The model's input with every steer taken so far put back where it was first put. */
  private steered(input: AgentInputItem[]): AgentInputItem[] {
    for (const s of this.job.takeSteers()) {
      this.injected.push({ at: input.length, item: { role: "user", content: s.text } as AgentInputItem, steer: s });
      this.record({ eventType: "steer", payload: { commandId: s.commandId, targetRunId: this.job.runId, text: s.text, status: "applied" } } as EventInput);
    }
    if (this.injected.length === 0) return input;
    const out: AgentInputItem[] = [];
    let k = 0;
    for (let i = 0; i <= input.length; i++) {
      while (k < this.injected.length && this.injected[k].at === i) out.push(this.injected[k++].item);
      if (i < input.length) out.push(input[i]);
    }
    return out;
  }

  /** The steers this run took, in order. */
  get steers(): Steer[] {
    return this.injected.map((i) => i.steer);
  }

  private hook() {
    this.runner.on("agent_tool_start", (_ctx, _agent, tool, details) => {
      const call = details.toolCall as { callId?: string; id?: string; name?: string; arguments?: string };
      this.record({ eventType: "tool", payload: { toolCallId: call.callId ?? call.id ?? tool.name, toolName: tool.name, status: "running", input: parse(call.arguments), startedAt: nowISO() } } as EventInput);
    });
    this.runner.on("agent_tool_end", (_ctx, _agent, tool, result, details) => {
      const call = details.toolCall as { callId?: string; id?: string };
      this.record({ eventType: "tool", payload: { toolCallId: call.callId ?? call.id ?? tool.name, toolName: tool.name, status: "completed", output: parse(result), completedAt: nowISO() } } as EventInput);
    });
    this.runner.on("agent_end", (_ctx, agent, output) => {
      if (typeof output !== "string" || output === "") return;
      this.record({ eventType: "message", payload: { messageId: `${this.job.runId}-${agent.name}-${this.turn}`, role: "assistant", operation: "append", parts: [{ type: "text", text: output }], status: "completed" } } as EventInput);
    });
  }

  /** @internal A span of the run's trace started. */
  spanStarted(span: Span<any>): void {
    const d = span.spanData;
    if (d.type === "agent") {
      this.record({ eventType: "task", payload: { taskId: span.spanId, title: `agent ${d.name}`, status: "running" } } as EventInput);
    }
  }

  /** @internal A span of the run's trace ended. */
  spanEnded(span: Span<any>): void {
    const d = span.spanData;
    const failed = span.error !== null;
    const detail = span.error?.message;
    switch (d.type) {
      case "agent":
        this.record({ eventType: "task", payload: { taskId: span.spanId, title: `agent ${d.name}`, status: failed ? "failed" : "completed", ...(detail ? { detail } : {}) } } as EventInput);
        break;
      case "handoff":
        this.record({ eventType: "task", payload: { taskId: span.spanId, title: `handoff ${d.from_agent ?? "?"} → ${d.to_agent ?? "?"}`, status: failed ? "failed" : "completed", ...(detail ? { detail } : {}) } } as EventInput);
        break;
      case "guardrail":
        this.record({ eventType: "task", payload: { taskId: span.spanId, title: `guardrail ${d.name}`, status: d.triggered ? "failed" : "completed", detail: d.triggered ? "tripwire triggered" : "passed" } } as EventInput);
        break;
      case "turn":
        this.turn++;
        if (d.usage) {
          this.record({ eventType: "usage", payload: { inputTokens: d.usage.input_tokens, outputTokens: d.usage.output_tokens, totalTokens: d.usage.input_tokens + d.usage.output_tokens } } as EventInput);
        }
        break;
    }
  }

  /**
   * Runs agent on input as the job's run: appends "running", runs it with the job's signal,
   * records it, and ends the run completed, stopped (a stop command aborted it) or failed (a
   * guardrail's tripwire, a model error: an error event first). It does not throw.
   */
  async run(agent: Agent<any, any>, input: string | AgentInputItem[]): Promise<AgentsRunOutcome> {
    this.processor.attach(this.traceId, this);
    let end: RunEnd = { status: "completed" };
    let result: RunResult<any, any> | undefined;
    try {
      await this.job.status("running", { startedAt: nowISO() });
      result = await this.runner.run(agent, input, { signal: this.job.signal });
    } catch (e) {
      end = this.job.signal.aborted ? endOfAbort(this.job) : { status: "failed", error: e };
    } finally {
      this.processor.detach(this.traceId);
    }
    await finishRun(this.job, this.recorder, this.startedAt, end, "AGENT_ERROR");
    return { end, result, steers: this.steers };
  }
}

/** Runs agent on input as the job's run (see AgentsRun.run). */
export function agentsRun(job: Job, agent: Agent<any, any>, input: string | AgentInputItem[], opts: AgentsRunOptions = {}): Promise<AgentsRunOutcome> {
  return new AgentsRun(job, opts).run(agent, input);
}
