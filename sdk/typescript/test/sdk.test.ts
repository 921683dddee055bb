// Tests of the TypeScript SDK against a real sessiond (SESSIOND_URL), run by the Go test of
// package sdk (sdk/sdk_test.go).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client, SessiondError, Worker, newId, type EventInput, type Job } from "../src/index.js";

const url = process.env.SESSIOND_URL;
if (!url) throw new Error("SESSIOND_URL is not set: run these tests through go test ./sdk");

// The global fetch, typed loosely: the test wraps it to lose answers and cut streams.
const realFetch = globalThis.fetch as (input: unknown, init?: RequestInit) => Promise<Response>;

const snapshot = { mode: "work", modelId: "m", capabilities: { text: true, approval: true, steering: true } };

async function newSession(client: Client, agent = "ts-" + newId()): Promise<string> {
  const id = "S-ts-" + newId();
  await client.createSession({ session_id: id, agent_id: agent, role: "implementer", snapshot });
  return id;
}

const message = (text: string): EventInput => ({
  eventType: "message",
  payload: { messageId: newId(), role: "user", operation: "append", parts: [{ type: "text", text }] },
});

test("an append whose answer was lost is retried with the same keys and comes back duplicate", async () => {
  let calls = 0;
  const lossy: typeof fetch = async (input, init) => {
    const resp = await realFetch(input, init);
    if (String(input).endsWith("/events") && init?.method === "POST" && calls++ === 0) {
      await resp.text();
      throw new TypeError("connection reset after the request was sent");
    }
    return resp;
  };
  const client = new Client({ baseUrl: url, fetch: lossy, minBackoffMs: 1 });
  const id = await newSession(client);
  const res = await client.append(id, message("once"));
  assert.equal(calls, 2);
  assert.equal(res.results[0].status, "duplicate");
  const page = await client.readEvents(id);
  assert.equal(page.events.length, 1, "the event is stored exactly once");
});

test("only retryable codes are retried, after Retry-After", async () => {
  let calls = 0;
  const busy: typeof fetch = async (input, init) => {
    if (String(input).includes("/events") && init?.method === "POST" && calls++ === 0) {
      return new Response(JSON.stringify({ error: { code: "OVERLOADED", message: "busy" } }), { status: 503, headers: { "Retry-After": "0" } });
    }
    return realFetch(input, init);
  };
  const client = new Client({ baseUrl: url, fetch: busy, minBackoffMs: 1 });
  const id = await newSession(client);
  const res = await client.append(id, message("after overload"));
  assert.equal(calls, 2);
  assert.equal(res.results[0].status, "accepted");
  calls = 1; // from now on every call reaches the server
  await assert.rejects(client.append(id, message("stale"), { expectedSequence: -1 }), (e: unknown) => {
    assert.ok(e instanceof SessiondError);
    assert.equal(e.code, "SEQUENCE_CONFLICT");
    assert.equal(e.status, 409);
    assert.equal(e.retryable, false);
    return true;
  });
  assert.equal(calls, 2, "a final code is not retried");
});

test("follow resumes after dropped connections without gap or repeat", async () => {
  let connections = 0;
  // The first three streams are cut after 200 bytes, in the middle of a block.
  const cutting: typeof fetch = async (input, init) => {
    const resp = await realFetch(input, init);
    if (!String(input).endsWith("/events/stream") || connections++ >= 3) return resp;
    let sent = 0;
    const reader = resp.body!.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(ctl) {
        const { value, done } = await reader.read();
        if (done) return ctl.close();
        const part = value.subarray(0, 200 - sent);
        sent += part.length;
        ctl.enqueue(part);
        if (sent >= 200) {
          reader.cancel().catch(() => {});
          ctl.close();
        }
      },
    });
    return new Response(body, { status: resp.status, headers: resp.headers });
  };
  const client = new Client({ baseUrl: url, fetch: cutting, minBackoffMs: 1 });
  const id = await newSession(client);
  await client.append(id, Array.from({ length: 10 }, (_, i) => message("before " + i)));
  const ctl = new AbortController();
  const seen: number[] = [];
  let reconnects = 0;
  for await (const ev of client.follow(id, { signal: ctl.signal, onReconnect: () => reconnects++ })) {
    seen.push(ev.sequence);
    if (seen.length === 10) await client.append(id, Array.from({ length: 5 }, (_, i) => message("live " + i)));
    if (seen.length === 15) ctl.abort();
  }
  assert.deepEqual(seen, Array.from({ length: 15 }, (_, i) => i));
  assert.ok(reconnects >= 3, `reconnected ${reconnects} times`);
});

async function queueRun(client: Client, id: string, runId: string): Promise<void> {
  await client.append(id, { runId, sourceMessageId: "m-" + runId, eventType: "status", payload: { status: "queued" } });
}

async function until<T>(what: string, f: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 30000;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error("timed out waiting for " + what);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test("a worker claims a run, writes under its lease, and a stop command aborts its task within 100 ms", async () => {
  const client = new Client({ baseUrl: url });
  const agent = "ts-worker-" + newId();
  const id = await newSession(client, agent);
  await queueRun(client, id, "run-1");
  let abortedAt = 0;
  let leaseHeader = "";
  let working = false;
  const worker = new Worker(client, {
    filter: { agent_id: agent, wait: "2s", leaseTtl: "3s" },
    task: async (job: Job) => {
      leaseHeader = job.lease.header;
      await job.status("running", { startedAt: new Date().toISOString() });
      await job.append({ eventType: "message", sourceMessageId: "m-run-1", payload: { messageId: "a1", role: "assistant", operation: "append", parts: [{ type: "text", text: "working" }] } });
      working = true;
      await new Promise<void>((resolve) => job.signal.addEventListener("abort", () => resolve(), { once: true }));
      abortedAt = performance.now();
      assert.equal(job.signal.reason, "stop");
      await job.status("stopped", { stoppedAt: new Date().toISOString(), durationMs: 1 });
    },
    onError: (e) => console.error("worker:", e),
  });
  const running = worker.run();
  await until("the task to be working", async () => (working ? true : undefined));
  const res = await client.stop(id, "run-1", { reason: "enough" });
  const answeredAt = performance.now();
  assert.equal(res.outcome, "accepted");
  await until("the task to be aborted", async () => (abortedAt ? true : undefined));
  console.log(`stop latency: the task was aborted ${(abortedAt - answeredAt).toFixed(1)} ms after the stop's answer`);
  assert.ok(abortedAt - answeredAt < 100, `the stop reached the task ${abortedAt - answeredAt} ms after its answer`);
  await until("the run to be stopped", async () => ((await client.runs(id)).find((r) => r.runId === "run-1")?.status === "stopped" ? true : undefined));
  worker.stop();
  await running;
  const page = await client.readEvents(id);
  assert.ok(leaseHeader !== "");
  assert.deepEqual(
    page.events.map((e) => (e.eventType === "status" ? e.payload.status : e.eventType)),
    ["queued", "running", "message", "stopping", "stopped"],
  );
});

test("a write under a stale lease is refused LEASE_LOST and stores nothing", async () => {
  const client = new Client({ baseUrl: url });
  const agent = "ts-fence-" + newId();
  const id = await newSession(client, agent);
  await queueRun(client, id, "run-1");
  const first = await client.claim({ agent_id: agent, wait: "5s" });
  assert.ok(first);
  await client.releaseLease(first.run, first.lease);
  const second = await client.claim({ agent_id: agent, wait: "5s" });
  assert.ok(second);
  assert.ok(second.lease.token > first.lease.token);
  const before = (await client.readEvents(id)).lastSequence;
  await assert.rejects(client.append(id, { ...message("late"), runId: "run-1" }, { lease: first.lease.header }), (e: unknown) => {
    assert.ok(e instanceof SessiondError);
    assert.equal(e.code, "LEASE_LOST");
    return true;
  });
  assert.equal((await client.readEvents(id)).lastSequence, before, "nothing was stored");
  const ok = await client.append(id, { ...message("current"), runId: "run-1" }, { lease: second.lease.header });
  assert.equal(ok.results[0].status, "accepted");
});
