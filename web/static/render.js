// Renderers of the transcript's items, for people. Event content is untrusted: markdown goes
// through marked and then DOMPurify (images of other origins become links: the page never
// fetches what a message points at), terminal output through ansi.js (text in styled spans),
// and everything else is rendered as text by Preact.
import { h } from "preact";
import { memo } from "./memo.js";
import { useState, useMemo } from "preact/hooks";
import htm from "htm";
import { marked } from "marked";
import DOMPurify from "dompurify";
import { Ansi } from "./ansi.js";
import { messageText } from "./fold.js";

export const html = htm.bind(h);

// Links in sanitized HTML open outside the page and send no referrer.
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("rel", "noopener noreferrer nofollow");
    node.setAttribute("target", "_blank");
  }
});

// markdownHTML renders markdown to sanitized HTML, with images of other origins as links.
export function markdownHTML(text) {
  const clean = DOMPurify.sanitize(marked.parse(text, { async: false, gfm: true }), { USE_PROFILES: { html: true } });
  return clean.includes("<img") ? localImages(clean) : clean;
}

// localImages replaces each image of sanitized HTML whose source is not this origin (nor a
// data: URL) by a link to it, so that showing a message requests nothing (a remote image
// is a tracking pixel); the CSP's img-src is the second line. It works in a <template>,
// whose content is inert: nothing in it is fetched.
function localImages(clean) {
  const tpl = document.createElement("template");
  tpl.innerHTML = clean;
  for (const img of tpl.content.querySelectorAll("img")) {
    const src = img.getAttribute("src") || "";
    let u = null;
    try { u = new URL(src, location.href); } catch (_) { /* not a URL: dropped below */ }
    if (u && (u.protocol === "data:" || u.origin === location.origin)) continue;
    const a = document.createElement("a");
    const href = u && safeURL(u.href);
    if (href) {
      a.href = href;
      a.rel = "noopener noreferrer nofollow";
      a.target = "_blank";
    }
    a.className = "remote-img";
    a.textContent = `image: ${img.getAttribute("alt") || "(no description)"} (${u ? u.host || u.protocol : "invalid URL"}, not loaded)`;
    img.replaceWith(a);
  }
  return tpl.innerHTML;
}

const MINUTE = 60e3, HOUR = 60 * MINUTE, DAY = 24 * HOUR;

// relativeTime says how long ago (or in how long) iso is from now: "just now", "5 min ago",
// "in 2 h"; beyond a week it is the date.
export function relativeTime(iso, now = Date.now()) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso || "";
  const d = now - t, a = Math.abs(d);
  const say = (n, unit) => (d >= 0 ? `${n} ${unit} ago` : `in ${n} ${unit}`);
  if (a < 45e3) return "just now";
  if (a < HOUR) return say(Math.round(a / MINUTE), "min");
  if (a < DAY) return say(Math.round(a / HOUR), "h");
  if (a < 7 * DAY) return say(Math.round(a / DAY), "d");
  return new Date(t).toISOString().slice(0, 10);
}

// Time shows a time relative to now, with the absolute time on hover.
export const Time = ({ iso }) => (iso ? html`<time datetime=${iso} title=${iso}>${relativeTime(iso)}</time>` : null);

// safeURL answers url when it is http(s), else null (an artifact's url is not trusted).
export function safeURL(url) {
  try {
    const u = new URL(url);
    return u.protocol === "http:" || u.protocol === "https:" ? u.href : null;
  } catch (_) {
    return null;
  }
}

export const Badge = ({ s, label }) => html`<span class="badge st-${s}" title=${label || s}>${(s || "").replaceAll("_", " ")}</span>`;

const CONN_LABEL = { connecting: "connecting…", live: "live", polled: "live (polled)", reconnecting: "reconnecting…", closed: "disconnected" };

// Conn is the indicator of a live connection (what: "live stream", "live updates"); state is
// connecting, live, polled (read every second: the browser's connections to this server are
// taken by other tabs' streams), reconnecting or closed (data-state carries it for tests and
// styles).
export const Conn = ({ state, what }) => html`<span class=${"conn conn-" + state} data-state=${state} role="status" aria-live="polite" title=${what + ": " + CONN_LABEL[state]}><span aria-hidden="true">●</span> ${CONN_LABEL[state]}</span>`;

// Markdown renders text as sanitized markdown; it re-renders only when the text changes.
export const Markdown = memo(({ text }) => {
  const inner = useMemo(() => markdownHTML(text), [text]);
  return html`<div class="md" dangerouslySetInnerHTML=${{ __html: inner }}></div>`;
});

export const Message = memo(({ m, actions }) => {
  const text = messageText(m.parts);
  return html`<article class="msg role-${m.role}" data-message-id=${m.messageId} aria-label="${m.role} message">
    <header><strong>${m.role}</strong> <span class="muted">#${m.sequence}${m.runId ? " · run " + m.runId : ""}</span>
      ${m.status && m.status !== "completed" ? html` <${Badge} s=${m.status} />` : null}
      ${actions ? actions(m) : null}</header>
    <${Markdown} text=${text} />
  </article>`;
});

// Lazy is a <details> whose body is rendered only while it is open, so a long session's
// collapsed items cost one line each.
export function Lazy({ cls, open: initial, summary, body, attrs }) {
  const [open, setOpen] = useState(!!initial);
  return html`<details class=${cls} open=${open} onToggle=${(e) => setOpen(e.currentTarget.open)} ...${attrs || {}}>
    <summary>${summary}</summary>${open ? body() : null}</details>`;
}

export const Reasoning = memo(({ r }) => html`<${Lazy} cls="reasoning"
  summary=${html`Reasoning <span class="muted">(${r.text.length} characters, ${r.status})</span>`}
  body=${() => html`<pre class="wrap">${r.text}</pre>`} />`);

const STEP_MARK = { completed: "☑", failed: "☒", skipped: "⊘", running: "◐", pending: "☐" };

export const Plan = ({ plan }) => !plan ? null : html`<section class="card" aria-label="Plan">
  <h3>Plan${plan.title ? ": " + plan.title : ""} <${Badge} s=${plan.status} /></h3>
  <ul class="checklist">${plan.steps.map((s) => html`<li key=${s.id} class="st-${s.status}">
    <span aria-hidden="true">${STEP_MARK[s.status] || "☐"}</span> ${s.title} <span class="sr">(${s.status})</span></li>`)}</ul></section>`;

export const Task = memo(({ t }) => html`<li><${Badge} s=${t.status} /> ${t.title}${t.detail ? html` <span class="muted">${t.detail}</span>` : null}</li>`);

const json = (v) => JSON.stringify(v, null, 2);

export const Tool = memo(({ t }) => html`<${Lazy} cls="tool" attrs=${{ "data-tool": t.toolCallId }}
  summary=${html`<${Badge} s=${t.status} /> <code>${t.toolName}</code> <span class="muted">${t.toolCallId}</span>${t.error ? html` <span class="err">${t.error}</span>` : null}`}
  body=${() => html`${t.input !== undefined ? html`<h4>input</h4><pre>${json(t.input)}</pre>` : null}
  ${t.output !== undefined ? html`<h4>output</h4><pre>${json(t.output)}</pre>` : null}
  <p class="muted">${t.startedAt ? "started " + t.startedAt : ""}${t.completedAt ? " · completed " + t.completedAt : ""}</p>`} />`);

// Diff shows one file's patch, coloured by line.
export const Diff = memo(({ d }) => {
  const lines = (d.patch || "").replace(/\n$/, "").split("\n");
  return html`<details class="diff" open>
    <summary><${Badge} s=${d.status} /> <code>${d.path}</code></summary>
    ${d.patch ? html`<pre class="patch">${lines.map((l, i) => {
      const c = l.startsWith("@@") ? "hunk" : l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : "ctx";
      return html`<span key=${i} class=${c}>${l}${"\n"}</span>`;
    })}</pre>` : html`<p class="muted">no patch</p>`}</details>`;
});

const TERMINAL_TAIL = 64 * 1024;

// Terminal shows a terminal's output with its ANSI colours; long output shows its tail first.
function TerminalOutput({ output }) {
  const [all, setAll] = useState(false);
  const long = output.length > TERMINAL_TAIL;
  const text = long && !all ? output.slice(-TERMINAL_TAIL) : output;
  return html`${long ? html`<button type="button" onClick=${() => setAll(!all)}>${all ? "show the tail" : `show all ${output.length} characters`}</button>` : null}
    <pre class="ansi"><${Ansi} text=${text} /></pre>`;
}

// Terminal shows a terminal's output with its ANSI colours (open: the latest terminal; the
// others open on request); long output shows its tail first.
export const Terminal = memo(({ term, open }) => html`<${Lazy} cls="terminal" open=${open} attrs=${{ "data-terminal": term.terminalId }}
  summary=${html`<code>${term.terminalId}</code>${term.exitCode !== undefined && term.exitCode !== null ? html` <span class=${term.exitCode === 0 ? "ok" : "err"}>exit ${term.exitCode}</span>` : null} <span class="muted">${term.output.length} characters</span>`}
  body=${() => html`<${TerminalOutput} output=${term.output} />`} />`);

export const TestTable = ({ tests }) => html`<table class="tests"><thead><tr><th scope="col">test</th><th scope="col">status</th><th scope="col">duration</th><th scope="col">output</th></tr></thead>
  <tbody>${tests.map((t) => html`<tr key=${t.testId}><td><code>${t.name}</code></td><td><${Badge} s=${t.status} /></td>
    <td class="num">${t.durationMs !== undefined ? t.durationMs + " ms" : ""}</td><td>${t.output ? html`<pre>${t.output}</pre>` : ""}</td></tr>`)}</tbody></table>`;

export const Usage = ({ usage }) => {
  const runs = Object.entries(usage.byRun || {});
  const l = usage.latest;
  return html`<table class="usage"><thead><tr><th scope="col"></th><th scope="col">input</th><th scope="col">output</th><th scope="col">total</th></tr></thead><tbody>
    <tr><th scope="row">session</th><td class="num">${usage.total.inputTokens}</td><td class="num">${usage.total.outputTokens}</td><td class="num">${usage.total.totalTokens}</td></tr>
    ${runs.map(([id, u]) => html`<tr key=${id}><th scope="row">run ${id}</th><td class="num">${u.inputTokens}</td><td class="num">${u.outputTokens}</td><td class="num">${u.totalTokens}</td></tr>`)}
  </tbody></table>${l && l.contextTokens !== undefined ? html`<p class="muted">context ${l.contextTokens}${l.contextWindow ? " of " + l.contextWindow : ""} tokens</p>` : null}`;
};

export const ErrorItem = ({ e }) => html`<li class="error-item"><code class="code">${e.code}</code> ${e.message}
  ${e.retryable ? html` <span class="badge">retryable</span>` : null}${e.sourceEventId ? html` <span class="muted">(event ${e.sourceEventId})</span>` : null}</li>`;

export const Artifact = ({ a }) => {
  const url = a.url ? safeURL(a.url) : null;
  return html`<li><${Badge} s=${a.status} /> ${url ? html`<a href=${url} rel="noopener noreferrer nofollow" target="_blank">${a.name}</a>` : a.name}${" "}
    <span class="muted">${a.kind}${a.mimeType ? " · " + a.mimeType : ""}${a.size !== undefined ? " · " + a.size + " bytes" : ""}${a.url && !url ? " · " + a.url : ""}</span></li>`;
};

// WorkspaceFile is a file of the workspace as the runtime last reported it (written or deleted).
export const WorkspaceFile = ({ f }) => html`<li data-workspace-file=${f.path}><${Badge} s=${f.operation === "delete" ? "deleted" : "written"} /> <code>${f.path}</code>${" "}
  <span class="muted">${[f.mimeType, f.size !== undefined ? f.size + " bytes" : ""].filter(Boolean).join(" · ")}</span></li>`;

export const Summary = ({ s, action }) => html`<div class="summary card"><h4>Summary of run ${s.runId} <${Badge} s=${s.status} /> ${action}</h4>
  <p>${s.text}</p>
  ${s.highlights.length ? html`<h5>Highlights</h5><ul>${s.highlights.map((x, i) => html`<li key=${i}>${x}</li>`)}</ul>` : null}
  ${s.pendingItems.length ? html`<h5>Pending</h5><ul>${s.pendingItems.map((x, i) => html`<li key=${i}>${x}</li>`)}</ul>` : null}</div>`;

export const Steer = ({ s }) => html`<li><${Badge} s=${s.status} /> ${s.text} <span class="muted">run ${s.targetRunId}</span>
  ${s.error ? html` <span class="err">${s.error.code}: ${s.error.message}</span>` : null}</li>`;
