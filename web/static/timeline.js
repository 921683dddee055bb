// The session's story: one chronological transcript, grouped by run. Each item (a message,
// a tool call, an approval, a terminal...) stands where its first event stands in the log
// and shows its folded state (the fold of fold.js); the events about no item (status, plan,
// usage, error, resume) stand one per event. The page holds a window of the log (the last
// events; "load earlier" reads the ones before), never the whole of a long log.
import { memo } from "./memo.js";
import { LIST_OF, KEYED } from "./fold.js";
import * as R from "./render.js";

const html = R.html;

// Timeline holds the entries of a window of the log, in log order, and what its status
// events say of each run.
export class Timeline {
  constructor() {
    this.entries = []; // {key, type, id, seq, runId, payload}
    this.byKey = new Map();
    this.first = Infinity; // the first sequence of the window
    this.runs = new Map(); // runId → {runId, status, sourceMessageId, startedAt, endedAt, durationMs}
    this.bySource = new Map(); // message id → the run it started
    this.lastRun = null; // the run of the latest status event noted
    this.version = 0;
  }

  // noteRun records what a status event says of its run (runs, from the runs resource, too).
  noteRun(r, newer = true) {
    if (!r.runId) return;
    const old = this.runs.get(r.runId) || {};
    this.runs.set(r.runId, newer ? { ...old, ...r } : { ...r, ...old });
    if (r.sourceMessageId) this.bySource.set(r.sourceMessageId, r.runId);
    if (newer) this.lastRun = r.runId;
  }

  // runOfStatus is what a status event says of its run.
  static runOfStatus(ev) {
    const p = ev.payload, r = { runId: ev.runId, status: p.status, sourceMessageId: ev.sourceMessageId };
    if (p.startedAt) r.startedAt = p.startedAt;
    if (p.durationMs !== undefined) r.durationMs = p.durationMs;
    return r;
  }

  // entryOf is the entry of an event: its item's (key "type id"), or its own (key "#seq").
  static entryOf(ev) {
    const list = LIST_OF[ev.eventType];
    if (list) {
      const id = ev.payload[KEYED[list]];
      return { key: ev.eventType + " " + id, type: ev.eventType, list, id, seq: ev.sequence, runId: ev.runId };
    }
    return {
      key: "#" + ev.sequence, type: ev.eventType, seq: ev.sequence, runId: ev.runId, payload: ev.payload, at: ev.occurredAt,
    };
  }

  // add appends an event later than those held (a live event, or the window's in order).
  add(ev) {
    if (ev.eventType === "status" && ev.runId) this.noteRun(Timeline.runOfStatus(ev));
    if (ev.sequence < this.first) this.first = ev.sequence;
    const e = Timeline.entryOf(ev);
    const old = this.byKey.get(e.key);
    if (old) {
      if (!old.runId && e.runId) old.runId = e.runId;
      return;
    }
    this.byKey.set(e.key, e);
    this.entries.push(e);
    this.version++;
  }

  // prepend adds the events just before the window (in log order): items already held move
  // up to their earlier first event.
  prepend(evs) {
    if (!evs.length) return;
    for (const ev of evs) {
      if (ev.eventType === "status" && ev.runId) this.noteRun(Timeline.runOfStatus(ev), false);
      const e = Timeline.entryOf(ev);
      const old = this.byKey.get(e.key);
      if (old) {
        if (ev.sequence < old.seq) old.seq = ev.sequence;
        continue;
      }
      this.byKey.set(e.key, e);
      this.entries.push(e);
    }
    this.first = Math.min(this.first, evs[0].sequence);
    this.entries.sort((a, b) => a.seq - b.seq);
    this.version++;
  }

  // runOf is the run an entry belongs to: its event's, or for a message the run it started.
  runOf(e) {
    if (e.runId) return e.runId;
    if (e.type === "message") return this.bySource.get(e.id) || "";
    return "";
  }
}

// itemOf answers the folded item of an entry (null for the per-event kinds).
export function itemOf(fold, e) {
  if (!e.list) return null;
  const i = fold.index[e.list].get(e.id);
  return i === undefined ? null : fold.t[e.list][i];
}

// runSections groups the entries by run: consecutive entries of one run form one section.
export function runSections(tl) {
  const out = [];
  let cur = null;
  for (const e of tl.entries) {
    const run = tl.runOf(e);
    if (!cur || cur.run !== run) {
      cur = { run, entries: [] };
      out.push(cur);
    }
    cur.entries.push(e);
  }
  return out;
}

const num = (n) => (n || 0).toLocaleString("en");

function seconds(ms) {
  if (ms < 1000) return `${ms} ms`;
  return ms < 120e3 ? `${(ms / 1000).toFixed(ms < 10e3 ? 1 : 0)} s` : `${Math.round(ms / 60e3)} min`;
}

const tokens = (u) => `${num(u.totalTokens)} tokens (${num(u.inputTokens)} in, ${num(u.outputTokens)} out)`;

// RunHead is a run's heading: its status, start, duration and tokens.
const RunHead = ({ run, info, usage }) => {
  if (!run) return html`<h3 class="run-head">Outside any run</h3>`;
  const i = info || {};
  const started = i.startedAt ? html` · started <${R.Time} iso=${i.startedAt} />` : null;
  const rest = (i.durationMs !== undefined ? " · " + seconds(i.durationMs) : "") + (usage ? " · " + tokens(usage) : "");
  const badge = i.status ? html`<${R.Badge} s=${i.status} />` : null;
  return html`<h3 class="run-head" data-run=${run}>Run <code>${run}</code> ${badge}
    <span class="muted">${started}${rest}</span></h3>`;
};

const PLAN_MARK = { completed: "☑", failed: "☒", skipped: "⊘", running: "◐", pending: "☐" };

// Line is an entry of a per-event kind, or of a small item.
function line(e, item, x, open) {
  const p = e.payload;
  switch (e.type) {
    case "status": return html`<p class="ev-line">run <code>${e.runId || "?"}</code> <${R.Badge} s=${p.status} />
      ${p.detail ? " " + p.detail : ""} <span class="muted"><${R.Time} iso=${e.at} /></span></p>`;
    case "usage": {
      const ctx = p.contextTokens !== undefined
        ? ` · context ${num(p.contextTokens)}${p.contextWindow ? " of " + num(p.contextWindow) : ""}` : "";
      return html`<p class="ev-line muted">usage: ${tokens(p)}${ctx}</p>`;
    }
    case "resume": return html`<p class="ev-line muted">${p.resumable ? "the runtime can resume the session"
      : "the session cannot be resumed"}${p.reason ? ": " + p.reason : ""}</p>`;
    case "error": return html`<div class="ev-line error-item" data-error><span class="err">error</span>
      ${" "}<code class="code">${p.code}</code> ${p.message}
      ${p.retryable ? html` <span class="badge">retryable</span>` : null}</div>`;
    case "plan": return html`<${PlanUpdate} p=${p} />`;
    default: break;
  }
  if (!item) return null;
  switch (e.type) {
    case "message": return html`<${R.Message} m=${item} actions=${x.messageActions} />`;
    case "reasoning": return html`<${R.Reasoning} r=${item} />`;
    case "tool": return html`<${R.Tool} t=${item} />`;
    case "approval": return html`<${Approval} a=${item} control=${x.approvalControl} />`;
    case "diff": return html`<${R.Diff} d=${item} />`;
    case "terminal": return html`<${R.Terminal} term=${item} open=${open} />`;
    case "test-result": return html`<${TestLine} t=${item} />`;
    case "task": return html`<p class="ev-line">task <${R.Badge} s=${item.status} /> ${item.title}
      ${item.detail ? html` <span class="muted">${item.detail}</span>` : null}</p>`;
    case "artifact": return html`<ul class="ev-line bare"><${R.Artifact} a=${item} /></ul>`;
    case "workspace-file": return html`<ul class="ev-line bare"><${R.WorkspaceFile} f=${item} /></ul>`;
    case "steer": return html`<ul class="ev-line bare steer-line">steer: <${R.Steer} s=${item} /></ul>`;
    case "summary": return html`<${R.Summary} s=${item} action=${x.summaryAction ? x.summaryAction(item) : null} />`;
    default: return null;
  }
}

// PlanUpdate is a plan as one plan event set it: a line, its checklist on opening.
const PlanUpdate = ({ p }) => {
  const steps = p.steps || [];
  const done = steps.filter((s) => s.status === "completed").length;
  return html`<details class="plan-update">
    <summary>Plan${p.title ? ": " + p.title : ""} <${R.Badge} s=${p.status} />
      ${" "}<span class="muted">${done} of ${steps.length} steps done</span></summary>
    <ul class="checklist">${steps.map((s) => html`<li key=${s.id} class="st-${s.status}">
      <span aria-hidden="true">${PLAN_MARK[s.status] || "☐"}</span> ${s.title}
      ${" "}<span class="sr">(${s.status})</span></li>`)}</ul></details>`;
};

// TestLine is one test result.
const TestLine = memo(({ t }) => html`<div class="ev-line test-line" data-test-status=${t.status}>
  test <${R.Badge} s=${t.status} /> <code>${t.name}</code>
  ${t.durationMs !== undefined ? html` <span class="muted">${t.durationMs} ms</span>` : null}
  ${t.output ? html`<pre>${t.output}</pre>` : null}</div>`);

// Approval is an approval where it was asked: its request, and its controls while pending or
// its decision.
const Approval = memo(({ a, control }) => html`<div class="approval" data-approval=${a.approvalId}>
  <p><span class="muted">approval</span> <${R.Badge} s=${a.status} /> <strong>${a.title}</strong></p>
  ${a.description ? html`<p>${a.description}</p>` : null}
  ${a.requestedAction !== undefined ? html`<pre>${JSON.stringify(a.requestedAction, null, 2)}</pre>` : null}
  ${a.status === "requested" && control ? control(a) : null}</div>`);

// Entry is one entry of the transcript; it re-renders when its item changes.
// (seq: an entry moves up when an earlier window shows its first event).
const Entry = memo(({ e, seq, item, x, open }) => html`<div class=${"entry k-" + e.type} data-seq=${seq}
  data-kind=${e.type} data-key=${e.key}>${line(e, item, x, open)}</div>`);

// Transcript draws the window's entries by run. x (the same object while the controls do not
// change) holds them: messageActions, approvalControl(a), summaryAction(s); usage is the
// fold's usage.byRun. The latest terminal is open, the others open on request.
export function Transcript({ tl, fold, x, usage }) {
  let lastTerminal = null;
  for (const e of tl.entries) if (e.type === "terminal") lastTerminal = e.key;
  return runSections(tl).map((s) => html`<section class="run" key=${s.run + ":" + s.entries[0].key}
    aria-label=${s.run ? "run " + s.run : "outside any run"}>
    <${RunHead} run=${s.run} info=${tl.runs.get(s.run)} usage=${s.run && usage ? usage[s.run] : null} />
    ${s.entries.map((e) => html`<${Entry} key=${e.key} e=${e} seq=${e.seq} item=${itemOf(fold, e)} x=${x}
      open=${e.key === lastTerminal} />`)}</section>`);
}
