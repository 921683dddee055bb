// What the adapters' tests share: a session whose snapshot turns on every command, a queued
// run, a worker serving one agent, and polling with a deadline. SESSIOND_URL is the server.
import { Client, Worker, newId, type Job } from "../src/index.js";

export const url = process.env.SESSIOND_URL ?? "";
if (!url) throw new Error("SESSIOND_URL is not set: run these tests through go test ./sdk");

/** A snapshot with the capabilities the commands need (steering, approvals, tools). */
export const snapshot = { mode: "work", modelId: "mock", capabilities: { text: true, tools: true, approval: true, steering: true } };

/** Creates a session of agent with a queued run "run-1" started by a user message; returns its id. */
export async function sessionWithRun(client: Client, agent: string, text = "What is the weather in Paris?"): Promise<string> {
  const id = "S-" + agent;
  await client.createSession({ session_id: id, agent_id: agent, role: "implementer", snapshot });
  await client.append(id, [
    { eventType: "message", payload: { messageId: "m1", role: "user", operation: "append", parts: [{ type: "text", text }] } },
    { runId: "run-1", sourceMessageId: "m1", eventType: "status", payload: { status: "queued" } },
  ]);
  return id;
}

/** A new agent id, unique to a test. */
export const newAgent = (prefix: string) => prefix + "-" + newId().slice(0, 8);

/** Polls f every 10 ms until it returns something other than undefined (30 s at most). */
export async function until<T>(what: string, f: () => T | undefined | Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 30000;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error("timed out waiting for " + what);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Runs one claimed run of agent with task, then stops the worker; resolves when it is done. */
export async function workOne(client: Client, agent: string, task: (job: Job) => Promise<void>): Promise<void> {
  const errors: unknown[] = [];
  const worker = new Worker(client, {
    filter: { agent_id: agent, wait: "2s", leaseTtl: "5s" },
    task: async (job) => {
      try {
        await task(job);
      } finally {
        worker.stop();
      }
    },
    onError: (e) => errors.push(e),
  });
  await worker.run();
  if (errors.length) throw errors[0];
}

/** The kinds of a session's events, a status as "status:<status>", a steer as "steer:<status>". */
export async function kinds(client: Client, id: string): Promise<string[]> {
  const page = await client.readEvents(id, { limit: 1000 });
  return page.events.map((e) => (e.eventType === "status" || e.eventType === "steer" || e.eventType === "tool" || e.eventType === "approval" ? `${e.eventType}:${e.payload.status}` : e.eventType));
}

/** kinds with runs of the same kind folded into one (batching decides how deltas are split). */
export const folded = (ks: string[]) => ks.filter((k, i) => i === 0 || ks[i - 1] !== k);

/** The session's transcript (GET /v1/sessions/{id}/transcript). */
export async function transcript(client: Client, id: string): Promise<any> {
  return client.transcript(id);
}

/** When a command was sent (the last try) and when its accepted answer came (performance.now()). */
export interface Sent {
  sent: number;
  answered: number;
}

/** Sends a steer, resending it after a SEQUENCE_CONFLICT (the runtime appended meanwhile). */
export async function steer(client: Client, id: string, runId: string, text: string): Promise<Sent> {
  for (let i = 0; i < 20; i++) {
    // The head is read first, so that the time measured is the command's POST alone.
    const expectedSequence = (await client.readEvents(id, { limit: 1 })).lastSequence;
    const sent = performance.now();
    const res = await client.command(id, { commandType: "steer", runId, expectedSequence, payload: { targetRunId: runId, text } });
    if (res.outcome === "accepted") return { sent, answered: performance.now() };
    if ((res as any).error?.code !== "SEQUENCE_CONFLICT") throw new Error("steer refused: " + JSON.stringify(res));
  }
  throw new Error("steer kept conflicting");
}

/** Sends a stop. */
export async function stop(client: Client, id: string, runId: string): Promise<Sent> {
  const expectedSequence = (await client.readEvents(id, { limit: 1 })).lastSequence;
  const sent = performance.now();
  const res = await client.command(id, { commandType: "stop", runId, expectedSequence, payload: { reason: "enough" } });
  if (res.outcome !== "accepted") throw new Error("stop refused: " + JSON.stringify(res));
  return { sent, answered: performance.now() };
}

/**
 * Asserts that what a command caused happened (at, performance.now()) within 100 ms of the
 * command's POST being sent (judged and stored by the server, then on the stream to the
 * worker), and logs the latency from the sending and from the answer (negative when the stream
 * was faster than the answer). On a machine so starved that the POST's own round trip took
 * longer than the limit, the limit counts from the answer instead, and the log says so.
 */
export function latency(what: string, cmd: Sent, at: number): number {
  const fromSent = at - cmd.sent;
  const fromAnswer = at - cmd.answered;
  const roundTrip = cmd.answered - cmd.sent;
  console.log(`latency: ${what}: ${fromSent.toFixed(1)} ms after the command was sent (${fromAnswer.toFixed(1)} ms after its answer; its round trip ${roundTrip.toFixed(1)} ms)`);
  const starved = roundTrip >= 100;
  const ms = starved ? fromAnswer : fromSent;
  if (ms >= 100) throw new Error(`${what} took ${ms.toFixed(1)} ms from the command's ${starved ? "answer (its round trip alone took " + roundTrip.toFixed(1) + " ms)" : "sending"} (limit 100 ms)`);
  return fromSent;
}
