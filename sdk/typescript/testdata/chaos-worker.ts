// The worker the chaos test of sdk/chaos_test.go runs as a real node process, killed and paused
// at random: it claims the runs of an agent with 1 s leases and writes each run's work as 8
// messages, 40 ms apart, whose event ids name the fencing token they are written under
// ("w-<runId>-t<token>-<i>"), then completes the run. It prints "busy" on its standard output
// when it starts a run and "idle" when it is done with it, for the test to pick its victims.
// Arguments: the server's URL, the agent.
import { Client, Worker, type EventInput } from "../src/index.js";

const [url, agent] = process.argv.slice(2);
if (!url || !agent) throw new Error("usage: chaos-worker.js URL AGENT");
const client = new Client({ baseUrl: url, minBackoffMs: 20, maxBackoffMs: 400, maxRetries: 8 });
const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true });
  });

const worker = new Worker(client, {
  filter: { agent_id: agent, wait: "1s", leaseTtl: "1s" },
  task: async (job) => {
    console.log("busy");
    const started = Date.now();
    const token = job.lease.token;
    const id = (i: number) => `w-${job.runId}-t${token}-${i}`;
    await job.append({ eventId: id(0), eventType: "status", sourceMessageId: job.claim.run.sourceMessageId, payload: { status: "running", startedAt: new Date().toISOString() } } as EventInput);
    for (let i = 1; i <= 8; i++) {
      await sleep(100, job.signal);
      if (job.signal.aborted) return void console.log("idle"); // a lost lease: write nothing more
      await job.append({ eventId: id(i), eventType: "message", payload: { messageId: `reply-${job.runId}`, role: "assistant", operation: "append", parts: [{ type: "text", text: `${i} ` }], status: "streaming" } } as EventInput);
    }
    await job.append({ eventId: id(9), eventType: "status", sourceMessageId: job.claim.run.sourceMessageId, payload: { status: "completed", completedAt: new Date().toISOString(), durationMs: Date.now() - started } } as EventInput);
    console.log("idle");
  },
  onError: (e) => console.error(`worker ${process.pid}:`, e instanceof Error ? e.message : e),
});
process.on("SIGTERM", () => worker.stop());
await worker.run();
