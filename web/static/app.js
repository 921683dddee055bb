// The sessiond web UI: a sessions list (#/) and a session page (#/s/ID), served by sessiond
// itself; see web/doc.go.
import { render } from "preact";
import { useState, useEffect } from "preact/hooks";
import { html } from "./render.js";
import { loadPolicy } from "./policy.js";
import { ListPage } from "./list.js";
import { SessionPage } from "./session.js";
import { UsagePage } from "./charts.js";
import { getJSON, login, logout } from "./api.js";

// route is the page the URL's fragment names: the list (#/), or a session (#/s/ID), with the
// event to show when ?seq=N follows (#/s/ID?seq=N, a search result's link). A session id that
// is not valid percent-encoding (#/s/S-100%) is taken as it is written.
function route() {
  if (/^#\/usage(\?|$)/.test(location.hash)) return { page: "usage" };
  const m = location.hash.match(/^#\/s\/([^?]+)(?:\?(.*))?$/);
  if (!m) return { page: "list" };
  const seq = new URLSearchParams(m[2] || "").get("seq");
  const at = seq !== null && /^[0-9]+$/.test(seq) ? Number(seq) : null;
  try {
    return { page: "session", id: decodeURIComponent(m[1]), seq: at };
  } catch (_) {
    return { page: "session", id: m[1], seq: at };
  }
}

// LoginPage asks for an API key when the server requires one; the key becomes an HttpOnly
// login cookie (POST /v1/login) and the page reloads.
function LoginPage() {
  const [err, setErr] = useState(null);
  const submit = async (e) => {
    e.preventDefault();
    const key = e.currentTarget.elements.key.value;
    try {
      await login(key);
      location.reload();
    } catch (x) {
      setErr(x.message);
    }
  };
  return html`<main class="login"><h1>Log in</h1>
    <p>This sessiond requires a key. Paste an API key (<code>sessiond keys create</code> makes one); it is turned into a login cookie and not kept by this page.</p>
    <form onSubmit=${submit}><input name="key" type="password" autocomplete="off" placeholder="sk_…" aria-label="API key" required />
    <button type="submit">Log in</button></form>
    ${err && html`<p class="error" role="alert">${err}</p>`}</main>`;
}

function App() {
  const [needLogin, setNeedLogin] = useState(false);
  const [who, setWho] = useState(null);
  useEffect(() => { getJSON("/v1/whoami").then(setWho, () => {}); }, []);
  useEffect(() => {
    const on = () => setNeedLogin(true);
    addEventListener("sessiond:login", on);
    return () => removeEventListener("sessiond:login", on);
  }, []);
  const [r, setR] = useState(route());
  useEffect(() => {
    const on = () => setR(route());
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  useEffect(() => { document.title = r.page === "session" ? `${r.id} · sessiond` : r.page === "usage" ? "usage · sessiond" : "sessions · sessiond"; }, [r.page, r.id]);
  if (needLogin) return html`<header class="top"><a href="#/" class="brand">sessiond</a></header><${LoginPage} />`;
  const out = async () => { await logout(); location.reload(); };
  return html`<header class="top"><a href="#/" class="brand">sessiond</a> <a href="#/usage" class="nav-usage">usage</a>${who && who.auth && html`<span class="who">${who.subject} · ${who.project}</span><button class="logout" onClick=${out}>log out</button>`}</header>
    ${r.page === "session" ? html`<${SessionPage} key=${r.id} id=${r.id} seq=${r.seq} />` : r.page === "usage" ? html`<${UsagePage} />` : html`<${ListPage} />`}`;
}

loadPolicy().then(
  () => {
    const root = document.getElementById("app");
    root.textContent = "";
    render(html`<${App} />`, root);
  },
  (e) => { document.getElementById("app").textContent = "sessiond: could not load the policy table: " + e.message; },
);
