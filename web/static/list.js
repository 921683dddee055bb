// The sessions list: filters, search by id, and live updates. The page follows the change
// feed (GET /v1/events/stream, filtered like the list) and reloads the list with its ETag
// shortly after each change (sessions created, statuses, runs queued, claimed and finished,
// archives); a slow poll, also with the ETag (a 304 costs no transfer and no re-render),
// refreshes what the feed does not carry (event counts, last activity).
import { useState, useEffect, useRef } from "preact/hooks";
import { getTagged, getJSON } from "./api.js";
import { html, Badge, Conn, Time } from "./render.js";
import { follow } from "./live.js";

const STATUSES = ["", "running", "paused", "closed", "stale", "archived"];
const POLL_MS = 10000; // the slow poll
const SETTLE_MS = 150; // changes arriving together cause one reload
const CHANGES = ["session.created", "session.status", "session.archived", "session.restored", "run.queued", "run.claimed", "run.finished"];

const lastActivity = (r) => [r.record.updated_at, r.record.last_heartbeat_at].filter(Boolean).sort().pop() || "";

const FILTERS = ["status", "project", "agent", "role", "q", "find"];

// filtersOf reads the filters from the URL's fragment (#/?status=running&project=demo).
function filtersOf(hash) {
  const i = hash.indexOf("?");
  const qs = new URLSearchParams(i < 0 ? "" : hash.slice(i + 1));
  return Object.fromEntries(FILTERS.map((k) => [k, qs.get(k) || ""]));
}

// ListPage is the sessions list; its filters are kept in the URL, so a filtered list can be
// reloaded, bookmarked and shared.
export function ListPage() {
  const [f, setF] = useState(() => filtersOf(location.hash));
  useEffect(() => {
    const qs = new URLSearchParams(Object.entries(f).filter(([, v]) => v));
    const want = "#/" + (qs.size ? "?" + qs : "");
    if (location.hash !== want && !(want === "#/" && location.hash === "")) history.replaceState(null, "", want);
  }, [f.status, f.project, f.agent, f.role, f.q, f.find]);
  const [list, setList] = useState(null);
  const [err, setErr] = useState(null);
  const [conn, setConn] = useState("connecting");
  const tag = useRef(null);
  useEffect(() => {
    let stop = false, timer = null, loading = false, again = false;
    tag.current = null;
    const qs = new URLSearchParams({ limit: "1000" });
    if (f.status) qs.set("status", f.status);
    if (f.project) qs.set("project", f.project);
    if (f.agent) qs.set("agent", f.agent);
    // load reloads the list (one at a time; a change during a load loads once more after it)
    // and schedules the slow poll.
    const load = async () => {
      if (loading) { again = true; return; }
      loading = true;
      clearTimeout(timer);
      try {
        const r = await getTagged("/v1/sessions?" + qs, tag.current);
        if (stop) return;
        if (!r.notModified) { tag.current = r.tag; setList(r.body); }
        setErr(null);
      } catch (e) {
        if (!stop) setErr(e);
      } finally {
        loading = false;
      }
      if (stop) return;
      if (again) { again = false; load(); return; }
      timer = setTimeout(() => (document.hidden ? (timer = setTimeout(load, POLL_MS)) : load()), POLL_MS);
    };
    let settle = null;
    const changed = () => { clearTimeout(settle); settle = setTimeout(load, SETTLE_MS); };
    const fq = new URLSearchParams();
    if (f.project) fq.set("project", f.project);
    if (f.agent) fq.set("agent", f.agent);
    // After a reconnection the changes missed meanwhile are replayed (Last-Event-ID), so each
    // causes a reload as usual; opening (or reopening, or joining) the feed reloads too. The
    // feed is one connection for all the tabs that follow it with these filters (live.js).
    const unfollow = follow("/v1/events/stream" + (fq.size ? "?" + fq : ""), {
      names: CHANGES.map((k) => "change." + k),
      onOpen: () => { setConn("live"); changed(); },
      onError: (state) => setConn(state),
      onEvent: changed,
    });
    load();
    return () => { stop = true; clearTimeout(timer); clearTimeout(settle); unfollow(); };
  }, [f.status, f.project, f.agent]);
  const set = (k) => (e) => setF({ ...f, [k]: e.currentTarget.value });
  // What is typed in the search box is kept as it is typed: the list re-renders while the feed
  // reloads it, and must not put the box back to the last search meanwhile.
  const [draft, setDraft] = useState(f.find || "");
  useEffect(() => setDraft(f.find || ""), [f.find]);
  const find = (e) => { e.preventDefault(); setF({ ...f, find: draft.trim() }); };
  const rows = list ? list.sessions.filter((s) => (!f.role || s.record.role === f.role) && (!f.q || s.record.session_id.toLowerCase().includes(f.q.toLowerCase())))
    .sort((a, b) => lastActivity(b).localeCompare(lastActivity(a))) : [];
  return html`<main class="page">
    <header class="session-head"><h1>Sessions</h1>
    <${Conn} state=${conn} what="live updates" /></header>
    <form class="filters" role="search" onSubmit=${(e) => e.preventDefault()}>
      <label>Search by id<input type="search" value=${f.q} onInput=${set("q")} placeholder="S-…" /></label>
      <label>Status<select value=${f.status} onChange=${set("status")}>${STATUSES.map((s) => html`<option value=${s}>${s || "any"}</option>`)}</select></label>
      <label>Project<input value=${f.project} onChange=${set("project")} /></label>
      <label>Agent<input value=${f.agent} onChange=${set("agent")} /></label>
      <label>Role<input value=${f.role} onInput=${set("role")} /></label>
    </form>
    <form class="find" role="search" aria-label="Search events" onSubmit=${find}>
      <label>Search events<input type="search" name="find" value=${draft} onInput=${(e) => setDraft(e.currentTarget.value)} placeholder='words, "a phrase", prefix*' /></label>
      <button type="submit">Search</button>
    </form>
    ${f.find ? html`<${SearchResults} q=${f.find} f=${f} />` : null}
    ${err ? html`<p class="err" role="alert">${err.code}: ${err.message}</p>` : null}
    ${!list ? html`<p>Loading…</p>` : rows.length === 0 ? html`<p class="muted">No sessions match.</p>` : html`
    <div class="table-scroll"><table class="sessions">
      <thead><tr><th scope="col">session</th><th scope="col">status</th><th scope="col">run</th><th scope="col">agent</th><th scope="col">role</th><th scope="col">project</th><th scope="col">events</th><th scope="col">last activity</th><th scope="col">advice</th></tr></thead>
      <tbody>${rows.map((s) => html`<tr key=${s.record.session_id} data-session=${s.record.session_id}>
        <td><a href=${"#/s/" + encodeURIComponent(s.record.session_id)}><code>${s.record.session_id}</code></a>${s.lineage ? html` <span class="muted" title="forked from ${s.lineage.forkedFromThreadId}">⑂</span>` : null}</td>
        <td><${Badge} s=${s.record.status} /></td>
        <td>${s.currentRun ? html`<${Badge} s=${s.currentRun.status} />` : html`<${Badge} s="idle" />`}</td>
        <td>${s.record.agent_id}</td><td>${s.record.role}</td><td>${s.record.project || ""}</td>
        <td class="num">${s.lastSequence + 1}</td><td><${Time} iso=${lastActivity(s)} /></td>
        <td class="advice" title=${s.advice.reasons.join("; ")}>${s.advice.stale && s.record.status !== "stale" ? html`<${Badge} s="stale" label="no heartbeat within the TTL; the sweeper has not marked it yet" /> ` : null}${s.advice.recommendation === "archive_now" ? html`<${Badge} s="archive_now" label=${s.advice.reasons.join("; ")} />` : html`<span class="muted">ok</span>`}</td></tr>`)}</tbody>
    </table></div>`}
    ${list && list.next ? html`<p class="muted">Showing the first 1000 sessions; narrow the filters to see others.</p>` : null}
  </main>`;
}

// Snippet draws a search result's snippet: plain text segments, the matching ones in <mark>
// (the text is never markup: Preact sets it as text).
const Snippet = ({ segs }) => segs.map((s) => (s.mark ? html`<mark>${s.text}</mark>` : s.text));

// SearchResults runs a full-text search (GET /v1/search) with the list's filters (project,
// agent, role, status) and shows its results, newest first, each a link to the event in its
// session's transcript (#/s/ID?seq=N); "more" follows the cursor.
function SearchResults({ q, f }) {
  const [res, setRes] = useState(null); // {results, next}
  const [err, setErr] = useState(null);
  const [more, setMore] = useState(false);
  const params = () => {
    const qs = new URLSearchParams({ q, limit: "20" });
    for (const k of ["project", "agent", "role", "status"]) if (f[k]) qs.set(k, f[k]);
    return qs;
  };
  useEffect(() => {
    let stop = false;
    setRes(null); setErr(null);
    getJSON("/v1/search?" + params()).then((r) => { if (!stop) setRes(r); }, (e) => { if (!stop) setErr(e); });
    return () => { stop = true; };
  }, [q, f.project, f.agent, f.role, f.status]);
  const loadMore = async () => {
    setMore(true);
    try {
      const qs = params();
      qs.set("cursor", res.next);
      const r = await getJSON("/v1/search?" + qs);
      setRes({ ...r, results: res.results.concat(r.results) });
    } catch (e) {
      setErr(e);
    } finally {
      setMore(false);
    }
  };
  if (err) return html`<p class="err" role="alert">search: ${err.code}: ${err.message}</p>`;
  if (!res) return html`<p class="muted">Searching…</p>`;
  return html`<section class="search-results" aria-label="Search results" data-count=${res.results.length}>
    ${res.results.length === 0 ? html`<p class="muted">No event matches.</p>` : html`<ol>${res.results.map((h) => html`<li key=${h.sessionId + "@" + h.sequence}>
      <a href=${"#/s/" + encodeURIComponent(h.sessionId) + "?seq=" + h.sequence} data-hit=${h.sessionId + "@" + h.sequence}><code>${h.sessionId}</code> · ${h.kind} · sequence ${h.sequence}</a>
      ${" "}<${Time} iso=${h.occurredAt} />${h.field ? html` <span class="muted">${h.field}</span>` : null}
      <p class="snippet"><${Snippet} segs=${h.snippet} /></p></li>`)}</ol>`}
    ${res.next ? html`<button type="button" disabled=${more} onClick=${loadMore}>more results</button>` : null}
  </section>`;
}
