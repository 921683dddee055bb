// The LangGraph.js adapter (@sessiond/sdk/langgraph) against the real @langchain/langgraph and
// @langchain/core, driven offline by core's FakeListChatModel, and the real server (SESSIOND_URL).
import { test } from "node:test";
import assert from "node:assert/strict";
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import { FakeListChatModel } from "@langchain/core/utils/testing";
import { tool } from "@langchain/core/tools";
import { END, MemorySaver, MessagesAnnotation, START, StateGraph, interrupt } from "@langchain/langgraph";
import { z } from "zod";
import { Client } from "../src/index.js";
import { GraphRun } from "../src/langgraph.js";
import { folded, kinds, latency, newAgent, sessionWithRun, steer, stop, transcript, until, url, workOne } from "./helpers.js";

/**
 * core's FakeListChatModel, answering its responses in turn, whose replies also carry the tool
 * calls a table gives for a response and a usage of 10 tokens in and the reply's length out.
 */
class FakeToolChatModel extends FakeListChatModel {
  seen: BaseMessage[][] = [];
  constructor(responses: string[], private readonly calls: Record<string, { id: string; name: string; args: Record<string, unknown> }[]>) {
    super({ responses });
  }
  async _generate(messages: BaseMessage[], options?: this["ParsedCallOptions"], runManager?: any) {
    this.seen.push(messages);
    return super._generate(messages, options, runManager);
  }
  _formatGeneration(text: string) {
    const tool_calls = (this.calls[text] ?? []).map((c) => ({ ...c, type: "tool_call" as const }));
    const content = tool_calls.length ? "" : text;
    return { message: new AIMessage({ content, tool_calls, usage_metadata: { input_tokens: 10, output_tokens: text.length, total_tokens: 10 + text.length } }), text: content };
  }
}

const weather = tool(async ({ city }) => JSON.stringify({ city, sky: "sunny", celsius: 21 }), {
  name: "weather",
  description: "The weather in a city",
  schema: z.object({ city: z.string() }),
});

/** agent → (tool calls?) approve-and-run → agent → END; every tool call asks for approval first. */
function graph(model: FakeToolChatModel, run: () => GraphRun, onAgent?: (n: number, signal?: AbortSignal) => Promise<void>) {
  let n = 0;
  return new StateGraph(MessagesAnnotation)
    .addNode("agent", async (state, config) => {
      await onAgent?.(++n, config.signal);
      const steers = run().takeSteerMessages();
      const reply = await model.invoke([...state.messages, ...steers], config);
      return { messages: [...steers, reply] };
    })
    .addNode("tools", async (state, config) => {
      const last = state.messages.at(-1) as AIMessage;
      const out = [];
      for (const call of last.tool_calls ?? []) {
        const decision = interrupt({ title: `Run ${call.name}(${JSON.stringify(call.args)})?`, toolName: call.name, toolCallId: call.id, input: call.args });
        if (decision === "approved") out.push(await weather.invoke({ ...call, type: "tool_call" }, config));
        else out.push({ role: "tool", tool_call_id: call.id!, content: "denied by a person" });
      }
      return { messages: out };
    })
    .addEdge(START, "agent")
    .addConditionalEdges("agent", (s) => ((s.messages.at(-1) as AIMessage).tool_calls?.length ? "tools" : END))
    .addEdge("tools", "agent")
    .compile({ checkpointer: new MemorySaver() });
}

test("langgraph: steps, messages, a tool call approved through sessiond and paired with its result, usage totals", async () => {
  const client = new Client({ baseUrl: url });
  const agent = newAgent("lg-record");
  const id = await sessionWithRun(client, agent);
  const model = new FakeToolChatModel(["call weather", "Sunny, 21 °C."], { "call weather": [{ id: "call-w", name: "weather", args: { city: "Paris" } }] });
  let run!: GraphRun;
  const g = graph(model, () => run);
  let outcome: Awaited<ReturnType<GraphRun["run"]>> | undefined;
  const done = workOne(client, agent, async (job) => {
    run = new GraphRun(job);
    outcome = await run.run(g, { messages: [{ role: "user", content: "What is the weather in Paris?" }] }, "thread-" + agent);
  });
  // A person approves the tool call in sessiond.
  const approvalId = await until("the approval to be asked", async () => (await transcript(client, id)).approvals?.find((a: any) => a.status === "requested")?.approvalId);
  const res = await client.approve(id, "run-1", approvalId, "fine");
  assert.equal(res.outcome, "accepted", JSON.stringify(res));
  await done;
  assert.equal(outcome!.end.status, "completed");
  assert.deepEqual(outcome!.decisions.map((d) => d.decision), ["approved"]);
  assert.deepEqual(folded(await kinds(client, id)), [
    "message", "status:queued", "status:running",
    "task", "usage", "task", // step 1: agent (a tool call and its usage), then step 2: tools starts and is interrupted
    "tool:pending", "approval:requested", "status:waiting_approval", "approval:approved", "status:running",
    "task", "tool:running", "tool:completed", "task", // step 2 again, resumed: the tool runs
    "message", "usage", "task", // step 3: agent answers
    "status:completed",
  ]);
  const tr = await transcript(client, id);
  assert.deepEqual(tr.usage.total, { inputTokens: 20, outputTokens: 25, totalTokens: 45 });
  assert.deepEqual(tr.tools.map((t: any) => [t.toolCallId, t.toolName, t.status, t.input, t.output]), [["call-w", "weather", "completed", { city: "Paris" }, { city: "Paris", sky: "sunny", celsius: 21 }]]);
  assert.deepEqual(tr.messages.filter((m: any) => m.role === "assistant").map((m: any) => m.parts[0].text), ["Sunny, 21 °C."]);
  assert.deepEqual(tr.tasks.map((t: any) => `${t.title}:${t.status}`).sort(), ["step 1: agent:completed", "step 2: tools:completed", "step 2: tools:pending", "step 3: agent:completed"]);
});

test("langgraph: a rejected approval resumes the graph with the rejection", async () => {
  const client = new Client({ baseUrl: url });
  const agent = newAgent("lg-reject");
  const id = await sessionWithRun(client, agent);
  const model = new FakeToolChatModel(["call weather", "I may not look."], { "call weather": [{ id: "call-w", name: "weather", args: { city: "Paris" } }] });
  let run!: GraphRun;
  const g = graph(model, () => run);
  const done = workOne(client, agent, async (job) => {
    run = new GraphRun(job);
    const out = await run.run(g, { messages: [{ role: "user", content: "Weather?" }] }, "thread-" + agent);
    assert.equal(out.end.status, "completed");
  });
  const approvalId = await until("the approval to be asked", async () => (await transcript(client, id)).approvals?.find((a: any) => a.status === "requested")?.approvalId);
  assert.equal((await client.reject(id, "run-1", approvalId, "not now")).outcome, "accepted");
  await done;
  const last = model.seen.at(-1)!.at(-1)!;
  assert.equal(last.content, "denied by a person", "the model saw the rejection");
  const tr = await transcript(client, id);
  assert.equal(tr.approvals[0].status, "rejected");
});

test("langgraph: a steer is a user message of the next model call, a stop aborts the running node, each within 100 ms", async () => {
  const client = new Client({ baseUrl: url });
  const agent = newAgent("lg-steer");
  const id = await sessionWithRun(client, agent);
  const model = new FakeToolChatModel(["call weather", "Sunny."], { "call weather": [{ id: "call-w", name: "weather", args: { city: "Paris" } }] });
  let steerArrived = 0;
  let nodeAborted = 0;
  let waiting = 0;
  let release!: () => void;
  const steered = new Promise<void>((r) => (release = r));
  let run!: GraphRun;
  const g = graph(model, () => run, async (n, signal) => {
    waiting = n;
    if (n === 1) return steered; // the first step waits for the steer
    // The second agent step works until it is stopped.
    await new Promise<void>((resolve) => signal!.addEventListener("abort", () => {
      nodeAborted = performance.now();
      resolve();
    }, { once: true }));
    throw signal!.reason;
  });
  let outcome: Awaited<ReturnType<GraphRun["run"]>> | undefined;
  const done = workOne(client, agent, async (job) => {
    run = new GraphRun(job, { onSteer: (s) => { steerArrived = s.receivedAt; release(); } });
    outcome = await run.run(g, { messages: [{ role: "user", content: "Weather?" }] }, "thread-" + agent);
  });
  await until("the first step", () => (waiting === 1 ? true : undefined));
  const steerCmd = await steer(client, id, "run-1", "in Celsius please");
  await until("the steer to reach the run", () => (steerArrived ? true : undefined));
  latency("langgraph: steer reached the run", steerCmd, steerArrived);
  const approvalId = await until("the approval to be asked", async () => (await transcript(client, id)).approvals?.find((a: any) => a.status === "requested")?.approvalId);
  assert.equal((await client.approve(id, "run-1", approvalId)).outcome, "accepted");
  await until("the second agent step", () => (waiting === 2 ? true : undefined));
  const stopCmd = await stop(client, id, "run-1");
  await until("the node to see the stop", () => (nodeAborted ? true : undefined));
  latency("langgraph: stop aborted the running node", stopCmd, nodeAborted);
  await done;
  assert.equal(outcome!.end.status, "stopped");
  const firstCall = model.seen[0].map((m) => `${m.getType()}:${m.content}`);
  assert.deepEqual(firstCall, ["human:Weather?", "human:in Celsius please"]);
  const ks = folded(await kinds(client, id));
  assert.ok(ks.indexOf("steer:accepted") < ks.indexOf("steer:applied"), ks.join(" "));
  assert.ok(ks.indexOf("status:stopping") < ks.indexOf("status:stopped"), ks.join(" "));
  assert.equal(ks.at(-1), "status:stopped");
});

test("langgraph: a graph without a checkpointer runs to completion (nothing to interrupt)", async () => {
  const client = new Client({ baseUrl: url });
  const agent = newAgent("lg-plain");
  const id = await sessionWithRun(client, agent);
  const model = new FakeToolChatModel(["Hello."], {});
  const g = new StateGraph(MessagesAnnotation)
    .addNode("agent", async (state, config) => ({ messages: [await model.invoke(state.messages, config)] }))
    .addEdge(START, "agent")
    .addEdge("agent", END)
    .compile();
  await workOne(client, agent, async (job) => {
    const out = await new GraphRun(job).run(g, { messages: [{ role: "user", content: "Hi" }] }, "thread-" + agent);
    assert.equal(out.end.status, "completed");
  });
  assert.deepEqual(folded(await kinds(client, id)), ["message", "status:queued", "status:running", "task", "message", "usage", "task", "status:completed"]);
});
