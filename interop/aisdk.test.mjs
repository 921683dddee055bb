// The Vercel AI SDK's own client (ai: DefaultChatTransport, readUIMessageStream), unmodified,
// against sessiond's UI message stream endpoints (docs/bridges.md).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DefaultChatTransport, readUIMessageStream } from 'ai';
import * as ai7 from 'ai7';
import { base, createSession, newId, json, getJSON, waitRun } from './helpers.mjs';

// Both majors of the AI SDK, each its own package: ai 7 names itself with the header
// X-Sessiond-AI-SDK (docs/bridges.md), ai 6 sends nothing (the default).
const majors = [
  { major: 6, Transport: DefaultChatTransport, read: readUIMessageStream, headers: undefined },
  { major: 7, Transport: ai7.DefaultChatTransport, read: ai7.readUIMessageStream, headers: { 'X-Sessiond-AI-SDK': '7' } },
];

const transport = (sid) => new DefaultChatTransport({ api: `${base}/v1/sessions/${sid}/chat` });
const userMessage = (text) => ({ id: newId(), role: 'user', parts: [{ type: 'text', text }] });

async function finalMessage(stream, message) {
  let last;
  for await (const m of readUIMessageStream({ stream, message, terminateOnError: true })) last = m;
  return last;
}

// send posts a new user message and reads the run's stream to its end.
async function send(t, sid, messages) {
  const stream = await t.sendMessages({ chatId: sid, messages, trigger: 'submit-message', messageId: undefined, abortSignal: undefined });
  return finalMessage(stream, messages.at(-1).role === 'assistant' ? structuredClone(messages.at(-1)) : undefined);
}

// normal replaces the ids that differ between two runs of the same conversation.
const normal = (m, runId) => JSON.parse(JSON.stringify(m).replaceAll(runId, 'RUN'));

let uncut; // the final assistant message of an uncut run of "hello there"

test('a run streams a complete assistant message: reasoning, text and a tool call', async () => {
  const sid = await createSession('echoquick');
  const t = transport(sid);
  const user = userMessage('hello there');
  const msg = await send(t, sid, [user]);
  assert.equal(msg.role, 'assistant');
  assert.equal(msg.id, `run-${user.id}`);
  const reasoning = msg.parts.find((p) => p.type === 'reasoning');
  assert.equal(reasoning.text, 'The user said "hello there"; echo it back.');
  assert.equal(reasoning.state, 'done');
  const texts = msg.parts.filter((p) => p.type === 'text').map((p) => p.text);
  assert.deepEqual(texts, ['You said: hello there.', '.'.repeat(60) + ' done']);
  const tool = msg.parts.find((p) => p.type === 'dynamic-tool');
  assert.equal(tool.toolName, 'shell');
  assert.equal(tool.state, 'output-available');
  assert.deepEqual(tool.input, { cmd: 'echo hello' });
  assert.equal(tool.output, 'hello\n');
  assert.ok(msg.parts.some((p) => p.type === 'data-terminal'), 'terminal output goes out as data-terminal');
  uncut = normal(msg, msg.id);

  // History: the same messages, folded from the log.
  const history = await getJSON(`/v1/sessions/${sid}/chat`);
  assert.deepEqual(history.messages, json([user, msg]));

  // The same POST again appends nothing and answers the same run.
  const again = await send(t, sid, [user]);
  assert.deepEqual(json(again), json(msg));
  assert.equal((await getJSON(`/v1/sessions/${sid}/chat`)).messages.length, 2);

  // No active run: the resume endpoint answers 204 and the transport yields null.
  assert.equal(await t.reconnectToStream({ chatId: sid }), null);
});

test('a stream cut mid-run resumes through reconnectToStream to the same message', async () => {
  assert.ok(uncut, 'runs after the uncut run');
  const sid = await createSession('echoquick');
  const t = transport(sid);
  assert.equal(t.resumeStreamIsReplay, true);
  const user = userMessage('hello there');
  const abort = new AbortController();
  const stream = await t.sendMessages({ chatId: sid, messages: [user], trigger: 'submit-message', messageId: undefined, abortSignal: abort.signal });
  const reader = stream.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    assert.ok(!done, 'the stream ended before the first text');
    if (value.type === 'text-delta') break;
  }
  abort.abort(); // the connection drops mid-run
  await reader.cancel().catch(() => {});

  const resumed = await t.reconnectToStream({ chatId: sid });
  assert.ok(resumed, 'the run is active: the resume endpoint streams it');
  const msg = await finalMessage(resumed);
  assert.deepEqual(normal(msg, msg.id), uncut);
});

test('an approval requested by the runtime is answered through the client, and the run finishes', async () => {
  const sid = await createSession('echoagent');
  const t = transport(sid);
  const user = userMessage('say hello');
  const first = await send(t, sid, [user]);
  const tool = first.parts.find((p) => p.type === 'dynamic-tool');
  assert.equal(tool.state, 'approval-requested');
  assert.ok(tool.approval.id);

  // What useChat's addToolApprovalResponse does to the message, then the automatic resend.
  const answered = structuredClone(first);
  const part = answered.parts.find((p) => p.type === 'dynamic-tool');
  part.state = 'approval-responded';
  part.approval = { id: part.approval.id, approved: true };
  const done = await send(t, sid, [user, answered]);
  const finished = done.parts.find((p) => p.type === 'dynamic-tool');
  assert.equal(finished.state, 'output-available');
  assert.equal(finished.output, 'hello\n');
  assert.match(done.parts.filter((p) => p.type === 'text').map((p) => p.text).join(''), /done$/);
  await waitRun(sid, done.id, 'completed');

  // The history has the decision where the client put it.
  const history = await getJSON(`/v1/sessions/${sid}/chat`);
  assert.deepEqual(history.messages, json([user, done]));
});

test('stop stops the run through the stop command', async () => {
  const sid = await createSession('echoquick');
  const t = transport(sid);
  const user = userMessage('keep going');
  const stream = await t.sendMessages({ chatId: sid, messages: [user], trigger: 'submit-message', messageId: undefined, abortSignal: undefined });
  const types = [];
  let stopped = false;
  for await (const chunk of stream) {
    types.push(chunk);
    if (!stopped && chunk.type === 'tool-output-available') {
      stopped = true;
      const res = await fetch(`${base}/v1/sessions/${sid}/chat/stop`, { method: 'POST' });
      const result = await res.json();
      assert.equal(res.status, 200, JSON.stringify(result));
      assert.equal(result.outcome, 'accepted');
      assert.equal(result.commandId, `bridge-stop-run-${user.id}`);
    }
  }
  assert.ok(stopped);
  assert.deepEqual(types.slice(-2).map((c) => c.type), ['abort', 'finish']);
  assert.equal(types.at(-2).reason, 'stopped from the chat', 'the abort chunk carries the stop\'s reason');
  await waitRun(sid, `run-${user.id}`, 'stopped');
  assert.equal(await t.reconnectToStream({ chatId: sid }), null);
});

// agreeAI6 is what ai 6 can agree on with history: ai 6 has no chunk for an approval's
// decision, so a tool part's approval is compared by its id alone (docs/bridges.md).
const agreeAI6 = (m) => {
  const c = json(m);
  for (const p of c.parts) if (p.approval) p.approval = { id: p.approval.id };
  return c;
};

for (const { major, Transport, read, headers } of majors) {
  test(`ai ${major}: a run replayed after its approval agrees with history, the reason included`, async () => {
    const sid = await createSession('echoslow');
    const t = new Transport({ api: `${base}/v1/sessions/${sid}/chat`, headers });
    const readAll = async (stream, message) => {
      let last;
      for await (const m of read({ stream, message, terminateOnError: true })) last = m;
      return last;
    };
    const user = userMessage('say hello');
    const first = await readAll(await t.sendMessages({ chatId: sid, messages: [user], trigger: 'submit-message', messageId: undefined, abortSignal: undefined }));
    const answered = structuredClone(first);
    const part = answered.parts.find((p) => p.type === 'dynamic-tool');
    assert.equal(part.state, 'approval-requested');
    part.state = 'approval-responded';
    part.approval = { id: part.approval.id, approved: true, reason: 'looks safe' };
    const live = t.sendMessages({ chatId: sid, messages: [user, answered], trigger: 'submit-message', messageId: undefined, abortSignal: undefined });
    const liveDone = live.then((stream) => readAll(stream, structuredClone(answered)));
    await waitRun(sid, first.id, 'running');
    // A fresh tab resumes the run after its approval: the stream replays it from its start.
    const resumed = await t.reconnectToStream({ chatId: sid });
    assert.ok(resumed, 'the run is active (echoslow streams for seconds)');
    const replayed = await readAll(resumed);
    const done = await liveDone;
    await waitRun(sid, first.id, 'completed');
    const history = (await getJSON(`/v1/sessions/${sid}/chat`)).messages;
    assert.equal(history.length, 2);
    assert.deepEqual(history[1].parts.find((p) => p.type === 'dynamic-tool').approval, { id: part.approval.id, approved: true, reason: 'looks safe' });
    assert.deepEqual(json(done), history[1], 'the live stream agrees with history');
    if (major === 7) {
      assert.deepEqual(json(replayed), history[1], 'the replay agrees with history');
    } else {
      assert.deepEqual(agreeAI6(replayed), agreeAI6(history[1]), 'the replay agrees with history but for the decision');
    }
  });
}
