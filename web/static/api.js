// The API of the same origin (docs/api.md): JSON requests, errors as the server words them.

// ApiError carries the server's error code and message.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function errorOf(resp) {
  // A server with authentication answers 401 without the login cookie: the app shows its
  // login form (app.js).
  if (resp.status === 401) dispatchEvent(new CustomEvent("sessiond:login"));
  let body = null;
  try { body = await resp.json(); } catch (_) { /* not JSON */ }
  const e = body && (body.error || body);
  if (e && e.code) return new ApiError(resp.status, e.code, e.message || e.code);
  return new ApiError(resp.status, "HTTP_" + resp.status, `${resp.status} ${resp.statusText}`);
}

// getJSON fetches a JSON resource; it throws ApiError on an error answer.
export async function getJSON(path) {
  const resp = await fetch(path, { headers: { Accept: "application/json" } });
  if (!resp.ok) throw await errorOf(resp);
  return resp.json();
}

// getTagged fetches path with If-None-Match: tag; it answers {notModified:true} on 304, else
// {body, tag}.
export async function getTagged(path, tag) {
  const headers = { Accept: "application/json" };
  if (tag) headers["If-None-Match"] = tag;
  const resp = await fetch(path, { headers, cache: "no-store" });
  if (resp.status === 304) return { notModified: true, tag };
  if (!resp.ok) throw await errorOf(resp);
  return { body: await resp.json(), tag: resp.headers.get("ETag") };
}

// postJSON posts body and answers the parsed answer; it throws ApiError on an error answer.
export async function postJSON(path, body) {
  const resp = await fetch(path, {
    method: "POST", headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify(body),
  });
  if (!resp.ok) throw await errorOf(resp);
  return resp.json();
}

export const enc = encodeURIComponent;

// readPrefix reads the events of session id with sequence <= upTo (and > from, default -1: from
// the start), in pages of 10,000 (the read endpoint's largest page), calling onPage after each.
export async function readPrefix(id, upTo, onPage, from = -1) {
  let after = from;
  while (after < upTo) {
    const limit = Math.min(10000, upTo - after);
    const page = await getJSON(`/v1/sessions/${enc(id)}/events?after=${after}&limit=${limit}`);
    if (page.events.length === 0) break;
    onPage(page.events);
    after = page.events[page.events.length - 1].sequence;
  }
}

// sendCommand sends an AgentSessionCommand. It answers the result when accepted (or a
// duplicate), and throws ApiError with the server's message when the command is refused.
export async function sendCommand(sessionId, commandType, { runId, expectedSequence, payload }) {
  const key = crypto.randomUUID();
  const cmd = {
    contract: "AgentSessionCommand", commandId: "ui-" + key, sessionId, idempotencyKey: "ui-" + key,
    expectedSequence, issuedAt: new Date().toISOString(), commandType, payload: payload || {},
  };
  if (runId) cmd.runId = runId;
  const resp = await fetch(`/v1/sessions/${enc(sessionId)}/commands`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(cmd),
  });
  let body = null;
  try { body = await resp.json(); } catch (_) { /* not JSON */ }
  if (body && body.contract === "AgentSessionCommandResult") {
    if (body.outcome === "accepted" || body.outcome === "duplicate") return body;
    throw new ApiError(resp.status, body.error.code, body.error.message);
  }
  if (body && body.error) throw new ApiError(resp.status, body.error.code, body.error.message);
  throw new ApiError(resp.status, "HTTP_" + resp.status, `${resp.status} ${resp.statusText}`);
}

// login turns an API key into the login cookie (POST /v1/login): the key is sent once, in the
// Authorization header, and never kept by the page; the cookie is HttpOnly.
export async function login(key) {
  const resp = await fetch("/v1/login", { method: "POST", headers: { Authorization: "Bearer " + key.trim(), Accept: "application/json" } });
  if (!resp.ok) {
    let body = null;
    try { body = await resp.json(); } catch (_) { /* not JSON */ }
    const e = body && body.error;
    throw new ApiError(resp.status, e ? e.code : "HTTP_" + resp.status, e ? e.message : `${resp.status} ${resp.statusText}`);
  }
  return resp.json();
}

// logout clears the login cookie.
export async function logout() {
  await fetch("/v1/logout", { method: "POST" });
}
