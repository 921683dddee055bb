// AG-UI's own client (@ag-ui/client's HttpAgent, which verifies the order of the events it
// receives) and schemas (@ag-ui/core), unmodified, against sessiond's AG-UI endpoint.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HttpAgent } from '@ag-ui/client';
import { EventSchemas } from '@ag-ui/core/schemas';
import { base, createSession, newId, json, getJSON, waitRun } from './helpers.mjs';

function agentFor(sid) {
  return new HttpAgent({ url: `${base}/v1/sessions/${sid}/agui`, threadId: sid });
}

// run runs the agent and returns the events it received, each checked against the schemas.
async function run(agent, params = {}) {
  const events = [];
  await agent.runAgent(params, {
    onEvent: ({ event }) => {
      EventSchemas.parse(event);
      events.push(event);
    },
  });
  return events;
}

const types = (events) => events.map((e) => e.type);

test('HttpAgent runs a turn: snapshot first, valid events in order, messages equal the transcript', async () => {
  const sid = await createSession('echoquick');
  const agent = agentFor(sid);
  const id = newId();
  agent.addMessage({ id, role: 'user', content: 'hello there' });
  const events = await run(agent);
  const ts = types(events);
  assert.equal(ts[0], 'RUN_STARTED');
  assert.equal(ts[1], 'MESSAGES_SNAPSHOT');
  assert.deepEqual(events[1].messages, [{ id, role: 'user', content: 'hello there' }]);
  for (const t of ['REASONING_START', 'REASONING_MESSAGE_CONTENT', 'TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT',
    'TOOL_CALL_START', 'TOOL_CALL_ARGS', 'TOOL_CALL_END', 'TOOL_CALL_RESULT', 'CUSTOM']) {
    assert.ok(ts.includes(t), `${t} in ${ts.join(' ')}`);
  }
  const last = events.at(-1);
  assert.equal(last.type, 'RUN_FINISHED');
  assert.equal(last.outcome.type, 'success');
  const custom = events.find((e) => e.type === 'CUSTOM' && e.name === 'sessiond.terminal');
  assert.equal(custom.rawEvent.eventType, 'terminal');
  assert.equal(custom.rawEvent.payload.chunk, 'hello\n');

  await waitRun(sid, `run-${id}`, 'completed');
  const transcript = await getJSON(`/v1/sessions/${sid}/agui/messages`);
  assert.deepEqual(json(agent.messages), transcript.messages);
  assert.ok(agent.messages.some((m) => m.role === 'reasoning'));
  assert.ok(agent.messages.some((m) => m.role === 'tool' && m.content === 'hello\n'));

  // A new agent on the same thread reloads the history from the snapshot.
  const fresh = agentFor(sid);
  const again = await run(fresh);
  assert.deepEqual(types(again), ['RUN_STARTED', 'MESSAGES_SNAPSHOT', 'RUN_FINISHED']);
  assert.deepEqual(json(fresh.messages), transcript.messages);
});

test('an approval interrupts the run, and resume[] answers it', async () => {
  const sid = await createSession('echoagent');
  const agent = agentFor(sid);
  const id = newId();
  agent.addMessage({ id, role: 'user', content: 'say hello' });
  const first = await run(agent);
  const finished = first.at(-1);
  assert.equal(finished.type, 'RUN_FINISHED');
  assert.equal(finished.outcome.type, 'interrupt');
  const [interrupt] = finished.outcome.interrupts;
  assert.equal(interrupt.reason, 'approval');
  assert.equal(interrupt.toolCallId, `tool-run-${id}`);
  assert.equal(agent.pendingInterrupts.length, 1);

  // A reloaded tab, with nothing new to send, learns of the pending approval and its run ends.
  const reloaded = agentFor(sid);
  const again = await run(reloaded);
  assert.deepEqual(types(again), ['RUN_STARTED', 'MESSAGES_SNAPSHOT', 'RUN_FINISHED']);
  assert.deepEqual(again.at(-1).outcome, finished.outcome);
  assert.equal(reloaded.pendingInterrupts.length, 1);

  const second = await run(agent, { resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { approved: true, reason: 'looks safe' } }] });
  const why = second.find((e) => e.type === 'CUSTOM' && e.name === 'sessiond.approval-reason');
  assert.deepEqual(why?.value, { approvalId: interrupt.id, toolCallId: interrupt.toolCallId, status: 'approved', reason: 'looks safe' });
  const ts = types(second);
  assert.equal(ts[0], 'RUN_STARTED');
  assert.equal(ts[1], 'MESSAGES_SNAPSHOT');
  assert.ok(ts.includes('TOOL_CALL_RESULT'));
  assert.equal(second.at(-1).type, 'RUN_FINISHED');
  assert.equal(second.at(-1).outcome.type, 'success');
  assert.equal(agent.pendingInterrupts.length, 0);

  await waitRun(sid, `run-${id}`, 'completed');
  const transcript = await getJSON(`/v1/sessions/${sid}/agui/messages`);
  assert.deepEqual(json(agent.messages), transcript.messages);
});
