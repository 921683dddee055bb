// The lineage tree and the lifecycle panel of the session page.
import { useState, useEffect } from "preact/hooks";
import { getJSON, postJSON, enc } from "./api.js";
import { html, Badge, Time } from "./render.js";

const link = (id, current) => id === current ? html`<strong><code>${id}</code></strong>` : html`<a href=${"#/s/" + encodeURIComponent(id)}><code>${id}</code></a>`;

function Tree({ nodes, current }) {
  if (!nodes || !nodes.length) return null;
  return html`<ul>${nodes.map((n) => html`<li key=${n.sessionId}>${link(n.sessionId, current)}<${Tree} nodes=${n.children} current=${current} /></li>`)}</ul>`;
}

// LineagePanel shows the forks and continuations around a session: its ancestors up to the
// root, and the tree of its descendants, each a link to its page.
export function LineagePanel({ id }) {
  const [lin, setLin] = useState(null);
  const [err, setErr] = useState(null);
  useEffect(() => { setLin(null); setErr(null); getJSON(`/v1/sessions/${enc(id)}/lineage`).then(setLin, setErr); }, [id]);
  if (err) return html`<section class="card" aria-label="Lineage"><h3>Lineage</h3><p class="err">${err.message}</p></section>`;
  if (!lin) return null;
  const anc = [...(lin.ancestors || [])].reverse();
  if (!anc.length && !(lin.descendants || []).length) return html`<section class="card" aria-label="Lineage"><h3>Lineage</h3><p class="muted">No forks or continuations.</p></section>`;
  return html`<section class="card lineage" aria-label="Lineage"><h3>Lineage</h3>
    ${lin.lineage ? html`<p class="muted">forked from message <code>${lin.lineage.forkedFromMessageId}</code> of run <code>${lin.lineage.sourceRunId}</code></p>` : null}
    <ul class="tree">${anc.length ? anc.map((a) => html`<li key=${a.sessionId}>${link(a.sessionId, id)}</li>`) : null}
      <li>${link(id, id)}<${Tree} nodes=${lin.descendants} current=${id} /></li></ul>
    ${lin.truncated ? html`<p class="muted">(truncated)</p>` : null}</section>`;
}

// windowText describes a work window: none started, open (with the time left) or closed.
export function windowText(w) {
  if (!w || !w.startedAt) return "none started (sessiond session warm starts one)";
  const left = typeof w.hoursLeft === "number" ? w.hoursLeft : null;
  const span = html`<${Time} iso=${w.startedAt} /> → <${Time} iso=${w.closesAt} />`;
  if (left === null) return span;
  return left > 0 ? html`${span} (${left.toFixed(left < 10 ? 1 : 0)} h left)` : html`${span} (closed)`;
}

// LifecyclePanel shows the record's lifecycle fields, heartbeat and recommendation, the work
// window, and archives: archive now (with a note), the archives list, restore.
export function LifecyclePanel({ id, res, onChange }) {
  const [open, setOpen] = useState(false);
  const [st, setSt] = useState(null);
  const [archives, setArchives] = useState(null);
  const [note, setNote] = useState({ done: "", inProgress: "", next: "" });
  const [msg, setMsg] = useState(null);
  const rec = res.record;
  const project = rec.project || "-";
  const load = () => {
    getJSON(`/v1/sessions/${enc(id)}/status`).then(setSt, (e) => setMsg({ kind: "error", text: e.message }));
    getJSON(`/v1/archives?project=${enc(project)}`).then((a) => setArchives(a.archives.filter((x) => x.sessionId === id)), (e) => setArchives({ error: `${e.code}: ${e.message}` }));
  };
  useEffect(() => { if (open) load(); }, [open, id, rec.status]);
  const act = async (label, path, body) => {
    setMsg(null);
    try {
      const r = await postJSON(path, body);
      setMsg({ kind: "ok", text: `${label}: done` });
      if (r.session) onChange((old) => ({ ...old, ...r.session }));
      load();
    } catch (e) {
      setMsg({ kind: "error", text: `${label} refused: ${e.code}: ${e.message}` });
    }
  };
  const field = (k, label) => html`<label>${label}<input value=${note[k]} onInput=${(e) => setNote({ ...note, [k]: e.currentTarget.value })} /></label>`;
  const cleanNote = Object.fromEntries(Object.entries(note).filter(([, v]) => v.trim()));
  return html`<details class="card lifecycle" aria-label="Lifecycle" onToggle=${(e) => setOpen(e.currentTarget.open)}>
    <summary><h3>Lifecycle</h3></summary>
    <dl>
      <dt>status</dt><dd><${Badge} s=${rec.status} /></dd>
      <dt>started</dt><dd><${Time} iso=${rec.started_at} /></dd>
      <dt>updated</dt><dd><${Time} iso=${rec.updated_at} />${rec.updated_by_gate ? " by " + rec.updated_by_gate : ""}</dd>
      <dt>last heartbeat</dt><dd>${rec.last_heartbeat_at ? html`<${Time} iso=${rec.last_heartbeat_at} />` : "—"}</dd>
      ${rec.phase ? html`<dt>phase</dt><dd>${rec.phase}</dd>` : null}${rec.activity ? html`<dt>activity</dt><dd>${rec.activity}</dd>` : null}
      ${st ? html`<dt>recommendation</dt><dd><${Badge} s=${st.recommendation} />${(st.reasons || []).map((r, i) => html`<div key=${i} class="muted">${r}</div>`)}</dd>
        <dt>work window</dt><dd class="work-window">${windowText(st.window)}</dd>
        ${st.lastArchivedAt ? html`<dt>last archive</dt><dd><${Time} iso=${st.lastArchivedAt} /></dd>` : null}` : null}
    </dl>
    ${rec.status !== "archived" ? html`<form class="archive" onSubmit=${(e) => { e.preventDefault(); act("archive", `/v1/sessions/${enc(id)}/archive`, Object.keys(cleanNote).length ? { note: cleanNote } : {}); }}>
      <fieldset><legend>Archive now, with a note</legend>${field("done", "done")}${field("inProgress", "in progress")}${field("next", "next")}
      <button type="submit">Archive</button></fieldset></form>` : null}
    <h4>Archives of this session</h4>
    ${archives && archives.error ? html`<p class="muted">${archives.error}</p>` : null}
    ${Array.isArray(archives) ? (archives.length ? html`<ul>${archives.map((a) => html`<li key=${a.name}><code>${a.name}</code> <span class="muted">${a.archivedAt} · ${a.bytes} bytes</span>
        ${rec.status === "archived" ? html` <button type="button" onClick=${() => act("restore", "/v1/archives/restore", { name: a.name })}>Restore</button>` : null}</li>`)}</ul>` : html`<p class="muted">none</p>`) : null}
    ${msg ? html`<p class=${"notice " + msg.kind} role=${msg.kind === "error" ? "alert" : "status"}>${msg.text}</p>` : null}
  </details>`;
}
