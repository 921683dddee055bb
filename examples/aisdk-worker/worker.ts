// An example agent runtime: a sessiond worker that runs a Vercel AI SDK agent with two tools
// (weather and clock) for every queued run of its agent, recorded into the run's session with
// @sessiond/sdk/ai. Its model is the AI SDK's own mock language model (ai/test), scripted to
// call both tools and then stream an answer slowly, word by word, so a person has time to
// steer it or stop it from the web UI (or with sessiond cmd steer / stop): a steer becomes the
// conversation's next user message, which the "model" answers; a stop aborts the call.
//
// Run it with SESSIOND_URL (default http://127.0.0.1:7420) and AGENT (default aisdk-example);
// sdk/examples_test.go runs it against the real server.
import { Client, Worker, type Job } from "@sessiond/sdk";
import { streamTextRun } from "@sessiond/sdk/ai";
import { stepCountIs, tool, type ModelMessage } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { z } from "zod";

const server = process.env.SESSIOND_URL ?? "http://127.0.0.1:7420";
const agent = process.env.AGENT ?? "aisdk-example";
const wordMs = Number(process.env.WORD_MS ?? 150);

const tools = {
  weather: tool({
    description: "The weather in a city",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => ({ city, sky: "sunny", celsius: 21 }),
  }),
  clock: tool({
    description: "The time in a time zone",
    inputSchema: z.object({ zone: z.string() }),
    execute: async ({ zone }) => ({ zone, time: new Date().toLocaleTimeString("en-GB", { timeZone: zone }) }),
  }),
};

type Part = Record<string, unknown> & { type: string };
const usage = (input: number, output: number) => ({
  inputTokens: { total: input, noCache: input, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: output, text: output, reasoning: undefined },
});

const textOf = (m: { content: unknown }): string =>
  typeof m.content === "string" ? m.content : (m.content as { type: string; text?: string }[]).map((p) => p.text ?? "").join("");

/** The scripted "model": it reads the prompt and decides, as a real one would. */
function script(prompt: { role: string; content: unknown }[]): Part[] {
  const last = prompt[prompt.length - 1];
  if (last.role === "tool") {
    const words = "It is sunny and 21 °C in Paris; the clocks there say it is daytime, a fine time for a walk along the river before dinner.".split(" ");
    return [
      { type: "reasoning-start", id: "r" },
      { type: "reasoning-delta", id: "r", delta: "Both tools answered; summarise them." },
      { type: "reasoning-end", id: "r" },
      { type: "text-start", id: "t" },
      ...words.map((w, i) => ({ type: "text-delta", id: "t", delta: (i ? " " : "") + w })),
      { type: "text-end", id: "t" },
      { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage: usage(40, words.length) },
    ];
  }
  const users = prompt.filter((m) => m.role === "user");
  if (users.length > 1) {
    // A steer: the conversation's next user message.
    const words = `Understood (${textOf(last)}): noted, and I will keep it in mind for the rest of this run.`.split(" ");
    return [
      { type: "text-start", id: "t" },
      ...words.map((w, i) => ({ type: "text-delta", id: "t", delta: (i ? " " : "") + w })),
      { type: "text-end", id: "t" },
      { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage: usage(60, words.length) },
    ];
  }
  return [
    { type: "tool-call", toolCallId: "call-weather", toolName: "weather", input: JSON.stringify({ city: "Paris" }) },
    { type: "tool-call", toolCallId: "call-clock", toolName: "clock", input: JSON.stringify({ zone: "Europe/Paris" }) },
    { type: "finish", finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage: usage(20, 8) },
  ];
}

const model = new MockLanguageModelV3({
  doStream: async ({ prompt, abortSignal }) => {
    const parts: Part[] = [{ type: "stream-start", warnings: [] }, ...script(prompt as { role: string; content: unknown }[])];
    let i = 0;
    const stream = new ReadableStream({
      async pull(ctl) {
        if (abortSignal?.aborted) return ctl.error(abortSignal.reason);
        if (i >= parts.length) return ctl.close();
        const p = parts[i++];
        if (p.type === "text-delta") await new Promise((r) => setTimeout(r, wordMs));
        ctl.enqueue(p);
      },
    });
    return { stream } as any;
  },
});

/** The conversation's start: the user's message that queued the run. */
async function conversation(client: Client, job: Job): Promise<ModelMessage[]> {
  const page = await client.readEvents(job.sessionId, { limit: 1000 });
  for (const e of page.events) {
    if (e.eventType === "message" && e.payload.role === "user" && e.payload.messageId === job.claim.run.sourceMessageId) {
      return [{ role: "user", content: e.payload.parts.map((p) => (p as { text?: string }).text ?? "").join("") }];
    }
  }
  return [{ role: "user", content: "What is the weather in Paris?" }];
}

const client = new Client({ baseUrl: server });
const worker = new Worker(client, {
  filter: { agent_id: agent, wait: "10s", leaseTtl: "10s" },
  task: async (job) => {
    console.log(`run ${job.runId} of ${job.sessionId}: started`);
    const out = await streamTextRun(job, { model, tools, stopWhen: stepCountIs(5), messages: await conversation(client, job) });
    console.log(`run ${job.runId} of ${job.sessionId}: ${out.end.status}`);
  },
  onError: (e) => console.error("worker:", e instanceof Error ? e.message : e),
});
process.on("SIGTERM", () => worker.stop());
process.on("SIGINT", () => worker.stop());
console.log(`aisdk-example: serving agent ${agent} at ${server}`);
await worker.run();
