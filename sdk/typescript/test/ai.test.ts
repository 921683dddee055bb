// The Vercel AI SDK adapter (@sessiond/sdk/ai) against the real ai 6 package, driven offline by
// its own MockLanguageModelV3 (ai/test), and the real server (SESSIOND_URL).
import { test } from "node:test";
import assert from "node:assert/strict";
import { tool, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { z } from "zod";
import { Client } from "../src/index.js";
import { streamTextRun, generateTextRun } from "../src/ai.js";
import { folded, kinds, latency, newAgent, sessionWithRun, steer, stop, transcript, until, url, workOne } from "./helpers.js";

type Part = Record<string, unknown> & { type: string };
const usage = (input: number, output: number) => ({
  inputTokens: { total: input, noCache: input, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: output, text: output, reasoning: undefined },
});
const finish = (reason: "stop" | "tool-calls", input: number, output: number): Part => ({ type: "finish", finishReason: { unified: reason, raw: reason }, usage: usage(input, output) });

/** A model stream of parts, each after delayMs; it ends early (error) when the call is aborted. */
function streamOf(parts: Part[] | (() => AsyncGenerator<Part>), signal?: AbortSignal): ReadableStream<any> {
  const it = Array.isArray(parts) ? (async function* () { yield* parts; })() : parts();
  return new ReadableStream({
    async pull(ctl) {
      if (signal?.aborted) return ctl.error(signal.reason);
      const { value, done } = await it.next();
      if (done) ctl.close();
      else ctl.enqueue(value);
    },
  });
}

const tools = {
  weather: tool({
    description: "The weather in a city",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => ({ city, sky: "sunny", celsius: 21 }),
  }),
  clock: tool({
    description: "The time in a zone",
    inputSchema: z.object({ zone: z.string() }),
    execute: async ({ zone }) => ({ zone, time: "12:00" }),
  }),
};

test("streamText: reasoning, text deltas, two tool calls paired with their results, usage per step, finish", async () => {
  const client = new Client({ baseUrl: url });
  const agent = newAgent("ai-record");
  const id = await sessionWithRun(client, agent);
  const step1: Part[] = [
    { type: "stream-start", warnings: [] },
    { type: "reasoning-start", id: "r" },
    { type: "reasoning-delta", id: "r", delta: "The user wants " },
    { type: "reasoning-delta", id: "r", delta: "the weather." },
    { type: "reasoning-end", id: "r" },
    { type: "text-start", id: "t" },
    { type: "text-delta", id: "t", delta: "Let me " },
    { type: "text-delta", id: "t", delta: "look." },
    { type: "text-end", id: "t" },
    { type: "tool-call", toolCallId: "call-w", toolName: "weather", input: JSON.stringify({ city: "Paris" }) },
    { type: "tool-call", toolCallId: "call-c", toolName: "clock", input: JSON.stringify({ zone: "Europe/Paris" }) },
    finish("tool-calls", 10, 5),
  ];
  const step2: Part[] = [
    { type: "stream-start", warnings: [] },
    { type: "text-start", id: "t" },
    { type: "text-delta", id: "t", delta: "Sunny, 21 °C, " },
    { type: "text-delta", id: "t", delta: "at noon." },
    { type: "text-end", id: "t" },
    finish("stop", 30, 7),
  ];
  const model = new MockLanguageModelV3({ doStream: [{ stream: streamOf(step1) }, { stream: streamOf(step2) }] as any });
  let outcome: Awaited<ReturnType<typeof streamTextRun>> | undefined;
  await workOne(client, agent, async (job) => {
    outcome = await streamTextRun(job, { model, tools, stopWhen: stepCountIs(5), prompt: "What is the weather in Paris?" });
  });
  assert.equal(outcome!.end.status, "completed");
  assert.equal(outcome!.finishReason, "stop");
  assert.deepEqual(folded(await kinds(client, id)), [
    "message", "status:queued", "status:running",
    "reasoning", "message", "tool:running", "tool:completed", "usage",
    "message", "usage", "status:completed",
  ]);
  const tr = await transcript(client, id);
  assert.deepEqual(tr.usage.total, { inputTokens: 40, outputTokens: 12, totalTokens: 52 });
  assert.deepEqual(tr.usage.byRun["run-1"], tr.usage.total);
  assert.equal(outcome!.totalUsage!.inputTokens, 40);
  assert.equal(outcome!.totalUsage!.outputTokens, 12);
  const byId = Object.fromEntries(tr.tools.map((t: any) => [t.toolCallId, t]));
  assert.deepEqual([byId["call-w"].status, byId["call-w"].input, byId["call-w"].output], ["completed", { city: "Paris" }, { city: "Paris", sky: "sunny", celsius: 21 }]);
  assert.deepEqual([byId["call-c"].status, byId["call-c"].input, byId["call-c"].output], ["completed", { zone: "Europe/Paris" }, { zone: "Europe/Paris", time: "12:00" }]);
  const texts = tr.messages.filter((m: any) => m.role === "assistant").map((m: any) => [m.parts.map((p: any) => p.text).join(""), m.status]);
  assert.deepEqual(texts, [["Let me look.", "completed"], ["Sunny, 21 °C, at noon.", "completed"]]);
  assert.equal(tr.reasoning[0].text, "The user wants the weather.");
});

test("streamText: a steer is the next step's user message and a stop aborts the model call, each within 100 ms", async () => {
  const client = new Client({ baseUrl: url });
  const agent = newAgent("ai-steer");
  const id = await sessionWithRun(client, agent);
  let working = false;
  let steerArrived = 0;
  let modelAborted = 0;
  let release!: () => void;
  const steered = new Promise<void>((r) => (release = r));
  const prompts: unknown[] = [];
  const model = new MockLanguageModelV3({
    doStream: async ({ prompt, abortSignal }) => {
      prompts.push(prompt);
      abortSignal?.addEventListener("abort", () => (modelAborted = performance.now()), { once: true });
      if (prompts.length === 1) {
        // The first step says something, waits until the steer came, then calls a tool.
        return {
          stream: streamOf(async function* () {
            yield { type: "stream-start", warnings: [] };
            yield { type: "text-start", id: "t" };
            yield { type: "text-delta", id: "t", delta: "Working on it." };
            yield { type: "text-end", id: "t" };
            working = true;
            await steered;
            yield { type: "tool-call", toolCallId: "call-w", toolName: "weather", input: JSON.stringify({ city: "Paris" }) };
            yield finish("tool-calls", 3, 2);
          }, abortSignal),
        } as any;
      }
      // The second step streams until it is stopped.
      return {
        stream: streamOf(async function* () {
          yield { type: "stream-start", warnings: [] };
          yield { type: "text-start", id: "t" };
          for (let i = 0; ; i++) {
            yield { type: "text-delta", id: "t", delta: "." };
            await new Promise((r) => setTimeout(r, 20));
          }
        }, abortSignal),
      } as any;
    },
  });
  let outcome: Awaited<ReturnType<typeof streamTextRun>> | undefined;
  const done = workOne(client, agent, async (job) => {
    outcome = await streamTextRun(job, { model, tools, stopWhen: stepCountIs(5), prompt: "What is the weather in Paris?" }, {
      onSteer: (s) => {
        steerArrived = s.receivedAt;
        release();
      },
    });
  });
  await until("the first step to wait", () => (working ? true : undefined));
  const steerCmd = await steer(client, id, "run-1", "answer in Celsius");
  await until("the steer to reach the run", () => (steerArrived ? true : undefined));
  latency("ai: steer reached the run", steerCmd, steerArrived);
  await until("the second step", () => (prompts.length === 2 ? true : undefined));
  const last = (prompts[1] as any[]).at(-1);
  assert.equal(last.role, "user", "the steer is the second step's last message");
  assert.deepEqual(last.content, [{ type: "text", text: "answer in Celsius" }]);
  const stopCmd = await stop(client, id, "run-1");
  await until("the model call to be aborted", () => (modelAborted ? true : undefined));
  latency("ai: stop aborted the model call", stopCmd, modelAborted);
  await done;
  assert.equal(outcome!.end.status, "stopped");
  assert.deepEqual(outcome!.steers.map((s) => s.text), ["answer in Celsius"]);
  const ks = folded(await kinds(client, id));
  assert.deepEqual(ks.slice(0, 4), ["message", "status:queued", "status:running", "message"]);
  assert.ok(ks.indexOf("steer:accepted") < ks.indexOf("steer:applied"), ks.join(" "));
  assert.ok(ks.indexOf("status:stopping") < ks.indexOf("status:stopped"), ks.join(" "));
  assert.equal(ks.at(-1), "status:stopped");
  const tr = await transcript(client, id);
  assert.equal(tr.tools[0].status, "completed");
  assert.equal(tr.steers[0].status, "applied");
});

test("generateText: recorded when the call returns, usage totals", async () => {
  const client = new Client({ baseUrl: url });
  const agent = newAgent("ai-generate");
  const id = await sessionWithRun(client, agent);
  const model = new MockLanguageModelV3({
    doGenerate: [
      { content: [{ type: "tool-call", toolCallId: "c1", toolName: "clock", input: JSON.stringify({ zone: "UTC" }) }], finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage: usage(4, 1), warnings: [] },
      { content: [{ type: "text", text: "It is noon." }], finishReason: { unified: "stop", raw: "stop" }, usage: usage(6, 3), warnings: [] },
    ] as any,
  });
  await workOne(client, agent, async (job) => {
    const out = await generateTextRun(job, { model, tools, stopWhen: stepCountIs(3), prompt: "What time is it?" });
    assert.equal(out.end.status, "completed");
  });
  assert.deepEqual(folded(await kinds(client, id)), ["message", "status:queued", "status:running", "tool:running", "tool:completed", "usage", "message", "usage", "status:completed"]);
  const tr = await transcript(client, id);
  assert.deepEqual(tr.usage.total, { inputTokens: 10, outputTokens: 4, totalTokens: 14 });
  assert.deepEqual(tr.tools[0].output, { zone: "UTC", time: "12:00" });
});
