// Helpers shared by the interop tests: the server under test and its sessions.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';

export const base = process.env.SESSIOND_URL;
assert.ok(base, 'SESSIOND_URL names the sessiond under test (interop_test.go sets it)');

// createSession creates a session served by the example worker: agent "echoagent" asks for
// approval before its tool call, "echoquick" runs it at once.
export async function createSession(agent) {
  const id = `S-${agent}-${randomUUID().slice(0, 8)}`;
  const res = await fetch(`${base}/v1/sessions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      session_id: id, agent_id: agent, role: 'implementer',
      snapshot: { mode: 'work', modelId: 'echo', capabilities: { approval: true, resume: true } },
    }),
  });
  const body = await res.text();
  assert.equal(res.status, 201, body);
  return id;
}

export const newId = () => `m-${randomUUID()}`;

// json drops what JSON drops (undefined members), for comparing what clients hold with
// what the server answers.
export const json = (v) => JSON.parse(JSON.stringify(v));

export async function getJSON(path) {
  const res = await fetch(`${base}${path}`);
  const body = await res.text();
  assert.equal(res.status, 200, body);
  return JSON.parse(body);
}

// waitRun polls a run until it has the status.
export async function waitRun(sid, runId, status) {
  for (let i = 0; i < 200; i++) {
    const res = await fetch(`${base}/v1/sessions/${sid}/runs/${runId}`);
    if (res.status === 200 && (await res.json()).status === status) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`run ${runId} of ${sid} never became ${status}`);
}
