// Charts: a session's tokens over time, its runs' durations and its tool calls, computed from
// the log's usage, run status and tool events (sessionSeries); and a project's usage per day,
// model and tool from GET /v1/usage (UsagePage). Drawn with uPlot (vendored, pinned) on
// canvases: nothing here sets a style attribute, so the page's CSP (style-src 'self') holds.
// The usage events carry tokens only (input, output, total): no cost, no cached tokens.
import { useState, useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import { getJSON, readPrefix } from "./api.js";
import { html } from "./render.js";

const TERMINAL_TOOL = new Set(["completed", "failed", "denied"]);
const TERMINAL_RUN = new Set(["completed", "failed", "stopped"]);

// sessionSeries folds a session's events (in log order) into what its charts draw, by the
// rules of the server's usage rollup (docs/api.md, Usage): each usage event adds its counts as
// sent; a run counts once its terminal run status event arrives, with its durationMs; a tool
// call once its terminal tool event arrives. Model: the session's snapshot's.
export function sessionSeries(events, model) {
  const s = {
    model: model || "",
    tokens: { t: [], input: [], output: [], total: [] }, // cumulative, one point per usage event
    totals: { usageEvents: 0, inputTokens: 0, outputTokens: 0, totalTokens: 0 },
    runs: [], // {runId, status, durationMs, seq}
    tools: new Map(), // name -> {calls, failures, denied}
  };
  for (const e of events) {
    const p = e.payload || {};
    if (e.eventType === "usage") {
      const tt = s.totals;
      tt.usageEvents++;
      tt.inputTokens += p.inputTokens || 0;
      tt.outputTokens += p.outputTokens || 0;
      tt.totalTokens += p.totalTokens || 0;
      s.tokens.t.push(Date.parse(e.occurredAt) / 1000);
      s.tokens.input.push(tt.inputTokens);
      s.tokens.output.push(tt.outputTokens);
      s.tokens.total.push(tt.totalTokens);
    } else if (e.eventType === "status" && e.runId && TERMINAL_RUN.has(p.status)) {
      s.runs.push({ runId: e.runId, status: p.status, durationMs: p.durationMs || 0, seq: e.sequence });
    } else if (e.eventType === "tool" && TERMINAL_TOOL.has(p.status)) {
      const name = (p.toolName || "").replaceAll("\u0000", "\uFFFD");
      const x = s.tools.get(name) || { calls: 0, failures: 0, denied: 0 };
      x.calls++;
      if (p.status === "failed") x.failures++;
      if (p.status === "denied") x.denied++;
      s.tools.set(name, x);
    }
  }
  return s;
}

// colours of the series, readable on the light and the dark background.
const C = { input: "#2f81f7", output: "#d4a72c", total: "#8957e5", ok: "#2da44e", fail: "#cf222e", stop: "#9a6700" };

// Plot draws one uPlot chart into its own div, sized to the div's width, and redraws it when
// the data or the width changes. data and opts follow uPlot's API.
function Plot({ title, data, opts, label }) {
  const box = useRef(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return undefined;
    const width = () => Math.max(240, Math.min(el.clientWidth || 600, 900));
    const plot = new uPlot({ ...opts, title, width: width(), height: 220 }, data, el);
    const ro = new ResizeObserver(() => plot.setSize({ width: width(), height: 220 }));
    ro.observe(el);
    return () => { ro.disconnect(); plot.destroy(); };
  }, [data, opts, title]);
  return html`<div class="chart" ref=${box} role="img" aria-label=${label}></div>`;
}

const bars = () => uPlot.paths.bars({ size: [0.6, 60] });

// categoryAxis labels an x axis of categories 0..n-1 with names.
const categoryAxis = (names) => ({
  splits: () => names.map((_, i) => i),
  values: () => names.map((n) => (n.length > 14 ? n.slice(0, 13) + "…" : n)),
  grid: { show: false },
});

const fmt = (n) => Math.round(n).toLocaleString("en");

// SessionCharts is a session page's charts section: closed until opened; on opening it reads
// the log (pages of 10,000 events) and keeps only the events the charts count.
export function SessionCharts({ id, lastSeq, model }) {
  const [open, setOpen] = useState(false);
  const [state, setState] = useState(null); // {series, upTo} | {error} | {loading, read}
  const load = () => {
    setState({ loading: true, read: 0 });
    const kept = [];
    let read = 0;
    readPrefix(id, lastSeq, (evs) => {
      read += evs.length;
      for (const e of evs) if (e.eventType === "usage" || e.eventType === "tool" || (e.eventType === "status" && e.runId)) kept.push(e);
      setState({ loading: true, read });
    }).then(() => setState({ series: sessionSeries(kept, model), upTo: lastSeq }), (e) => setState({ error: e.message }));
  };
  useEffect(() => { if (open && !state) load(); }, [open]);
  const onToggle = (e) => setOpen(e.currentTarget.open);
  let body = null;
  if (!open) body = null;
  else if (!state || state.loading) body = html`<p class="muted">Reading the log… ${state ? fmt(state.read) : 0} events</p>`;
  else if (state.error) body = html`<p class="err" role="alert">${state.error}</p>`;
  else body = html`<${SeriesView} s=${state.series} />
    <p class="muted">Counted through sequence ${state.upTo}. <button type="button" class="small" onClick=${load}>refresh</button></p>`;
  return html`<details class="charts card" onToggle=${onToggle}>
    <summary>Charts: tokens, runs, tool calls</summary>${body}</details>`;
}

// SeriesView draws a session's series and the numbers behind them.
function SeriesView({ s }) {
  const t = s.totals;
  const ended = s.runs.length, failed = s.runs.filter((r) => r.status === "failed").length;
  const toolNames = [...s.tools.keys()].sort();
  const toolCalls = toolNames.reduce((n, k) => n + s.tools.get(k).calls, 0);
  const toolFails = toolNames.reduce((n, k) => n + s.tools.get(k).failures, 0);
  const tokensData = useMemoData(() => [s.tokens.t, s.tokens.input, s.tokens.output], [s]);
  const tokensOpts = useMemoData(() => ({
    // One usage event is one point: the axis then spans a minute around it.
    scales: { x: { range: (u, min, max) => (min === max ? [min - 60, max + 60] : [min, max]) } },
    series: [{}, { label: "input (cumulative)", stroke: C.input, width: 2 }, { label: "output (cumulative)", stroke: C.output, width: 2 }],
    axes: [{}, { size: 70 }],
  }), []);
  const runsData = useMemoData(() => [s.runs.map((_, i) => i), s.runs.map((r) => r.durationMs / 1000)], [s]);
  const runsOpts = useMemoData(() => ({
    scales: { x: { time: false } },
    series: [{ label: "run" }, { label: "duration (s)", stroke: C.total, fill: C.total + "55", paths: bars(), points: { show: false } }],
    axes: [categoryAxis(s.runs.map((r) => r.runId)), { size: 60 }],
  }), [s]);
  const toolsData = useMemoData(() => [toolNames.map((_, i) => i), toolNames.map((k) => s.tools.get(k).calls), toolNames.map((k) => s.tools.get(k).failures)], [s]);
  const toolsOpts = useMemoData(() => ({
    scales: { x: { time: false } },
    series: [{ label: "tool" }, { label: "calls", stroke: C.ok, fill: C.ok + "55", paths: bars(), points: { show: false } },
      { label: "failures", stroke: C.fail, fill: C.fail + "55", paths: bars(), points: { show: false } }],
    axes: [categoryAxis(toolNames), { size: 50 }],
  }), [s]);
  return html`<div class="chart-grid">
    ${s.tokens.t.length ? html`<${Plot} title="Tokens over time" label="tokens over time" data=${tokensData} opts=${tokensOpts} />` : html`<p class="muted">No usage event.</p>`}
    ${ended ? html`<${Plot} title="Run durations" label="run durations" data=${runsData} opts=${runsOpts} />` : html`<p class="muted">No run has ended.</p>`}
    ${toolNames.length ? html`<${Plot} title="Tool calls and failures" label="tool calls and failures" data=${toolsData} opts=${toolsOpts} />` : html`<p class="muted">No tool call has ended.</p>`}
  </div>
  <table class="chart-numbers" aria-label="The numbers the charts draw">
    <tbody>
      <tr><th scope="row">model</th><td data-k="model">${s.model || "—"}</td></tr>
      <tr><th scope="row">usage events</th><td data-k="usageEvents">${t.usageEvents}</td></tr>
      <tr><th scope="row">input tokens</th><td data-k="inputTokens">${t.inputTokens}</td></tr>
      <tr><th scope="row">output tokens</th><td data-k="outputTokens">${t.outputTokens}</td></tr>
      <tr><th scope="row">total tokens</th><td data-k="totalTokens">${t.totalTokens}</td></tr>
      <tr><th scope="row">runs ended</th><td data-k="runs">${ended}</td></tr>
      <tr><th scope="row">runs failed</th><td data-k="runsFailed">${failed}</td></tr>
      <tr><th scope="row">run time (ms)</th><td data-k="runDurationMs">${s.runs.reduce((n, r) => n + r.durationMs, 0)}</td></tr>
      <tr><th scope="row">tool calls</th><td data-k="toolCalls">${toolCalls}</td></tr>
      <tr><th scope="row">tool failures</th><td data-k="toolFailures">${toolFails}</td></tr>
    </tbody>
  </table>
  ${toolNames.length ? html`<table class="chart-numbers" aria-label="Tool calls by tool"><thead><tr><th>tool</th><th>calls</th><th>failed</th><th>denied</th></tr></thead><tbody>
    ${toolNames.map((k) => { const x = s.tools.get(k); return html`<tr data-tool=${k}><td><code>${k}</code></td><td>${x.calls}</td><td>${x.failures}</td><td>${x.denied}</td></tr>`; })}
  </tbody></table>` : null}`;
}

// useMemoData keeps a value while its inputs stay the same, so that a chart is not rebuilt at
// every render.
function useMemoData(fn, deps) {
  const ref = useRef(null);
  if (!ref.current || ref.current.deps.length !== deps.length || ref.current.deps.some((d, i) => d !== deps[i])) {
    ref.current = { deps, value: fn() };
  }
  return ref.current.value;
}

// usageDay is today's UTC date minus n days, YYYY-MM-DD.
const usageDay = (n) => new Date(Date.now() - n * 86400000).toISOString().slice(0, 10);

// UsagePage is the usage of the sessions the caller may see (#/usage): per day, per project
// and model, and per tool, from GET /v1/usage, over a range of days and for one project.
export function UsagePage() {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const [q, setQ] = useState({ from: params.get("from") || usageDay(29), to: params.get("to") || usageDay(0), project: params.get("project") || "" });
  const [data, setData] = useState(null);
  const [err, setErr] = useState(null);
  useEffect(() => {
    const base = new URLSearchParams({ from: q.from, to: q.to });
    if (q.project) base.set("project", q.project);
    const ask = (by) => { const p = new URLSearchParams(base); p.set("by", by); return getJSON("/v1/usage?" + p); };
    setErr(null);
    Promise.all([ask("day"), ask("project,model")]).then(([byDay, byModel]) => setData({ byDay, byModel }), (e) => { setErr(e); setData(null); });
    const hq = new URLSearchParams({ from: q.from, to: q.to });
    if (q.project) hq.set("project", q.project);
    history.replaceState(null, "", "#/usage?" + hq);
  }, [q.from, q.to, q.project]);
  const submit = (e) => {
    e.preventDefault();
    const f = e.currentTarget.elements;
    setQ({ from: f.from.value, to: f.to.value, project: f.project.value.trim() });
  };
  return html`<main class="page usage">
    <nav class="crumbs"><a href="#/">← sessions</a></nav>
    <h1>Usage</h1>
    <p class="muted">Tokens as the usage events carry them (the events carry no cost), runs and tool calls that ended, by UTC day, of the sessions this credential may see.</p>
    <form class="usage-form" onSubmit=${submit}>
      <label>from <input name="from" type="date" value=${q.from} required /></label>
      <label>to <input name="to" type="date" value=${q.to} required /></label>
      <label>project <input name="project" value=${q.project} placeholder="every project" /></label>
      <button type="submit">Show</button>
    </form>
    ${err ? html`<p class="err" role="alert">${err.code || "error"}: ${err.message}</p>` : null}
    ${data ? html`<${UsageView} d=${data} />` : err ? null : html`<p class="muted">Loading…</p>`}
  </main>`;
}

// UsageView draws the answers of GET /v1/usage by day and by project and model.
function UsageView({ d }) {
  const { byDay, byModel } = d;
  const days = byDay.groups;
  const t = byDay.total;
  // Every day of the range, with 0 where nothing was counted (the API answers the days with
  // something), so that the x axis is the range asked for.
  const series = useMemoData(() => {
    const from = Date.parse(byDay.from + "T00:00:00Z") / 1000, to = Date.parse(byDay.to + "T00:00:00Z") / 1000;
    const at = new Map(days.map((g) => [Date.parse(g.day + "T00:00:00Z") / 1000, g]));
    const x = [];
    for (let t = from; t <= to; t += 86400) x.push(t);
    const col = (k) => x.map((t) => (at.has(t) ? at.get(t)[k] : 0));
    return { x, col };
  }, [d]);
  const dayData = useMemoData(() => [series.x, series.col("inputTokens"), series.col("outputTokens")], [d]);
  const dayOpts = useMemoData(() => ({
    series: [{}, { label: "input", stroke: C.input, width: 2 }, { label: "output", stroke: C.output, width: 2 }],
    axes: [{}, { size: 70 }],
  }), []);
  const runData = useMemoData(() => [series.x, series.col("runsCompleted"), series.col("runsFailed"), series.col("toolFailures")], [d]);
  const runOpts = useMemoData(() => ({
    series: [{}, { label: "runs completed", stroke: C.ok, width: 2 }, { label: "runs failed", stroke: C.fail, width: 2 }, { label: "tool failures", stroke: C.stop, width: 2 }],
    axes: [{}, { size: 50 }],
  }), []);
  return html`<table class="chart-numbers usage-total" aria-label="Totals">
      <tbody><tr><th scope="row">from</th><td data-k="from">${byDay.from}</td><th scope="row">to</th><td data-k="to">${byDay.to}</td></tr>
      <tr><th scope="row">input tokens</th><td data-k="inputTokens">${t.inputTokens}</td><th scope="row">output tokens</th><td data-k="outputTokens">${t.outputTokens}</td></tr>
      <tr><th scope="row">runs ended</th><td data-k="runs">${t.runs}</td><th scope="row">runs failed</th><td data-k="runsFailed">${t.runsFailed}</td></tr>
      <tr><th scope="row">tool calls</th><td data-k="toolCalls">${t.toolCalls}</td><th scope="row">tool failures</th><td data-k="toolFailures">${t.toolFailures}</td></tr></tbody></table>
    ${days.length ? html`<div class="chart-grid">
      <${Plot} title="Tokens per day" label="tokens per day" data=${dayData} opts=${dayOpts} />
      <${Plot} title="Runs and tool failures per day" label="runs and tool failures per day" data=${runData} opts=${runOpts} />
    </div>` : html`<p class="muted">Nothing was counted in these days.</p>`}
    <h2>By project and model</h2>
    <table class="usage-table"><thead><tr><th>project</th><th>model</th><th>input</th><th>output</th><th>runs</th><th>failed</th><th>mean run</th><th>tool calls</th></tr></thead>
      <tbody>${byModel.groups.map((g) => html`<tr data-project=${g.project} data-model=${g.model}><td>${g.project || "—"}</td><td><code>${g.model}</code></td>
        <td data-k="inputTokens">${fmt(g.inputTokens)}</td><td>${fmt(g.outputTokens)}</td><td>${g.runs}</td><td>${g.runsFailed}</td>
        <td>${g.runs ? (g.meanRunDurationMs / 1000).toFixed(1) + " s" : "—"}</td><td>${fmt(g.toolCalls)}</td></tr>`)}</tbody></table>
    <h2>Tools</h2>
    ${byDay.tools.length ? html`<table class="usage-table"><thead><tr><th>tool</th><th>calls</th><th>failed</th><th>denied</th><th>failure rate</th></tr></thead>
      <tbody>${byDay.tools.map((x) => html`<tr data-tool=${x.tool}><td><code>${x.tool}</code></td><td data-k="calls">${x.calls}</td><td>${x.failures}</td><td>${x.denied}</td><td>${(100 * x.failureRate).toFixed(1)}%</td></tr>`)}</tbody></table>`
      : html`<p class="muted">No tool call ended in these days.</p>`}`;
}
