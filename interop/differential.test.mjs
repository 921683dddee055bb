// A generative, differential test of both bridges, checked by the real clients: from
// randomized runs (text and reasoning in deltas, tool calls that complete or fail, approvals
// approved and rejected with or without a reason, runs that complete, fail or are stopped with
// a reason), the live stream, a fresh tab that starts mid-run (a replay for the AI SDK, a
// snapshot then live for AG-UI), a tab reloaded while an approval waits, and the history GET
// must agree (docs/bridges.md: for ai 6, a tool part's approval is compared by its id).
// The runtime is the test itself: it appends the run's events as a worker would.
// SESSIOND_DIFF_SESSIONS sets the number of sessions per bridge (default 200).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DefaultChatTransport, readUIMessageStream } from 'ai';
import * as ai7 from 'ai7';
import { HttpAgent } from '@ag-ui/client';
import { EventSchemas } from '@ag-ui/core/schemas';
import { base, createSession, json, getJSON, waitRun } from './helpers.mjs';

const sessions = Number(process.env.SESSIOND_DIFF_SESSIONS || 200);

// each runs fn(seed) for seeds 1…n, 8 sessions at a time (they are independent).
async function each(n, fn) {
  let next = 1;
  const worker = async () => { while (next <= n) await fn(next++); };
  await Promise.all(Array.from({ length: 8 }, worker));
}

// rng is a small seeded generator (mulberry32), so that a failure names its seed.
function rng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { int: (n) => Math.floor(next() * n), chance: (p) => next() < p };
}

const now = () => new Date().toISOString();

// script generates a run: segments of event batches, each segment but the last ending in a
// wait for an approval, the last one in the run's end (completed, failed or stopped).
function script(r) {
  const segments = [];
  let batches = [[['status', { status: 'running', startedAt: now() }]]];
  const approvals = r.int(3);
  let k = 0;
  const content = () => {
    for (let n = 1 + r.int(4); n > 0; n--) {
      k++;
      switch (r.int(3)) {
        case 0: {
          const id = `a${k}`;
          const chunks = 1 + r.int(3);
          for (let c = 0; c < chunks; c++) {
            batches.push([['message', { messageId: id, role: 'assistant', operation: 'append', parts: [{ type: 'text', text: `t${k}.${c} ` }], status: c === chunks - 1 ? 'completed' : 'streaming' }]]);
          }
          break;
        }
        case 1: {
          const id = `r${k}`;
          const chunks = 1 + r.int(3);
          for (let c = 0; c < chunks; c++) {
            batches.push([['reasoning', { reasoningId: id, text: `think${k}.${c} `, status: c === chunks - 1 ? 'completed' : 'streaming' }]]);
          }
          break;
        }
        default: {
          const id = `tool${k}`;
          batches.push([['tool', { toolCallId: id, toolName: 'shell', status: 'pending', input: { cmd: `ls ${k}` } }]]);
          batches.push([['tool', { toolCallId: id, toolName: 'shell', status: 'running', input: { cmd: `ls ${k}` } }]]);
          batches.push([['tool', r.chance(0.7)
            ? { toolCallId: id, toolName: 'shell', status: 'completed', input: { cmd: `ls ${k}` }, output: r.chance(0.5) ? `out ${k}` : { files: k } }
            : { toolCallId: id, toolName: 'shell', status: 'failed', input: { cmd: `ls ${k}` }, error: `boom ${k}` }]]);
        }
      }
    }
  };
  for (let a = 0; a < approvals; a++) {
    content();
    k++;
    const tool = `tool${k}`;
    batches.push([
      ['tool', { toolCallId: tool, toolName: 'shell', status: 'pending', input: { cmd: `rm ${k}` } }],
      ['approval', { approvalId: `ap${k}`, toolCallId: tool, status: 'requested', title: `Run rm ${k}?` }],
      ['status', { status: 'waiting_approval' }],
    ]);
    segments.push({ batches, approval: { id: `ap${k}`, tool, approved: r.chance(0.6), reason: r.chance(0.5) ? `because ${k}` : undefined } });
    batches = [];
  }
  content();
  const end = ['completed', 'completed', 'failed', 'stopped'][r.int(4)];
  segments.push({ batches, end, cutAt: r.int(batches.length + 1) });
  return segments;
}

// after returns the events that follow a decision: the tool runs, or is denied.
const after = ({ approved, tool }) => approved
  ? [[['tool', { toolCallId: tool, toolName: 'shell', status: 'running' }]], [['tool', { toolCallId: tool, toolName: 'shell', status: 'completed', output: 'done' }]]]
  : [[['tool', { toolCallId: tool, toolName: 'shell', status: 'denied' }]]];

// runtime appends a run's events as its worker would.
function runtime(sid, runId, source) {
  let n = 0;
  const started = Date.now();
  const append = async (batch) => {
    const events = batch.map(([eventType, payload]) => {
      n++;
      return { contract: 'AgentSessionEvent', eventId: `${runId}-${n}`, sessionId: sid, runId, sourceMessageId: source, sequence: 0,
        idempotencyKey: `${runId}-${n}`, occurredAt: now(), eventType, payload };
    });
    const res = await fetch(`${base}/v1/sessions/${sid}/events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(events) });
    assert.equal(res.status, 201, await res.text());
  };
  const end = async (status) => {
    const d = Date.now() - started;
    if (status === 'failed') await append([['error', { code: 'TOOL_CRASHED', message: 'the tool crashed', retryable: false }]]);
    const p = { status, durationMs: d };
    if (status === 'completed') p.completedAt = now();
    if (status === 'failed') p.failedAt = now();
    if (status === 'stopped') p.stoppedAt = now();
    await append([['status', p]]);
  };
  return { append, end };
}

const stop = async (sid) => {
  const res = await fetch(`${base}/v1/sessions/${sid}/chat/stop`, { method: 'POST' });
  assert.equal(res.status, 200, await res.text());
};

const agreeAI6 = (m) => {
  const c = json(m);
  for (const p of c.parts) if (p.approval) p.approval = { id: p.approval.id };
  return c;
};

const majors = [
  { major: 6, Transport: DefaultChatTransport, read: readUIMessageStream, headers: undefined, agree: agreeAI6 },
  { major: 7, Transport: ai7.DefaultChatTransport, read: ai7.readUIMessageStream, headers: { 'X-Sessiond-AI-SDK': '7' }, agree: json },
];

test(`AI SDK: live, resumed and history agree over ${sessions} generated runs (ai 6 and 7)`, async () => {
  await each(sessions, async (seed) => {
    const r = rng(seed);
    const { major, Transport, read, headers, agree } = majors[seed % 2];
    const where = `seed ${seed} (ai ${major})`;
    const sid = await createSession('scripted');
    const t = new Transport({ api: `${base}/v1/sessions/${sid}/chat`, headers });
    const readAll = async (stream, message) => {
      let last = message;
      for await (const m of read({ stream, message, terminateOnError: false, onError: () => {} })) last = m;
      return last;
    };
    const user = { id: `m${seed}`, role: 'user', parts: [{ type: 'text', text: `go ${seed}` }] };
    const runId = `run-${user.id}`;
    const rt = runtime(sid, runId, user.id);
    let live = readAll(await t.sendMessages({ chatId: sid, messages: [user], trigger: 'submit-message', messageId: undefined, abortSignal: undefined }));
    const tabs = [];
    for (const seg of script(r)) {
      for (const [i, batch] of seg.batches.entries()) {
        if (seg.cutAt === i) tabs.push(readAll(await t.reconnectToStream({ chatId: sid }))); // a fresh tab, mid-run
        await rt.append(batch);
      }
      if (seg.approval) {
        const waited = await live;
        const reloaded = await readAll(await t.reconnectToStream({ chatId: sid })); // reloaded while it waits
        const history = (await getJSON(`/v1/sessions/${sid}/chat`)).messages;
        assert.deepEqual(json(waited), history[1], `${where}: the live stream at the wait`);
        assert.deepEqual(agree(reloaded), agree(history[1]), `${where}: a tab reloaded at the wait`);
        const answered = structuredClone(waited);
        const part = answered.parts.find((p) => p.type === 'dynamic-tool' && p.toolCallId === seg.approval.tool);
        part.state = 'approval-responded';
        part.approval = { id: seg.approval.id, approved: seg.approval.approved, ...(seg.approval.reason ? { reason: seg.approval.reason } : {}) };
        live = readAll(await t.sendMessages({ chatId: sid, messages: [user, answered], trigger: 'submit-message', messageId: undefined, abortSignal: undefined }), structuredClone(answered));
        for (const batch of after(seg.approval)) await rt.append(batch);
        continue;
      }
      if (seg.cutAt === seg.batches.length) tabs.push(readAll(await t.reconnectToStream({ chatId: sid })));
      if (seg.end === 'stopped') await stop(sid);
      await rt.end(seg.end);
    }
    const final = await live;
    const history = (await getJSON(`/v1/sessions/${sid}/chat`)).messages;
    assert.equal(history.length, 2, where);
    assert.deepEqual(json(final), history[1], `${where}: the live stream`);
    for (const tab of tabs) assert.deepEqual(agree(await tab), agree(history[1]), `${where}: a tab that started mid-run`);
  });
});

test(`AG-UI: live, joined mid-run and history agree over ${sessions} generated runs`, async () => {
  const agentFor = (sid) => new HttpAgent({ url: `${base}/v1/sessions/${sid}/agui`, threadId: sid });
  const run = async (agent, params = {}) => {
    const events = [];
    try {
      await agent.runAgent(params, { onEvent: ({ event }) => { EventSchemas.parse(event); events.push(event); } });
    } catch (e) {
      if (events.at(-1)?.type !== 'RUN_ERROR') throw e; // a failed run ends in RUN_ERROR
    }
    return events;
  };
  await each(sessions, async (seed) => {
    const r = rng(1000 + seed);
    const where = `seed ${1000 + seed}`;
    const sid = await createSession('scripted');
    const agent = agentFor(sid);
    const id = `m${seed}`;
    agent.addMessage({ id, role: 'user', content: `go ${seed}` });
    const rt = runtime(sid, `run-${id}`, id);
    let live = run(agent);
    await waitRun(sid, `run-${id}`, 'queued'); // the message and its run are in the log
    const tabs = [];
    for (const seg of script(r)) {
      for (const [i, batch] of seg.batches.entries()) {
        if (seg.cutAt === i) { const tab = agentFor(sid); tabs.push(run(tab).then(() => tab)); }
        await rt.append(batch);
      }
      if (seg.approval) {
        const events = await live;
        assert.equal(events.at(-1).outcome?.type, 'interrupt', `${where}: the live stream ends in the interrupt`);
        const reloaded = agentFor(sid);
        const again = await run(reloaded);
        assert.deepEqual(again.at(-1).outcome, events.at(-1).outcome, `${where}: a tab reloaded at the wait is offered the interrupt`);
        const messages = (await getJSON(`/v1/sessions/${sid}/agui/messages`)).messages;
        assert.deepEqual(json(agent.messages), messages, `${where}: the live agent at the wait`);
        assert.deepEqual(json(reloaded.messages), messages, `${where}: a tab reloaded at the wait`);
        const resume = [{ interruptId: seg.approval.id, status: seg.approval.approved ? 'resolved' : 'cancelled', payload: { approved: seg.approval.approved, reason: seg.approval.reason } }];
        live = run(agent, { resume });
        await waitRun(sid, `run-${id}`, 'running'); // the decision is in the log
        for (const batch of after(seg.approval)) await rt.append(batch);
        continue;
      }
      if (seg.cutAt === seg.batches.length) { const tab = agentFor(sid); tabs.push(run(tab).then(() => tab)); }
      if (seg.end === 'stopped') await stop(sid);
      await rt.end(seg.end);
    }
    await live;
    const messages = (await getJSON(`/v1/sessions/${sid}/agui/messages`)).messages;
    assert.deepEqual(json(agent.messages), messages, `${where}: the live agent`);
    for (const tab of tabs) assert.deepEqual(json((await tab).messages), messages, `${where}: a tab that joined mid-run`);
  });
});
