// The sessiond web UI: a sessions list (#/) and a session page (#/s/ID), served by sessiond
// itself; see web/doc.go.
import { render } from "preact";
import { useState, useEffect } from "preact/hooks";
import { html } from "./render.js";
import { loadPolicy } from "./policy.js";
import { ListPage } from "./list.js";
import { SessionPage } from "./session.js";

function route() {
  const m = location.hash.match(/^#\/s\/(.+)$/);
  return m ? { page: "session", id: decodeURIComponent(m[1]) } : { page: "list" };
}

function App() {
  const [r, setR] = useState(route());
  useEffect(() => {
    const on = () => setR(route());
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  useEffect(() => { document.title = r.page === "session" ? `${r.id} · sessiond` : "sessions · sessiond"; }, [r.page, r.id]);
  return html`<header class="top"><a href="#/" class="brand">sessiond</a></header>
    ${r.page === "session" ? html`<${SessionPage} key=${r.id} id=${r.id} />` : html`<${ListPage} />`}`;
}

loadPolicy().then(
  () => {
    const root = document.getElementById("app");
    root.textContent = "";
    render(html`<${App} />`, root);
  },
  (e) => { document.getElementById("app").textContent = "sessiond: could not load the policy table: " + e.message; },
);
