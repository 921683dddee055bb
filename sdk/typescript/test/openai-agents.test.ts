// The OpenAI Agents SDK adapter (@sessiond/sdk/openai-agents) against the real @openai/agents,
// driven offline by a Model implementation of this test (no network, no API key), and the real
// server (SESSIOND_URL).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Agent, Usage, setTraceProcessors, tool, type Model, type ModelRequest, type ModelResponse } from "@openai/agents";
import { z } from "zod";
import { Client } from "../src/index.js";
import { SessiondTracingProcessor, agentsRun } from "../src/openai-agents.js";
import { folded, kinds, latency, newAgent, sessionWithRun, steer, stop, transcript, until, url, workOne } from "./helpers.js";

// Only this processor: no exporter sends traces anywhere.
const processor = new SessiondTracingProcessor();
setTraceProcessors([processor]);

/** A Model whose answers a function of the test gives, call by call. */
class ScriptModel implements Model {
  readonly requests: ModelRequest[] = [];
  constructor(private readonly answer: (req: ModelRequest, n: number) => Promise<ModelResponse["output"]>, private readonly usage = (n: number) => ({ inputTokens: 10 * n, outputTokens: n })) {}
  async getResponse(req: ModelRequest): Promise<ModelResponse> {
    this.requests.push(req);
    const n = this.requests.length;
    const output = await this.answer(req, n);
    const u = this.usage(n);
    return { output, usage: new Usage({ requests: 1, inputTokens: u.inputTokens, outputTokens: u.outputTokens, totalTokens: u.inputTokens + u.outputTokens }), responseId: "resp-" + n };
  }
  async *getStreamedResponse(): AsyncIterable<any> {
    throw new Error("this test does not stream");
  }
}

const say = (text: string) => ({ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text }] }) as any;
const call = (callId: string, name: string, args: unknown) => ({ type: "function_call", callId, name, arguments: JSON.stringify(args), status: "completed" }) as any;

const weather = tool({
  name: "weather",
  description: "The weather in a city",
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => JSON.stringify({ city, sky: "sunny", celsius: 21 }),
});

test("agents: a handoff, a guardrail, a tool call paired with its result, usage per turn", async () => {
  const client = new Client({ baseUrl: url });
  const agent = newAgent("agents-record");
  const id = await sessionWithRun(client, agent);
  const model = new ScriptModel(async (req, n) => {
    if (n === 1) return [call("call-h", req.handoffs[0].toolName, {})];
    if (n === 2) return [call("call-w", "weather", { city: "Paris" })];
    return [say("Sunny, 21 °C.")];
  });
  const forecaster = new Agent({ name: "Forecaster", instructions: "Answer weather questions.", model, tools: [weather] });
  const triage = new Agent({
    name: "Triage",
    instructions: "Hand weather questions to the forecaster.",
    model,
    handoffs: [forecaster],
    inputGuardrails: [{ name: "no-secrets", execute: async () => ({ tripwireTriggered: false, outputInfo: { checked: true } }) }],
  });
  let status = "";
  await workOne(client, agent, async (job) => {
    const out = await agentsRun(job, triage, "What is the weather in Paris?", { processor });
    status = out.end.status;
    assert.equal(out.result?.finalOutput, "Sunny, 21 °C.");
  });
  assert.equal(status, "completed");
  const ks = folded(await kinds(client, id));
  assert.deepEqual(ks.slice(0, 3), ["message", "status:queued", "status:running"]);
  assert.equal(ks.at(-1), "status:completed");
  const order = ["tool:running", "tool:completed", "message", "status:completed"].map((k) => ks.lastIndexOf(k));
  assert.deepEqual([...order].sort((a, b) => a - b), order, "tool running, then completed, then the answer, then the end: " + ks.join(" "));
  const tr = await transcript(client, id);
  const titles = tr.tasks.map((t: any) => `${t.title}:${t.status}`);
  for (const want of ["agent Triage:completed", "handoff Triage → Forecaster:completed", "guardrail no-secrets:completed", "agent Forecaster:completed"]) {
    assert.ok(titles.includes(want), `no task ${want} in ${titles.join(", ")}`);
  }
  assert.deepEqual(tr.tools.map((t: any) => [t.toolCallId, t.toolName, t.status, t.input, t.output]), [["call-w", "weather", "completed", { city: "Paris" }, { city: "Paris", sky: "sunny", celsius: 21 }]]);
  // Three model calls, 10n in and n out each.
  assert.deepEqual(tr.usage.total, { inputTokens: 60, outputTokens: 6, totalTokens: 66 });
  assert.deepEqual(tr.messages.filter((m: any) => m.role === "assistant").map((m: any) => m.parts[0].text), ["Sunny, 21 °C."]);
});

test("agents: a tripped guardrail fails the run with an error event", async () => {
  const client = new Client({ baseUrl: url });
  const agent = newAgent("agents-guard");
  const id = await sessionWithRun(client, agent);
  const model = new ScriptModel(async () => [say("never said")]);
  const guarded = new Agent({ name: "Guarded", model, inputGuardrails: [{ name: "no-paris", execute: async () => ({ tripwireTriggered: true, outputInfo: { city: "Paris" } }) }] });
  await workOne(client, agent, async (job) => {
    const out = await agentsRun(job, guarded, "Paris?", { processor });
    assert.equal(out.end.status, "failed");
  });
  const ks = folded(await kinds(client, id));
  assert.deepEqual(ks.slice(-2), ["error", "status:failed"]);
  const tr = await transcript(client, id);
  assert.ok(tr.tasks.some((t: any) => t.title === "guardrail no-paris" && t.status === "failed"), JSON.stringify(tr.tasks));
});

test("agents: a steer is put before the next model call, a stop aborts the model call, each within 100 ms", async () => {
  const client = new Client({ baseUrl: url });
  const agent = newAgent("agents-steer");
  const id = await sessionWithRun(client, agent);
  let steerArrived = 0;
  let modelAborted = 0;
  let working = false;
  let release!: () => void;
  const steered = new Promise<void>((r) => (release = r));
  const model = new ScriptModel(async (req, n) => {
    if (n === 1) {
      working = true;
      await steered;
      return [call("call-1", "weather", { city: "Paris" })];
    }
    if (n === 2) return [call("call-2", "weather", { city: "Lyon" })];
    // The third call works until it is stopped.
    return new Promise((_, reject) => {
      req.signal?.addEventListener("abort", () => {
        modelAborted = performance.now();
        reject(req.signal!.reason ?? new Error("aborted"));
      }, { once: true });
    });
  });
  const forecaster = new Agent({ name: "Forecaster", model, tools: [weather] });
  let outcome: Awaited<ReturnType<typeof agentsRun>> | undefined;
  const done = workOne(client, agent, async (job) => {
    outcome = await agentsRun(job, forecaster, "Weather in Paris?", {
      processor,
      onSteer: (s) => {
        steerArrived = s.receivedAt;
        release();
      },
    });
  });
  await until("the first model call", () => (working ? true : undefined));
  const steerCmd = await steer(client, id, "run-1", "also Lyon");
  await until("the steer to reach the run", () => (steerArrived ? true : undefined));
  latency("openai-agents: steer reached the run", steerCmd, steerArrived);
  await until("the third model call", () => (model.requests.length === 3 ? true : undefined));
  const steersIn = (n: number) => (model.requests[n].input as any[]).filter((i) => i.role === "user" && i.content === "also Lyon").length;
  assert.equal(steersIn(0), 0);
  assert.equal(steersIn(1), 1, "the steer is in the second call's input");
  assert.equal(steersIn(2), 1, "and stays, once, in the third");
  const stopCmd = await stop(client, id, "run-1");
  await until("the model call to be aborted", () => (modelAborted ? true : undefined));
  latency("openai-agents: stop aborted the model call", stopCmd, modelAborted);
  await done;
  assert.equal(outcome!.end.status, "stopped");
  const ks = folded(await kinds(client, id));
  assert.ok(ks.indexOf("steer:accepted") < ks.indexOf("steer:applied"), ks.join(" "));
  assert.ok(ks.indexOf("status:stopping") < ks.indexOf("status:stopped"), ks.join(" "));
  assert.equal(ks.at(-1), "status:stopped");
  const tr = await transcript(client, id);
  assert.deepEqual(tr.tools.map((t: any) => `${t.toolCallId}:${t.status}`), ["call-1:completed", "call-2:completed"]);
});
