// live.js follows a server-sent event stream for the page, through the shared worker hub.js
// when the browser has shared workers (one connection per stream for all the tabs of this
// origin; see hub.js), else with an EventSource of its own.
//
// follow(key, {after, names, poll, onOpen, onError, onEvent}) opens the stream at the URL key
// (after: the cursor to start after, null for the server's default; names: the SSE event
// names to receive; poll: the log's URL, when the hub may read it by polling instead) and
// answers a function that closes it. onOpen(mode) is called with "stream" or "polled";
// onError(state) with "reconnecting" or "closed"; onEvent(name, data) with each event's name
// and data (a string).

let hub = null;
let nextId = 0;
const handlers = new Map();

function connect() {
  if (hub !== null) return hub;
  hub = false;
  if (typeof SharedWorker !== "function") return hub;
  try {
    const w = new SharedWorker("/ui/hub.js", { name: "sessiond-live" });
    w.port.onmessage = ({ data: m }) => {
      const h = handlers.get(m.id);
      if (!h) return;
      if (m.type === "open") h.onOpen(m.mode);
      else if (m.type === "error") h.onError(m.state);
      else if (m.type === "event") h.onEvent(m.name, m.data);
    };
    w.port.start();
    // Leaving the page ends its subscriptions at once (the hub closes a stream no tab follows).
    addEventListener("pagehide", () => {
      for (const id of handlers.keys()) w.port.postMessage({ op: "unsub", id });
    });
    hub = w.port;
  } catch {
    hub = false;
  }
  return hub;
}

export function follow(key, { after = null, names, poll = null, onOpen, onError, onEvent }) {
  const port = connect();
  if (port) {
    const id = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}-${nextId++}`;
    handlers.set(id, { onOpen, onError, onEvent });
    port.postMessage({ op: "sub", id, key, after, names, poll });
    return () => {
      handlers.delete(id);
      port.postMessage({ op: "unsub", id });
    };
  }
  const url = after === null ? key : key + (key.includes("?") ? "&" : "?") + "after=" + after;
  const es = new EventSource(url);
  es.onopen = () => onOpen("stream");
  es.onerror = () => onError(es.readyState === EventSource.CLOSED ? "closed" : "reconnecting");
  for (const name of names) es.addEventListener(name, (e) => onEvent(name, e.data));
  return () => es.close();
}
