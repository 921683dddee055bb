// The session page: the transcript, live over SSE, with the controls the policy table allows,
// time travel, lineage and the lifecycle panel.
import { useState, useEffect, useRef, useMemo, useCallback } from "preact/hooks";
import { getJSON, postJSON, sendCommand, readPrefix, enc } from "./api.js";
import { Fold, emptyTranscript, KINDS, eventLine } from "./fold.js";
import { allowed, isTerminal } from "./policy.js";
import * as R from "./render.js";
import { LineagePanel, LifecyclePanel } from "./panels.js";

const html = R.html;
const RECENT = 500; // events kept for the event log and for finding event ids (retry)
const PAGE = 100; // items of a list shown at first (messages: more on request)

const INHERIT = { messages: "through-source-message", attachments: "exclude", summaries: "inherit", toolResults: "exclude", codeChanges: "exclude" };

// useLiveSession loads the session and follows its stream. It answers the state the page
// draws; live events change only the items they touch.
function useLiveSession(id) {
  const [res, setRes] = useState(null);
  const [err, setErr] = useState(null);
  const [conn, setConn] = useState("connecting");
  const [streamNote, setStreamNote] = useState("");
  const [, setVersion] = useState(0);
  const fold = useRef(null);
  const recent = useRef([]);

  useEffect(() => {
    let closed = false, es = null, chain = Promise.resolve(), refreshTimer = null;
    fold.current = null;
    recent.current = [];
    setRes(null); setErr(null); setConn("connecting"); setStreamNote("");
    const bump = () => setVersion((v) => v + 1);
    const refresh = () => {
      clearTimeout(refreshTimer);
      refreshTimer = setTimeout(() => getJSON(`/v1/sessions/${enc(id)}`).then((r) => !closed && setRes(r)).catch(() => {}), 200);
    };
    const remember = (ev) => {
      const r = recent.current;
      r.push(ev);
      if (r.length > RECENT) r.splice(0, r.length - RECENT);
    };
    const applyOne = (ev) => {
      if (!fold.current.apply(ev)) return; // a duplicate: already applied
      remember(ev);
      if (ev.eventType === "status" && ev.runId) {
        // The current run is the earliest one still active (a run enqueued behind it waits):
        // a status of another run replaces it only when it has ended. The refresh below
        // brings the server's answer.
        setRes((r) => {
          if (!r) return r;
          const cur = r.currentRun;
          if (cur && cur.runId !== ev.runId && !isTerminal(cur.status)) return r;
          return { ...r, currentRun: { ...(cur && cur.runId === ev.runId ? cur : { runId: ev.runId, sourceMessageId: ev.sourceMessageId }), status: ev.payload.status } };
        });
        refresh();
      }
      bump();
    };
    // receive applies a streamed event in order; a gap (which resume should never leave) is
    // filled from the log first, so the page never skips an event.
    const receive = (ev) => {
      chain = chain.then(async () => {
        if (closed) return;
        const last = fold.current.t.lastSequence;
        if (ev.sequence > last + 1) {
          await readPrefix(id, ev.sequence - 1, (evs) => evs.forEach((e) => e.sequence > fold.current.t.lastSequence && applyOne(e)));
        }
        applyOne(ev);
      }).catch((e) => setStreamNote(`could not fill a gap in the stream: ${e.message}`));
    };
    (async () => {
      try {
        const [r, t] = await Promise.all([getJSON(`/v1/sessions/${enc(id)}`), getJSON(`/v1/sessions/${enc(id)}/transcript`)]);
        if (closed) return;
        performance.mark("sessiond:transcript-loaded");
        fold.current = new Fold(t);
        const last = t.lastSequence;
        if (last >= 0) {
          const from = Math.max(-1, last - PAGE);
          const page = await getJSON(`/v1/sessions/${enc(id)}/events?after=${from}&limit=${last - from}`);
          recent.current = page.events.filter((e) => e.sequence <= last);
        }
        if (closed) return;
        setRes(r);
        es = new EventSource(`/v1/sessions/${enc(id)}/events/stream?after=${last}`);
        es.onopen = () => { setConn("live"); setStreamNote(""); };
        es.onerror = () => setConn(es.readyState === EventSource.CLOSED ? "closed" : "reconnecting");
        for (const k of KINDS) es.addEventListener("ev." + k, (e) => receive(JSON.parse(e.data)));
        es.addEventListener("stream.error", (e) => {
          const { code, message } = JSON.parse(e.data);
          setStreamNote(`the server ended the stream (${code}): ${message}`);
        });
      } catch (e) {
        if (!closed) setErr(e);
      }
    })();
    const poll = setInterval(() => !document.hidden && refresh(), 5000);
    return () => { closed = true; clearInterval(poll); clearTimeout(refreshTimer); if (es) es.close(); };
  }, [id]);
  return { res, setRes, err, conn, streamNote, fold: fold.current, recent: recent.current };
}

// EditRerun is a message's "edit and rerun" control: a text box with the message's text.
function EditRerun({ m, onSend }) {
  const [text, setText] = useState(null);
  if (text === null) {
    return html`<button type="button" class="small" onClick=${() => setText(m.parts.map((p) => (typeof p === "string" ? p : (p && p.text) || "")).join("\n\n"))}>edit and rerun</button>`;
  }
  return html`<form class="edit-rerun" onSubmit=${(e) => { e.preventDefault(); if (text.trim()) onSend(m, text); }}>
    <label for=${"edit-" + m.messageId}>New text of the message</label>
    <textarea id=${"edit-" + m.messageId} rows="3" value=${text} onInput=${(e) => setText(e.currentTarget.value)}></textarea>
    <button type="submit" disabled=${!text.trim()}>Rerun in a new session</button> <button type="button" onClick=${() => setText(null)}>Cancel</button></form>`;
}


// findEvent answers the latest recent event that satisfies pred.
function findEvent(recent, pred) {
  for (let i = recent.length - 1; i >= 0; i--) if (pred(recent[i])) return recent[i];
  return null;
}

export function SessionPage({ id }) {
  const live = useLiveSession(id);
  const { res, err, conn, streamNote, fold, recent } = live;
  const [notice, setNotice] = useState(null);
  const [busy, setBusy] = useState("");
  const [steerText, setSteerText] = useState("");
  const [shown, setShown] = useState(PAGE);
  const [travel, setTravel] = useState(null); // {seq, t, loading}
  const travelReq = useRef(0);

  useEffect(() => { setTravel(null); setShown(PAGE); setNotice(null); }, [id]);
  // A performance mark when the transcript is first on screen (the large-session benchmark
  // reads it; developer tools show it).
  const drawn = !!(live.res && live.fold);
  useEffect(() => { if (drawn) performance.mark("sessiond:session-drawn"); }, [drawn]);

  const lastSeq = fold ? fold.t.lastSequence : -1;
  const run = res && res.currentRun;
  const runStatus = run ? run.status : "idle";
  const snapshot = res && res.snapshot;

  // send sends a command and shows the server's answer: its message when refused.
  const send = useCallback(async (label, type, args) => {
    setBusy(label); setNotice(null);
    try {
      const r = await sendCommand(id, type, args);
      setNotice({ kind: "ok", text: `${label}: ${r.outcome}; the run is ${r.sessionStatus}` });
      return r;
    } catch (e) {
      setNotice({ kind: "error", text: `${label} refused: ${e.code}: ${e.message}` });
      return null;
    } finally {
      setBusy("");
    }
  }, [id]);

  const ctx = useRef({});
  ctx.current = { run, runStatus, snapshot, lastSeq, recent, send, travel };

  // Fork from a message: the run it started or belongs to is the source run.
  const fork = useCallback(async (m) => {
    const c = ctx.current;
    let runId = m.runId;
    if (!runId) {
      try {
        const runs = await getJSON(`/v1/sessions/${enc(id)}/runs`);
        const r = runs.runs.find((x) => x.sourceMessageId === m.messageId);
        runId = r && r.runId;
      } catch (_) { /* reported below */ }
    }
    if (!runId) {
      setNotice({ kind: "error", text: `fork: message ${m.messageId} started no run and belongs to none, so there is nothing to fork from` });
      return;
    }
    const r = await c.send("fork", "fork", { expectedSequence: c.lastSeq, payload: { sourceThreadId: id, sourceMessageId: m.messageId, sourceRunId: runId, inheritance: INHERIT } });
    if (r && r.operation) location.hash = "#/s/" + encodeURIComponent(r.operation.activeBranch.threadId);
  }, [id]);
  // Edit and rerun a user message: a new session with the message's parts replaced, and a run
  // queued in it.
  const editRerun = useCallback(async (m, text) => {
    const c = ctx.current;
    let runId = m.runId;
    try {
      const runs = await getJSON(`/v1/sessions/${enc(id)}/runs`);
      const r = runs.runs.find((x) => x.sourceMessageId === m.messageId);
      runId = (r && r.runId) || runId;
    } catch (_) { /* reported below */ }
    if (!runId) {
      setNotice({ kind: "error", text: `edit and rerun: message ${m.messageId} started no run, so there is nothing to rerun` });
      return;
    }
    const r = await c.send("edit and rerun", "edit-and-rerun", { expectedSequence: c.lastSeq, payload: { sourceThreadId: id, sourceMessageId: m.messageId, sourceRunId: runId, replacementParts: [{ type: "text", text }], inheritance: INHERIT } });
    if (r && r.operation) location.hash = "#/s/" + encodeURIComponent(r.operation.activeBranch.threadId);
  }, [id]);
  const messageActions = useMemo(() => (m) => {
    const c = ctx.current;
    const canFork = allowed("fork", c.snapshot, c.runStatus).ok;
    const canEdit = m.role === "user" && allowed("edit-and-rerun", c.snapshot, c.runStatus).ok;
    return html`${canFork ? html` <button type="button" class="small" onClick=${() => fork(m)} title="a new session from this message, with its lineage">fork from here</button>` : null}
      ${canEdit ? html` <${EditRerun} m=${m} onSend=${editRerun} />` : null}`;
  }, [fork, editRerun, snapshot, runStatus]);
  // In the past (time travel) a message can still be forked: the fork takes the log through it.
  const pastActions = useMemo(() => (m) => (allowed("fork", ctx.current.snapshot, ctx.current.runStatus).ok
    ? html` <button type="button" class="small" onClick=${() => fork(m)} title="a new session from this message, with its lineage">fork from here</button>` : null), [fork, snapshot, runStatus]);

  // Time travel: the transcript as it stood at sequence N, folded from the log's prefix.
  const travelTo = useCallback((n) => {
    const c = ctx.current;
    if (n >= c.lastSeq) { setTravel(null); return; }
    const req = ++travelReq.current;
    setTravel((tr) => ({ seq: n, t: tr && tr.t, loading: true }));
    const f = new Fold(emptyTranscript(id));
    readPrefix(id, n, (evs) => evs.forEach((e) => f.apply(e)))
      .then(() => req === travelReq.current && setTravel({ seq: n, t: f.t, loading: false }))
      .catch((e) => setNotice({ kind: "error", text: `time travel: ${e.message}` }));
  }, [id]);
  const travelTimer = useRef(null);
  const onSlide = (e) => {
    const n = Number(e.currentTarget.value);
    clearTimeout(travelTimer.current);
    travelTimer.current = setTimeout(() => travelTo(n), 150);
    setTravel((tr) => (n >= lastSeq ? null : { seq: n, t: tr && tr.t, loading: true }));
  };

  if (err) return html`<main class="page"><p><a href="#/">← sessions</a></p><p class="err" role="alert">${err.code || "error"}: ${err.message}</p></main>`;
  if (!res || !fold) return html`<main class="page"><p><a href="#/">← sessions</a></p><p>Loading ${id}…</p></main>`;

  const t = travel && travel.t ? travel.t : fold.t;
  const past = !!travel;
  // The message "fork from here" in time travel forks from: the latest one at that sequence.
  const forkPoint = past && !travel.loading && t.messages.length ? t.messages[t.messages.length - 1] : null;
  const canForkPast = forkPoint && allowed("fork", snapshot, runStatus).ok;
  const gate = (type) => (past ? { ok: false, why: "viewing the past: go back to live" } : allowed(type, snapshot, runStatus));
  const stop = gate("stop"), steer = gate("steer"), resume = gate("resume"), retry = gate("retry"), approve = gate("approval"), retrySummary = gate("retry-summary");

  const doRetry = () => {
    const src = findEvent(recent, (e) => e.runId === run.runId && ((e.eventType === "error" && e.payload.retryable) || (e.eventType === "status" && e.payload.status === "failed")));
    if (!src) { setNotice({ kind: "error", text: `retry: no retryable error or failed status of run ${run.runId} among the last ${RECENT} events` }); return; }
    send("retry", "retry", { runId: run.runId, expectedSequence: lastSeq, payload: { sourceEventId: src.eventId } });
  };
  const doRetrySummary = (s) => {
    const src = findEvent(recent, (e) => e.eventType === "summary" && e.payload.summaryId === s.summaryId && e.payload.status === "failed");
    if (!src) { setNotice({ kind: "error", text: `retry summary: its failed event is not among the last ${RECENT} events` }); return; }
    send("retry summary", "retry-summary", { runId: s.runId, expectedSequence: lastSeq, payload: { sourceEventId: src.eventId, sourceRunId: s.runId } });
  };

  const msgs = t.messages;
  const from = Math.max(0, msgs.length - shown);
  const pending = t.approvals.filter((a) => a.status === "requested");
  const resolved = t.approvals.filter((a) => a.status !== "requested");
  const rec = res.record;

  return html`<main class="page session" data-last-sequence=${lastSeq} data-run-status=${runStatus}>
  <nav class="crumbs"><a href="#/">← sessions</a></nav>
  <header class="session-head">
    <h1><code>${id}</code></h1>
    <${R.Conn} state=${conn} what="live stream" />
    <div class="meta">record <${R.Badge} s=${rec.status} /> · run ${run ? html`<code>${run.runId}</code> ` : null}<span class="run-status"><${R.Badge} s=${runStatus} /></span>
      · agent ${rec.agent_id || "—"} · role ${rec.role || "—"}${rec.project ? " · project " + rec.project : ""} · model ${snapshot ? snapshot.modelId : "—"} · sequence ${lastSeq}</div>
  </header>
  ${streamNote ? html`<p class="note" role="status">${streamNote}</p>` : null}

  <section class="controls" aria-label="Controls">
    ${stop.ok || runStatus === "stopping" ? html`<button type="button" class="danger" disabled=${!stop.ok || !!busy || runStatus === "stopping"}
        onClick=${() => send("stop", "stop", { runId: run.runId, expectedSequence: lastSeq, payload: { reason: "stopped from the web UI" } })}>${runStatus === "stopping" ? "stopping…" : "Stop"}</button>` : null}
    ${resume.ok && run ? html`<button type="button" disabled=${!!busy} onClick=${() => send("resume", "resume", { runId: run.runId, expectedSequence: lastSeq, payload: {} })}>Resume</button>` : null}
    ${retry.ok && run ? html`<button type="button" disabled=${!!busy} onClick=${doRetry}>Retry</button>` : null}
    ${steer.ok && run ? html`<form class="steer" onSubmit=${(e) => { e.preventDefault(); if (!steerText.trim()) return; send("steer", "steer", { runId: run.runId, expectedSequence: lastSeq, payload: { targetRunId: run.runId, text: steerText } }).then((r) => r && setSteerText("")); }}>
        <label for="steer-text">Steer the run</label>
        <input id="steer-text" value=${steerText} onInput=${(e) => setSteerText(e.currentTarget.value)} placeholder="guidance for the running agent" />
        <button type="submit" disabled=${!!busy || !steerText.trim()}>Send</button></form>` : null}
    ${busy ? html`<span class="muted">${busy}…</span>` : null}
    ${notice ? html`<p class=${"notice " + notice.kind} role=${notice.kind === "error" ? "alert" : "status"}>${notice.text}</p>` : null}
  </section>

  <section class="travel" aria-label="Time travel">
    <label for="travel">Sequence</label>
    <input id="travel" type="range" min="0" max=${Math.max(0, lastSeq)} value=${travel ? travel.seq : lastSeq} disabled=${lastSeq < 1} onInput=${onSlide} />
    <input type="number" aria-label="sequence number" min="0" max=${lastSeq} value=${travel ? travel.seq : lastSeq} onChange=${(e) => travelTo(Number(e.currentTarget.value))} />
    ${past ? html`<span class="past" role="status">viewing sequence ${travel.seq} of ${lastSeq}${travel.loading ? " (loading…)" : ""}</span> <button type="button" onClick=${() => setTravel(null)}>Back to live</button>${canForkPast ? html` <button type="button" class="fork-here" disabled=${!!busy} onClick=${() => fork(forkPoint)} title=${"a new session with the log through message " + forkPoint.messageId + ", with its lineage"}>Fork from here</button>` : null}` : html`<span class="muted">live</span>`}
  </section>

  <div class="cols">
    <div class="main-col">
      <section aria-label="Conversation" class="conversation">
        <h2>Conversation</h2>
        ${from > 0 ? html`<button type="button" onClick=${() => setShown(shown + PAGE)}>show ${Math.min(PAGE, from)} earlier messages (${from} hidden)</button>` : null}
        ${msgs.length === 0 ? html`<p class="muted">No messages yet.</p>` : null}
        ${msgs.slice(from).map((m) => html`<${R.Message} key=${m.messageId} m=${m} actions=${past ? pastActions : messageActions} />`)}
      </section>
      ${t.reasoning.length ? html`<section aria-label="Reasoning"><h2>Reasoning</h2>${t.reasoning.slice(-PAGE).map((r) => html`<${R.Reasoning} key=${r.reasoningId} r=${r} />`)}</section>` : null}
      ${t.tools.length ? html`<section aria-label="Tool calls"><h2>Tool calls</h2>${t.tools.slice(-PAGE).map((x) => html`<${R.Tool} key=${x.toolCallId} t=${x} />`)}</section>` : null}
      ${t.diffs.length ? html`<section aria-label="Diffs"><h2>Diffs</h2>${t.diffs.map((d) => html`<${R.Diff} key=${d.path} d=${d} />`)}</section>` : null}
      ${t.terminals.length ? html`<section aria-label="Terminals"><h2>Terminals</h2>${t.terminals.length > PAGE ? html`<p class="muted">the last ${PAGE} of ${t.terminals.length}</p>` : null}${t.terminals.slice(-PAGE).map((x, i, all) => html`<${R.Terminal} key=${x.terminalId} term=${x} open=${i === all.length - 1} />`)}</section>` : null}
      ${t.testResults.length ? html`<section aria-label="Test results"><h2>Tests</h2>${t.testResults.length > PAGE * 2 ? html`<p class="muted">the last ${PAGE * 2} of ${t.testResults.length}</p>` : null}<${R.TestTable} tests=${t.testResults.slice(-PAGE * 2)} /></section>` : null}
    </div>
    <aside class="side-col">
      ${pending.length || resolved.length ? html`<section aria-label="Approvals" class="card"><h3>Approvals</h3>
        ${pending.map((a) => html`<div class="approval" key=${a.approvalId} data-approval=${a.approvalId}>
          <p><strong>${a.title}</strong></p>${a.description ? html`<p>${a.description}</p>` : null}
          ${a.requestedAction !== undefined ? html`<pre>${JSON.stringify(a.requestedAction, null, 2)}</pre>` : null}
          ${approve.ok && run ? html`<button type="button" disabled=${!!busy} onClick=${() => send("approve", "approval", { runId: run.runId, expectedSequence: lastSeq, payload: { approvalId: a.approvalId, decision: "approved" } })}>Approve</button>
          <button type="button" class="danger" disabled=${!!busy} onClick=${() => send("reject", "approval", { runId: run.runId, expectedSequence: lastSeq, payload: { approvalId: a.approvalId, decision: "rejected" } })}>Reject</button>`
            : html`<p class="muted">${approve.why}</p>`}</div>`)}
        <ul>${resolved.map((a) => html`<li key=${a.approvalId}><${R.Badge} s=${a.status} /> ${a.title}</li>`)}</ul></section>` : null}
      <${R.Plan} plan=${t.plan} />
      ${t.tasks.length ? html`<section aria-label="Tasks" class="card"><h3>Tasks</h3><ul>${t.tasks.map((x) => html`<${R.Task} key=${x.taskId} t=${x} />`)}</ul></section>` : null}
      <section aria-label="Usage" class="card"><h3>Usage (tokens)</h3><${R.Usage} usage=${t.usage} /></section>
      ${t.errors.length ? html`<section aria-label="Errors" class="card"><h3>Errors</h3><ul>${t.errors.slice(-PAGE).map((e, i) => html`<${R.ErrorItem} key=${i} e=${e} />`)}</ul></section>` : null}
      ${t.workspaceFiles.length ? html`<section aria-label="Workspace files" class="card"><h3>Workspace files</h3><ul>${t.workspaceFiles.map((f) => html`<${R.WorkspaceFile} key=${f.path} f=${f} />`)}</ul></section>` : null}
      ${t.artifacts.length ? html`<section aria-label="Artifacts" class="card"><h3>Artifacts</h3><ul>${t.artifacts.map((a) => html`<${R.Artifact} key=${a.artifactId} a=${a} />`)}</ul></section>` : null}
      ${t.summaries.map((s) => html`<${R.Summary} key=${s.summaryId} s=${s} action=${s.status === "failed" && retrySummary.ok ? html`<button type="button" class="small" disabled=${!!busy} onClick=${() => doRetrySummary(s)}>retry summary</button>` : null} />`)}
      ${t.steers.length ? html`<section aria-label="Steers" class="card"><h3>Steers</h3><ul>${t.steers.map((s) => html`<${R.Steer} key=${s.commandId} s=${s} />`)}</ul></section>` : null}
      <p class="muted">${t.resumable ? "The runtime says the session can be resumed." : ""}</p>
      <${LineagePanel} id=${id} />
      <${LifecyclePanel} id=${id} res=${res} onChange=${live.setRes} />
    </aside>
  </div>

  <details class="eventlog" open=${false}>
    <summary>Event log (the last ${recent.length} events)</summary>
    <ol class="events">${recent.map((e) => html`<li key=${e.sequence} data-seq=${e.sequence}><span class="seq">${e.sequence}</span> <span class="muted">${e.occurredAt}</span> <code>${e.eventType}</code> ${eventLine(e)}</li>`)}</ol>
  </details>
</main>`;
}
