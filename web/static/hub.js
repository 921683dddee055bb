// hub.js is the page's shared worker: one live connection per stream for every tab of this
// origin. Over plain HTTP/1.1 a browser opens at most 6 connections to an origin, shared by all
// its tabs; a stream holds one for as long as it is open. So the tabs ask the hub, which opens
// each stream (a session's events, the change feed with a filter) once, whoever asks, and
// hands its events to every tab that follows it. At most MAX_STREAMS streams are held open;
// beyond that a session's events are read by polling its log (GET …/events?after=) once a
// second, which holds a connection only for the moment of each read, and a freed stream
// goes to the oldest polled one. A tab that joins a stream already open gets the events from
// then on; the page fills any gap from the log (session.js), so nothing is skipped.
//
// Messages from a tab: {op: "sub", id, key, after, names, poll} and {op: "unsub", id}, where
// key is the stream's URL without its cursor, after the cursor to open it from (null: the
// server's default), names the SSE event names to forward, and poll the log's URL when the
// stream may be polled instead. To a tab: {id, type: "open", mode: "stream"|"polled"},
// {id, type: "error", state: "reconnecting"|"closed"}, {id, type: "event", name, data}.
"use strict";

const MAX_STREAMS = 4;
const POLL_MS = 1000;

const streams = new Map(); // key → {subs: Map(id → port), names: Set, es, timer, last, open, mode, poll}
const subs = new Map(); // id → key

function post(s, msg) {
  for (const [id, port] of s.subs) port.postMessage({ ...msg, id });
}

function live() {
  let n = 0;
  for (const s of streams.values()) if (s.es) n++;
  return n;
}

function listen(s, name) {
  s.es.addEventListener(name, (e) => {
    if (e.lastEventId) s.last = Number(e.lastEventId);
    post(s, { type: "event", name, data: e.data });
  });
}

function openStream(key, s) {
  const url = s.last === null ? key : key + (key.includes("?") ? "&" : "?") + "after=" + s.last;
  s.mode = "stream";
  s.es = new EventSource(url);
  s.es.onopen = () => { s.open = true; post(s, { type: "open", mode: "stream" }); };
  s.es.onerror = () => {
    s.open = false;
    post(s, { type: "error", state: s.es.readyState === EventSource.CLOSED ? "closed" : "reconnecting" });
  };
  for (const name of s.names) listen(s, name);
}

function pollStream(s) {
  s.mode = "polled";
  let busy = false;
  const tick = async () => {
    if (busy) return;
    busy = true;
    try {
      const resp = await fetch(s.poll + "?after=" + (s.last === null ? -1 : s.last) + "&limit=1000", { headers: { Accept: "application/json" }, cache: "no-store" });
      if (!resp.ok) throw new Error(String(resp.status));
      const page = await resp.json();
      if (!s.open) { s.open = true; post(s, { type: "open", mode: "polled" }); }
      for (const ev of page.events || []) {
        s.last = ev.sequence;
        post(s, { type: "event", name: "ev." + ev.eventType, data: JSON.stringify(ev) });
      }
    } catch {
      if (s.open) { s.open = false; post(s, { type: "error", state: "reconnecting" }); }
    } finally {
      busy = false;
    }
  };
  tick();
  s.timer = setInterval(tick, POLL_MS);
}

function stop(key, s) {
  if (s.es) s.es.close();
  if (s.timer) clearInterval(s.timer);
  streams.delete(key);
  // A stream freed: the oldest polled one takes it.
  for (const [k, o] of streams) {
    if (o.mode === "polled" && live() < MAX_STREAMS) {
      clearInterval(o.timer);
      o.timer = null;
      openStream(k, o);
      break;
    }
  }
}

function subscribe(port, m) {
  let s = streams.get(m.key);
  subs.set(m.id, m.key);
  if (s) {
    s.subs.set(m.id, port);
    for (const name of m.names) {
      if (!s.names.has(name)) { s.names.add(name); if (s.es) listen(s, name); }
    }
    if (s.open) port.postMessage({ id: m.id, type: "open", mode: s.mode });
    return;
  }
  s = { subs: new Map([[m.id, port]]), names: new Set(m.names), es: null, timer: null, last: m.after, open: false, mode: "", poll: m.poll };
  streams.set(m.key, s);
  if (m.poll && live() >= MAX_STREAMS) pollStream(s);
  else openStream(m.key, s);
}

function unsubscribe(id) {
  const key = subs.get(id);
  subs.delete(id);
  const s = key && streams.get(key);
  if (!s) return;
  s.subs.delete(id);
  if (s.subs.size === 0) stop(key, s);
}

self.onconnect = (e) => {
  const port = e.ports[0];
  port.onmessage = ({ data: m }) => {
    if (m.op === "sub") subscribe(port, m);
    else if (m.op === "unsub") unsubscribe(m.id);
  };
  port.start();
};
