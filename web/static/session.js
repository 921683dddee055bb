// The session page: the session's story as one chronological transcript by run, live over
// SSE, with the controls the policy table allows, time travel, lineage and the lifecycle
// panel; the side column sums it up (plan, tasks, usage, pending approvals, files).
import { useState, useEffect, useRef, useMemo, useCallback, useLayoutEffect } from "preact/hooks";
import { getJSON, sendCommand, readPrefix, enc } from "./api.js";
import { Fold, emptyTranscript, KINDS, eventLine } from "./fold.js";
import { allowed, isTerminal } from "./policy.js";
import * as R from "./render.js";
import { LineagePanel, LifecyclePanel } from "./panels.js";
import { Timeline, Transcript } from "./timeline.js";
import { follow } from "./live.js";
import { SessionCharts } from "./charts.js";

const html = R.html;
const RECENT = 500; // events kept for the event log and for finding event ids (retry)
// WINDOW is how many events of the log the transcript reads at a time: the latest on
// opening, the ones before on "load earlier" (the read endpoint's pages are up to 10,000).
const WINDOW = 1000;
const PAST = { ok: false, why: "viewing the past: go back to live" }; // no control acts on the past

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
  const tl = useRef(null);
  const recent = useRef([]);

  useEffect(() => {
    let closed = false, unfollow = null, chain = Promise.resolve(), refreshTimer = null;
    fold.current = null;
    tl.current = null;
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
      tl.current.add(ev);
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
        const base = `/v1/sessions/${enc(id)}`;
        const [r, t, runs] = await Promise.all([getJSON(base), getJSON(base + "/transcript"), getJSON(base + "/runs")]);
        if (closed) return;
        performance.mark("sessiond:transcript-loaded");
        fold.current = new Fold(t);
        const timeline = new Timeline();
        for (const run of runs.runs || []) timeline.noteRun(run, false);
        const last = t.lastSequence;
        if (last >= 0) {
          const from = Math.max(-1, last - WINDOW);
          const page = await getJSON(`${base}/events?after=${from}&limit=${last - from}`);
          const evs = page.events.filter((e) => e.sequence <= last);
          evs.forEach((e) => timeline.add(e));
          recent.current = evs.slice(-RECENT);
        }
        tl.current = timeline;
        if (closed) return;
        setRes(r);
        // One connection per stream for all the tabs (live.js): a tab that joins a stream
        // already open may see events it has (ignored) or miss some (filled by receive).
        unfollow = follow(`${base}/events/stream`, {
          after: last, poll: `${base}/events`, names: [...KINDS.map((k) => "ev." + k), "stream.error"],
          onOpen: (mode) => { setConn(mode === "polled" ? "polled" : "live"); setStreamNote(""); },
          onError: (state) => setConn(state),
          onEvent: (name, data) => {
            if (name !== "stream.error") return receive(JSON.parse(data));
            const { code, message } = JSON.parse(data);
            setStreamNote(`the server ended the stream (${code}): ${message}`);
          },
        });
      } catch (e) {
        if (!closed) setErr(e);
      }
    })();
    const poll = setInterval(() => !document.hidden && refresh(), 5000);
    return () => { closed = true; clearInterval(poll); clearTimeout(refreshTimer); if (unfollow) unfollow(); };
  }, [id]);
  const bump = () => setVersion((v) => v + 1);
  return { res, setRes, err, conn, streamNote, fold: fold.current, tl: tl.current, recent: recent.current, bump };
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

export function SessionPage({ id, seq: focusSeq }) {
  const live = useLiveSession(id);
  const { res, err, conn, streamNote, fold, recent } = live;
  const [notice, setNotice] = useState(null);
  const [busy, setBusy] = useState("");
  const [steerText, setSteerText] = useState("");
  const [travel, setTravel] = useState(null); // {seq, fold, tl, loading}
  const [loadingEarlier, setLoadingEarlier] = useState(false);
  const travelReq = useRef(0);

  useEffect(() => { setTravel(null); setNotice(null); }, [id]);
  // A performance mark when the transcript is first on screen (the large-session benchmark
  // reads it; developer tools show it); the page then shows the newest entries.
  const drawn = !!(live.res && live.fold && live.tl);
  useLayoutEffect(() => {
    if (!drawn) return;
    performance.mark("sessiond:session-drawn");
    jumpToNewest();
  }, [drawn]);

  // A search result's link (#/s/ID?seq=N): the entry of event N is loaded (reading the log back
  // to it when it is before the window), scrolled to and marked; a compacted or missing event
  // is said so.
  const [found, setFound] = useState(null); // {seq, key} or {seq, missing: true}
  useEffect(() => {
    if (!drawn || focusSeq === null || focusSeq === undefined) return;
    let stop = false;
    (async () => {
      try {
        const page = await getJSON(`/v1/sessions/${enc(id)}/events?after=${focusSeq - 1}&limit=1`);
        const ev = page.events[0];
        if (stop) return;
        if (!ev || ev.sequence !== focusSeq) { setFound({ seq: focusSeq, missing: true }); return; }
        const t = live.tl;
        if (t.first > focusSeq) {
          const evs = [];
          await readPrefix(id, t.first - 1, (page) => page.forEach((e) => e.sequence >= focusSeq && e.sequence < t.first && evs.push(e)), focusSeq - 1);
          if (stop) return;
          if (evs.length) t.prepend(evs);
          live.bump();
        }
        setFound({ seq: focusSeq, key: Timeline.entryOf(ev).key });
      } catch (e) {
        if (!stop) setNotice({ kind: "error", text: `show sequence ${focusSeq}: ${e.message}` });
      }
    })();
    return () => { stop = true; };
  }, [drawn, id, focusSeq]);
  useLayoutEffect(() => {
    if (!found || found.missing) return;
    const el = document.querySelector(`.transcript .entry[data-key="${CSS.escape(found.key)}"]`);
    if (!el) return;
    document.querySelectorAll(".entry.found").forEach((x) => { if (x !== el) { x.classList.remove("found"); delete x.dataset.foundSeq; } });
    el.classList.add("found");
    el.dataset.foundSeq = String(found.seq);
    const d = el.querySelector("details");
    if (d) d.open = true;
    el.scrollIntoView({ block: "center" });
  }, [found, live.tl && live.tl.version]);

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
  // The timeline drawn: the past's in time travel, else the live one.
  const shownTl = travel && travel.tl ? travel.tl : live.tl;
  ctx.current = { run, runStatus, snapshot, lastSeq, recent, send, travel, tl: shownTl };

  // runOfMessage is the run a message started or belongs to (the runs the page knows of).
  const runOfMessage = (m) => m.runId || (ctx.current.tl && ctx.current.tl.bySource.get(m.messageId)) || "";

  // Fork from a message: the run it started or belongs to is the source run.
  const fork = useCallback(async (m) => {
    const c = ctx.current;
    const runId = runOfMessage(m);
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
    const runId = runOfMessage(m);
    if (!runId) {
      setNotice({ kind: "error", text: `edit and rerun: message ${m.messageId} started no run, so there is nothing to rerun` });
      return;
    }
    const r = await c.send("edit and rerun", "edit-and-rerun", { expectedSequence: c.lastSeq, payload: { sourceThreadId: id, sourceMessageId: m.messageId, sourceRunId: runId, replacementParts: [{ type: "text", text }], inheritance: INHERIT } });
    if (r && r.operation) location.hash = "#/s/" + encodeURIComponent(r.operation.activeBranch.threadId);
  }, [id]);
  // A message offers "fork from here" and "edit and rerun" only when it started a run or
  // belongs to one (there is nothing to fork or rerun otherwise); in the past, only forks.
  const past = !!travel;
  const knownRuns = shownTl ? shownTl.runs.size : 0;
  const forkButton = (m) => html` <button type="button" class="small" onClick=${() => fork(m)}
    title="a new session from this message, with its lineage">fork from here</button>`;
  const messageActions = useMemo(() => (m) => {
    const c = ctx.current;
    if (!runOfMessage(m)) return null;
    const canFork = allowed("fork", c.snapshot, c.runStatus).ok;
    const canEdit = !c.travel && m.role === "user" && allowed("edit-and-rerun", c.snapshot, c.runStatus).ok;
    const edit = canEdit ? html` <${EditRerun} m=${m} onSend=${editRerun} />` : null;
    return html`${canFork ? forkButton(m) : null}${edit}`;
  }, [fork, editRerun, snapshot, runStatus, knownRuns, past]);

  // Time travel: the transcript as it stood at sequence N, folded from the log's prefix; its
  // timeline holds the prefix's last WINDOW events, and every run's status as of N.
  const travelTo = useCallback((n) => {
    const c = ctx.current;
    if (n >= c.lastSeq) { setTravel(null); return; }
    const req = ++travelReq.current;
    setTravel((tr) => ({ ...(tr || {}), seq: n, loading: true }));
    const f = new Fold(emptyTranscript(id));
    const t = new Timeline();
    let tail = [];
    readPrefix(id, n, (evs) => {
      for (const e of evs) {
        f.apply(e);
        if (e.eventType === "status" && e.runId) t.noteRun(Timeline.runOfStatus(e));
      }
      tail = tail.concat(evs).slice(-WINDOW);
    })
      .then(() => {
        if (req !== travelReq.current) return;
        tail.forEach((e) => t.add(e));
        setTravel({ seq: n, fold: f, tl: t, loading: false });
      })
      .catch((e) => setNotice({ kind: "error", text: `time travel: ${e.message}` }));
  }, [id]);
  const travelTimer = useRef(null);
  const onSlide = (e) => {
    const n = Number(e.currentTarget.value);
    clearTimeout(travelTimer.current);
    travelTimer.current = setTimeout(() => travelTo(n), 150);
    setTravel((tr) => (n >= lastSeq ? null : { ...(tr || {}), seq: n, loading: true }));
  };

  // loadEarlier reads the WINDOW events before the shown timeline's window.
  const loadEarlier = async () => {
    const t = ctx.current.tl;
    if (!t || t.first <= 0 || loadingEarlier) return;
    setLoadingEarlier(true);
    const from = Math.max(-1, t.first - 1 - WINDOW);
    try {
      const page = await getJSON(`/v1/sessions/${enc(id)}/events?after=${from}&limit=${t.first - 1 - from}`);
      const evs = page.events.filter((e) => e.sequence < t.first);
      if (evs.length) t.prepend(evs);
      else t.first = 0; // nothing earlier is stored (a compacted log)
      live.bump();
    } catch (e) {
      setNotice({ kind: "error", text: `load earlier events: ${e.message}` });
    } finally {
      setLoadingEarlier(false);
    }
  };

  // approvalControl is a pending approval's Approve and Reject, where the approval was asked.
  const approvalControl = useMemo(() => (a) => {
    const c = ctx.current;
    const g = c.travel ? PAST : allowed("approval", c.snapshot, c.runStatus);
    if (!g.ok || !c.run) return html`<p class="muted">${g.ok ? "no run to answer for" : g.why}</p>`;
    const decide = (label, decision) => () => c.send(label, "approval", {
      runId: c.run.runId, expectedSequence: c.lastSeq, payload: { approvalId: a.approvalId, decision },
    });
    return html`<button type="button" disabled=${!!busy} onClick=${decide("approve", "approved")}>Approve</button>
      <button type="button" class="danger" disabled=${!!busy} onClick=${decide("reject", "rejected")}>Reject</button>`;
  }, [snapshot, runStatus, run && run.runId, past, lastSeq, busy]);
  const retrySummary = past ? { ok: false } : allowed("retry-summary", snapshot, runStatus);
  const summaryAction = useMemo(() => (s) => (s.status === "failed" && retrySummary.ok
    ? html`<button type="button" class="small" onClick=${() => doRetrySummary(s)}>retry summary</button>` : null),
  [retrySummary.ok, lastSeq]);
  const controls = useMemo(() => ({ messageActions, approvalControl, summaryAction }),
    [messageActions, approvalControl, summaryAction]);

  if (err) return html`<main class="page"><p><a href="#/">← sessions</a></p><p class="err" role="alert">${err.code || "error"}: ${err.message}</p></main>`;
  if (!res || !fold || !live.tl) {
    return html`<main class="page"><p><a href="#/">← sessions</a></p><p>Loading ${id}…</p></main>`;
  }

  const f = travel && travel.fold ? travel.fold : fold;
  const t = f.t;
  const tl = shownTl;
  // The message "fork from here" in time travel forks from: the latest one at that sequence
  // that started a run or belongs to one.
  let forkPoint = null;
  for (let i = t.messages.length - 1; past && !travel.loading && i >= 0 && !forkPoint; i--) {
    if (runOfMessage(t.messages[i])) forkPoint = t.messages[i];
  }
  const canForkPast = forkPoint && allowed("fork", snapshot, runStatus).ok;
  const gate = (type) => (past ? PAST : allowed(type, snapshot, runStatus));
  const stop = gate("stop"), steer = gate("steer"), resume = gate("resume"), retry = gate("retry");

  const doRetry = () => {
    const src = findEvent(recent, (e) => e.runId === run.runId && ((e.eventType === "error" && e.payload.retryable) || (e.eventType === "status" && e.payload.status === "failed")));
    if (!src) { setNotice({ kind: "error", text: `retry: no retryable error or failed status of run ${run.runId} among the last ${RECENT} events` }); return; }
    send("retry", "retry", { runId: run.runId, expectedSequence: lastSeq, payload: { sourceEventId: src.eventId } });
  };
  function doRetrySummary(s) {
    const src = findEvent(recent, (e) => e.eventType === "summary" && e.payload.summaryId === s.summaryId && e.payload.status === "failed");
    if (!src) { setNotice({ kind: "error", text: `retry summary: its failed event is not among the last ${RECENT} events` }); return; }
    send("retry summary", "retry-summary", { runId: s.runId, expectedSequence: lastSeq, payload: { sourceEventId: src.eventId, sourceRunId: s.runId } });
  }

  const pending = t.approvals.filter((a) => a.status === "requested");
  const rec = res.record;
  // The header tells the moment shown: live, or the sequence of the past and its run's status.
  const shownSeq = past ? travel.seq : lastSeq;
  const pastRun = past && tl.lastRun ? tl.runs.get(tl.lastRun) : null;
  const headRun = past ? (pastRun ? { runId: pastRun.runId, status: pastRun.status } : null) : run;
  const headStatus = headRun ? headRun.status : "idle";
  const total = lastSeq + 1, held = tl.first === Infinity ? 0 : Math.max(0, shownSeq - tl.first + 1);
  const failing = t.testResults.filter((x) => x.status === "failed").length;

  const pastNote = past ? html`<span class="conn conn-past" role="status"><span aria-hidden="true">◷</span>
    ${" "}the past: sequence ${travel.seq}</span>` : null;
  const jumpRun = (e) => jumpTo(`.run-head[data-run="${CSS.escape(e.currentTarget.value)}"]`, false);
  const fmt = (n) => n.toLocaleString("en");
  return html`<main class="page session" data-last-sequence=${lastSeq} data-run-status=${runStatus}
    data-shown-sequence=${shownSeq}>
  <nav class="crumbs"><a href="#/">← sessions</a></nav>
  <header class="session-head">
    <h1><code>${id}</code></h1>
    ${pastNote || html`<${R.Conn} state=${conn} what="live stream" />`}
    <div class="meta">record <${R.Badge} s=${rec.status} /> · run ${headRun ? html`<code>${headRun.runId}</code> ` : null}
      <span class="run-status"><${R.Badge} s=${headStatus} /></span>${past ? " (then)" : ""}
      ${" "}· agent ${rec.agent_id || "—"} · role ${rec.role || "—"}${rec.project ? " · project " + rec.project : ""}
      ${" "}· model ${snapshot ? snapshot.modelId : "—"} · sequence <span class="shown-seq">${shownSeq}</span>${past ? ` of ${lastSeq}` : ""}</div>
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
      <section aria-label="Transcript" class="transcript">
        <h2>Transcript</h2>
        <nav class="jump" aria-label="Jump in the transcript">
          <button type="button" class="small" onClick=${jumpToNewest}>newest</button>
          ${tl.runs.size > 1 ? html`<select aria-label="jump to a run" onChange=${jumpRun}><option value="">run…</option>
            ${[...tl.runs.keys()].map((r) => html`<option value=${r}>${r}</option>`)}</select>` : null}
          <button type="button" class="small" onClick=${() => jumpTo(".entry .approval", true)}>next approval</button>
          <button type="button" class="small" onClick=${() => jumpTo(".entry [data-error]", true)}>next error</button>
          <button type="button" class="small" onClick=${() => jumpTo(FAILED, true)}>next failing test</button>
        </nav>
        ${tl.first > 0 && tl.first !== Infinity ? html`<p class="window-note">
          <span class="muted">Showing the last ${fmt(held)} of ${fmt(shownSeq + 1)} events.</span>
          <button type="button" class="load-earlier" disabled=${loadingEarlier} onClick=${loadEarlier}>
            ${loadingEarlier ? "loading…" : `load ${fmt(Math.min(WINDOW, tl.first))} earlier events`}</button></p>` : null}
        ${tl.entries.length === 0 ? html`<p class="muted">Nothing yet.</p>` : null}
        <${Transcript} tl=${tl} fold=${f} x=${controls} usage=${t.usage.byRun} />
      </section>
    </div>
    <aside class="side-col">
      ${pending.length ? html`<section aria-label="Pending approvals" class="card"><h3>Pending approvals</h3><ul>
        ${pending.map((a) => html`<li key=${a.approvalId}><button type="button" class="link"
          onClick=${() => jumpTo(`.entry [data-approval="${CSS.escape(a.approvalId)}"]`, false)}>${a.title}</button></li>`)}
        </ul></section>` : null}
      <${R.Plan} plan=${t.plan} />
      ${t.tasks.length ? html`<section aria-label="Tasks" class="card"><h3>Tasks</h3><ul>${t.tasks.map((x) => html`<${R.Task} key=${x.taskId} t=${x} />`)}</ul></section>` : null}
      <section aria-label="Usage" class="card"><h3>Usage (tokens)</h3><${R.Usage} usage=${t.usage} /></section>
      <${SessionCharts} id=${id} lastSeq=${lastSeq} model=${snapshot ? snapshot.modelId : ""} />
      <section aria-label="At a glance" class="card"><h3>At a glance</h3><ul class="glance">
        <li>${fmt(t.messages.length)} messages · ${fmt(t.tools.length)} tool calls</li>
        <li>${fmt(t.testResults.length)} tests${failing ? html`, <button type="button" class="link err"
          onClick=${() => jumpTo(FAILED, false)}>${fmt(failing)} failing</button>` : ""}</li>
        <li>${t.errors.length ? html`<button type="button" class="link err" onClick=${() => jumpTo(".entry [data-error]", false)}>
          ${fmt(t.errors.length)} error${t.errors.length === 1 ? "" : "s"}</button>` : "no errors"}</li></ul>
        <p class="muted">${t.resumable ? "The runtime says the session can be resumed." : ""}</p></section>
      ${t.workspaceFiles.length ? html`<section aria-label="Workspace files" class="card"><h3>Workspace files</h3>
        <ul>${t.workspaceFiles.map((x) => html`<${R.WorkspaceFile} key=${x.path} f=${x} />`)}</ul></section>` : null}
      ${t.artifacts.length ? html`<section aria-label="Artifacts" class="card"><h3>Artifacts</h3><ul>${t.artifacts.map((a) => html`<${R.Artifact} key=${a.artifactId} a=${a} />`)}</ul></section>` : null}
      <${LineagePanel} id=${id} />
      <${LifecyclePanel} id=${id} res=${res} onChange=${live.setRes} />
    </aside>
  </div>

  <details class="eventlog" open=${false}>
    <summary>Event log (the last ${recent.length} events)</summary>
    <ol class="events">${recent.map((e) => html`<li key=${e.sequence} data-seq=${e.sequence}><span class="seq">${e.sequence}</span>
      ${" "}<span class="muted"><${R.Time} iso=${e.occurredAt} /></span> <code>${e.eventType}</code> ${eventLine(e)}</li>`)}</ol>
  </details>
</main>`;
}

const FAILED = '.entry [data-test-status="failed"]';

// jumpToNewest scrolls to the transcript's newest entry.
function jumpToNewest() {
  const all = document.querySelectorAll(".transcript .entry");
  if (all.length) all[all.length - 1].scrollIntoView({ block: "end" });
}

// jumpTo scrolls to the first element matching sel (next: the first below the top of the
// view, else the first) and opens the <details> around it.
function jumpTo(sel, next) {
  const all = [...document.querySelectorAll(sel)];
  if (!all.length) return;
  const el = (next && all.find((x) => x.getBoundingClientRect().top > 8)) || all[0];
  const d = el.closest("details");
  if (d) d.open = true;
  el.scrollIntoView({ block: "start" });
}
