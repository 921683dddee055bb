// @sessiond/sdk/langgraph: the LangGraph.js adapter (@langchain/langgraph and @langchain/core,
// peer dependencies of this entry point only). A callback handler records a graph run into the
// job's session: each node's step as a task, each chat model's reply (streamed tokens when the
// model streams) and usage, each tool call with its result. The graph's interrupts become
// approvals a person decides in sessiond, and the graph resumes with the decision; a stop
// command aborts the run's signal; steers come to a node as user messages (takeSteerMessages).

import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import type { LLMResult } from "@langchain/core/outputs";
import type { Serialized } from "@langchain/core/load/serializable";
import type { ChainValues } from "@langchain/core/utils/types";
import { Command } from "@langchain/langgraph";
import type { RunnableConfig } from "@langchain/core/runnables";
import type { EventInput } from "./client.js";
import type { ApprovalDecision, Job, Steer } from "./worker.js";
import { Recorder, endOfAbort, finishRun, nowISO, type RunEnd } from "./recorder.js";

const textOf = (content: unknown): string => {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((c) => (typeof c === "string" ? c : (c as { text?: string })?.text ?? "")).join("");
  return "";
};

/**
 * A LangChain callback handler that records a graph run into a Recorder: node steps (the
 * chain runs LangGraph marks with langgraph_node) as tasks, chat model replies as assistant
 * messages with their usage, tool runs as tool events paired by tool call id.
 */
export class SessiondCallbackHandler extends BaseCallbackHandler {
  name = "sessiond";
  /** Handlers are awaited, so every event is queued before the graph moves on. */
  awaitHandlers = true;
  private readonly rec: (ev: EventInput) => void;
  private readonly steps = new Map<string, { title: string }>();
  private readonly tools = new Map<string, { toolCallId: string; toolName: string }>();
  private readonly streamed = new Set<string>();

  constructor(rec: (ev: EventInput) => void) {
    super();
    this.rec = rec;
  }

  // @langchain/core 1.x calls handleChainStart(chain, inputs, runId, parentRunId, tags,
  // metadata, runType, runName), not in the order its typings declare: the name is read from
  // either place. A node's own run carries the tag graph:step:N and the node's name.
  handleChainStart(_chain: Serialized, _inputs: ChainValues, runId: string, _p3?: string, tags?: string[], metadata?: Record<string, unknown>, p6?: string, p7?: string): void {
    const node = metadata?.langgraph_node;
    const runName = typeof p7 === "string" ? p7 : p6;
    if (typeof node !== "string" || runName !== node || node.startsWith("__") || tags?.includes("langsmith:hidden")) return;
    if (!tags?.some((t) => t.startsWith("graph:step:"))) return;
    const title = `step ${metadata?.langgraph_step ?? "?"}: ${node}`;
    this.steps.set(runId, { title });
    this.rec({ eventType: "task", payload: { taskId: runId, title, status: "running" } } as EventInput);
  }

  handleChainEnd(_outputs: ChainValues, runId: string): void {
    const step = this.steps.get(runId);
    if (!step) return;
    this.steps.delete(runId);
    this.rec({ eventType: "task", payload: { taskId: runId, title: step.title, status: "completed" } } as EventInput);
  }

  handleChainError(err: Error, runId: string): void {
    const step = this.steps.get(runId);
    if (!step) return;
    this.steps.delete(runId);
    // An interrupt is how a node asks for an approval, not a failure.
    const interrupted = err?.name === "GraphInterrupt" || err?.name === "NodeInterrupt";
    this.rec({ eventType: "task", payload: { taskId: runId, title: step.title, status: interrupted ? "pending" : "failed", detail: interrupted ? "interrupted: waiting for a decision" : String(err?.message ?? err) } } as EventInput);
  }

  handleLLMNewToken(token: string, _idx: unknown, runId: string): void {
    if (token === "") return;
    this.streamed.add(runId);
    this.rec({ eventType: "message", payload: { messageId: runId, role: "assistant", operation: "append", parts: [{ type: "text", text: token }], status: "streaming" } } as EventInput);
  }

  handleLLMEnd(output: LLMResult, runId: string): void {
    const gen = output.generations?.[0]?.[0] as { text?: string; message?: BaseMessage & { usage_metadata?: { input_tokens?: number; output_tokens?: number; total_tokens?: number } } } | undefined;
    const text = gen?.message ? textOf(gen.message.content) : gen?.text ?? "";
    if (this.streamed.delete(runId)) {
      this.rec({ eventType: "message", payload: { messageId: runId, role: "assistant", operation: "append", parts: [], status: "completed" } } as EventInput);
    } else if (text !== "") {
      this.rec({ eventType: "message", payload: { messageId: runId, role: "assistant", operation: "append", parts: [{ type: "text", text }], status: "completed" } } as EventInput);
    }
    // A chat model's usage is on its message (usage_metadata); older ones put it in llmOutput.
    const legacy = output.llmOutput?.tokenUsage as { promptTokens?: number; completionTokens?: number; totalTokens?: number } | undefined;
    const u = gen?.message?.usage_metadata ?? (legacy ? { input_tokens: legacy.promptTokens, output_tokens: legacy.completionTokens, total_tokens: legacy.totalTokens } : undefined);
    if (u && (u.input_tokens !== undefined || u.output_tokens !== undefined)) {
      const usage: Record<string, number> = {};
      if (u.input_tokens !== undefined) usage.inputTokens = u.input_tokens;
      if (u.output_tokens !== undefined) usage.outputTokens = u.output_tokens;
      usage.totalTokens = u.total_tokens ?? (u.input_tokens ?? 0) + (u.output_tokens ?? 0);
      this.rec({ eventType: "usage", payload: usage } as EventInput);
    }
  }

  handleToolStart(tool: Serialized, input: string, runId: string, _parentRunId?: string, _tags?: string[], _metadata?: Record<string, unknown>, runName?: string, toolCallId?: string): void {
    const toolName = runName ?? (tool.id?.at(-1) as string | undefined) ?? "tool";
    const id = toolCallId ?? runId;
    this.tools.set(runId, { toolCallId: id, toolName });
    let parsed: unknown = input;
    try {
      parsed = JSON.parse(input);
    } catch {}
    this.rec({ eventType: "tool", payload: { toolCallId: id, toolName, status: "running", input: parsed ?? null, startedAt: nowISO() } } as EventInput);
  }

  handleToolEnd(output: unknown, runId: string): void {
    const t = this.tools.get(runId);
    if (!t) return;
    this.tools.delete(runId);
    const content = (output as { content?: unknown })?.content ?? output;
    let parsed: unknown = content;
    if (typeof content === "string") {
      try {
        parsed = JSON.parse(content);
      } catch {}
    }
    this.rec({ eventType: "tool", payload: { ...t, status: "completed", output: parsed ?? null, completedAt: nowISO() } } as EventInput);
  }

  handleToolError(err: Error, runId: string): void {
    const t = this.tools.get(runId);
    if (!t) return;
    this.tools.delete(runId);
    this.rec({ eventType: "tool", payload: { ...t, status: "failed", error: String(err?.message ?? err), completedAt: nowISO() } } as EventInput);
  }
}

/** What a node passes to interrupt() to ask for an approval; every field is optional. */
export interface ApprovalInterrupt {
  title?: string;
  description?: string;
  toolName?: string;
  toolCallId?: string;
  input?: unknown;
}

/** The graph the adapter runs: a compiled graph; interrupts need it compiled with a checkpointer. */
export interface RunnableGraph {
  invoke(input: unknown, config?: RunnableConfig): Promise<unknown>;
  getState(config: RunnableConfig): Promise<{ tasks: readonly { interrupts?: readonly { id?: string; value?: unknown }[] }[] }>;
}

/** How a recorded graph run ended. */
export interface GraphRunOutcome {
  end: RunEnd;
  /** The graph's last output. */
  output?: unknown;
  /** The approvals the run asked for and their decisions, in order. */
  decisions: ApprovalDecision[];
}

/** One LangGraph run recorded into a job's session. */
export class GraphRun {
  readonly job: Job;
  readonly recorder: Recorder;
  /** The callback handler to pass in a config's callbacks (run() does). */
  readonly handler: SessiondCallbackHandler;
  private readonly startedAt = performance.now();

  constructor(job: Job, opts: { onSteer?: (s: Steer) => void } = {}) {
    this.job = job;
    this.recorder = new Recorder(job);
    this.handler = new SessiondCallbackHandler((ev) => this.recorder.record({ sourceMessageId: job.claim.run.sourceMessageId, ...ev } as EventInput));
    if (opts.onSteer) job.onSteer(opts.onSteer);
  }

  /**
   * The steers that came and are not taken yet, as user messages, each recorded "applied": a
   * node that calls the model puts them after the state's messages and returns them in its
   * update, so they stay in the thread.
   */
  takeSteerMessages(): HumanMessage[] {
    return this.job.takeSteers().map((s) => {
      this.recorder.record({ eventType: "steer", payload: { commandId: s.commandId, targetRunId: this.job.runId, text: s.text, status: "applied" } } as EventInput);
      return new HumanMessage(s.text);
    });
  }

  /**
   * Runs the graph on input in thread threadId as the job's run: appends "running", invokes
   * it with the job's signal and the handler, and while it stops at interrupts, asks for each
   * as an approval (tool pending, approval requested, run waiting_approval), waits for the
   * person's decision and resumes with it (Command({ resume: "approved" | "rejected" }), or a
   * map by interrupt id when several wait). It ends the run completed, stopped or failed and
   * does not throw.
   */
  async run(graph: RunnableGraph, input: unknown, threadId: string, config: RunnableConfig = {}): Promise<GraphRunOutcome> {
    const cfg: RunnableConfig = {
      ...config,
      signal: this.job.signal,
      callbacks: [this.handler, ...((config.callbacks as unknown[] | undefined) ?? [])] as RunnableConfig["callbacks"],
      configurable: { ...(config.configurable ?? {}), thread_id: threadId },
    };
    const decisions: ApprovalDecision[] = [];
    let end: RunEnd = { status: "completed" };
    let output: unknown;
    try {
      await this.job.status("running", { startedAt: nowISO() });
      let next: unknown = input;
      for (let round = 0; ; round++) {
        output = await graph.invoke(next, cfg);
        // A graph compiled without a checkpointer cannot be interrupted (nor asked its state).
        if (!(graph as { checkpointer?: unknown }).checkpointer) break;
        const state = await graph.getState({ configurable: { thread_id: threadId } });
        const waiting = state.tasks.flatMap((t) => t.interrupts ?? []);
        if (waiting.length === 0) break;
        const answers: Record<string, string> = {};
        for (const [i, it] of waiting.entries()) {
          const v = (it.value ?? {}) as ApprovalInterrupt;
          const key = it.id ?? String(i);
          const approvalId = `${this.job.runId}-r${round}-${key}`.slice(0, 256);
          await this.recorder.flush();
          await this.job.requestApproval({
            approvalId,
            toolCallId: v.toolCallId ?? approvalId,
            toolName: v.toolName ?? "interrupt",
            title: v.title ?? (typeof it.value === "string" ? it.value : "Approve?"),
            ...(v.description ? { description: v.description } : {}),
            ...(v.input !== undefined ? { input: v.input } : {}),
          });
          const d = await this.job.approval(approvalId);
          decisions.push(d);
          answers[key] = d.decision;
        }
        next = new Command({ resume: waiting.length === 1 ? Object.values(answers)[0] : answers });
      }
    } catch (e) {
      end = this.job.signal.aborted ? endOfAbort(this.job) : { status: "failed", error: e };
    }
    await finishRun(this.job, this.recorder, this.startedAt, end, "GRAPH_ERROR");
    return { end, output, decisions };
  }
}
