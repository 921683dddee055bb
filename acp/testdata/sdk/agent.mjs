// A small ACP agent written with the real @agentclientprotocol/sdk (the package's own example
// agent is not shipped in its npm tarball). sessiond's acp tests run it as the child process.
// What it does depends on the prompt's text:
//   "hello ..."  thinks, plans, answers in chunks, reports usage, ends the turn;
//   "edit NAME"  a tool call that asks for permission, then writes NAME inside its cwd
//                (fs/write_text_file), reads it back, runs `echo` in a client terminal and
//                reports a diff and the terminal; a rejected permission fails the tool call;
//   "escape"     tries to read /etc/hostname (outside the root) and reports the refusal;
//   "wait"       streams a chunk every 20 ms until the client cancels the turn;
//   "refuse"     refuses the prompt (stop reason refusal);
//   "bench N"    streams N chunks "chunk-0" … one every 5 ms (the latency benchmark).
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const cancelled = new Map(); // sessionId -> resolve of the running turn's cancel
let cwd = process.cwd();
let n = 0;

const say = (client, sessionId, text) =>
  client.notify(acp.methods.client.session.update, {
    sessionId,
    update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
  });

const app = acp
  .agent({ name: "sdk-test-agent" })
  .onRequest(acp.methods.agent.initialize, () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: { loadSession: true },
    agentInfo: { name: "sdk-test-agent", version: "1.0.0" },
  }))
  .onRequest(acp.methods.agent.session.new, ({ params }) => {
    cwd = params.cwd;
    return { sessionId: "sess-" + ++n };
  })
  .onRequest(acp.methods.agent.session.load, ({ params }) => {
    cwd = params.cwd;
    return {};
  })
  .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
    cancelled.get(params.sessionId)?.();
  })
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    const sessionId = params.sessionId;
    const text = params.prompt.map((b) => (b.type === "text" ? b.text : "")).join(" ");
    let isCancelled = false;
    const cancel = new Promise((resolve) => cancelled.set(sessionId, () => { isCancelled = true; resolve(); }));
    try {
      if (text.startsWith("hello")) {
        await client.notify(acp.methods.client.session.update, {
          sessionId,
          update: { sessionUpdate: "agent_thought_chunk", content: { type: "text", text: "The user greets me." } },
        });
        await client.notify(acp.methods.client.session.update, {
          sessionId,
          update: { sessionUpdate: "plan", entries: [
            { content: "Read the greeting", priority: "high", status: "completed" },
            { content: "Answer it", priority: "medium", status: "in_progress" },
          ] },
        });
        for (const chunk of ["Hello", ", ", "world", "!"]) await say(client, sessionId, chunk);
        await client.notify(acp.methods.client.session.update, {
          sessionId,
          update: { sessionUpdate: "usage_update", used: 1234, size: 200000 },
        });
        return { stopReason: "end_turn" };
      }
      if (text.startsWith("edit ")) {
        const file = cwd + "/" + text.slice(5).trim();
        const toolCallId = "call-" + ++n;
        await client.notify(acp.methods.client.session.update, {
          sessionId,
          update: { sessionUpdate: "tool_call", toolCallId, title: "Write " + file, kind: "edit", status: "pending",
            rawInput: { path: file, content: "hello from the agent\n" } },
        });
        const answer = await client.request(acp.methods.client.session.requestPermission, {
          sessionId,
          toolCall: { toolCallId, title: "Write " + file, kind: "edit", status: "pending" },
          options: [
            { optionId: "allow", name: "Allow once", kind: "allow_once" },
            { optionId: "allow-always", name: "Always allow", kind: "allow_always" },
            { optionId: "reject", name: "Reject", kind: "reject_once" },
          ],
        });
        if (answer.outcome.outcome === "cancelled") return { stopReason: "cancelled" };
        if (answer.outcome.optionId === "reject") {
          await client.notify(acp.methods.client.session.update, {
            sessionId, update: { sessionUpdate: "tool_call_update", toolCallId, status: "failed" },
          });
          await say(client, sessionId, "Not writing it then.");
          return { stopReason: "end_turn" };
        }
        await client.notify(acp.methods.client.session.update, {
          sessionId, update: { sessionUpdate: "tool_call_update", toolCallId, status: "in_progress" },
        });
        await client.request(acp.methods.client.fs.writeTextFile, { sessionId, path: file, content: "hello from the agent\n" });
        const back = await client.request(acp.methods.client.fs.readTextFile, { sessionId, path: file });
        const term = await client.createTerminal({ sessionId, command: "echo", args: ["written:", back.content.trim()], cwd });
        const exit = await term.waitForExit();
        const out = await term.currentOutput();
        await client.notify(acp.methods.client.session.update, {
          sessionId,
          update: { sessionUpdate: "tool_call_update", toolCallId, status: "completed",
            content: [
              { type: "diff", path: file, oldText: null, newText: back.content },
              { type: "terminal", terminalId: term.id },
              { type: "content", content: { type: "text", text: out.output } },
            ],
            rawOutput: { exitCode: exit.exitCode } },
        });
        await term.release();
        await say(client, sessionId, "Done.");
        return { stopReason: "end_turn" };
      }
      if (text.startsWith("escape")) {
        try {
          await client.request(acp.methods.client.fs.readTextFile, { sessionId, path: "/etc/hostname" });
          await say(client, sessionId, "read outside the root");
        } catch (e) {
          await say(client, sessionId, "refused: " + e.message);
        }
        return { stopReason: "end_turn" };
      }
      if (text.startsWith("bench ")) {
        const n = Number(text.slice(6));
        for (let i = 0; i < n && !isCancelled; i++) {
          await say(client, sessionId, "chunk-" + i);
          await new Promise((r) => setTimeout(r, 5));
        }
        return { stopReason: "end_turn" };
      }
      if (text.startsWith("refuse")) return { stopReason: "refusal" };
      if (text.startsWith("wait")) {
        for (let i = 0; !isCancelled; i++) {
          await say(client, sessionId, ".");
          await Promise.race([cancel, new Promise((r) => setTimeout(r, 20))]);
        }
        return { stopReason: "cancelled" };
      }
      await say(client, sessionId, "I do not know how to " + text);
      return { stopReason: "end_turn" };
    } finally {
      cancelled.delete(sessionId);
    }
  });

app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
