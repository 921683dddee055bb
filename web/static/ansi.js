// Terminal output with its ANSI SGR styling (bold, dim, italic, underline, strike-through;
// the 16 colours, the 256 of xterm and 24-bit colour, foreground and background), rendered
// as text in spans: no HTML is parsed, so output cannot inject markup. The page's CSP allows
// no style attribute in markup: the 16 colours and the text styles are classes of app.css,
// the 256 colours classes of a stylesheet built here through the CSSOM, and 24-bit colours
// are set through the CSSOM (Preact sets a style object property by property), which the CSP
// allows.
import { h } from "preact";

const NAMES = ["black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"];

// xterm256 is the RGB of xterm's colour n, 16 ≤ n ≤ 255: a 6×6×6 cube, then 24 greys.
export function xterm256(n) {
  if (n >= 232) {
    const g = 8 + 10 * (n - 232);
    return [g, g, g];
  }
  const c = n - 16, level = (v) => (v === 0 ? 0 : 55 + 40 * v);
  return [level(Math.floor(c / 36)), level(Math.floor(c / 6) % 6), level(c % 6)];
}

// The classes ansi-fg-N and ansi-bg-N for the colours 16 to 255, built once.
let sheetDone = false;
function ensureSheet() {
  if (sheetDone || typeof CSSStyleSheet === "undefined") return;
  sheetDone = true;
  const rules = [];
  for (let n = 16; n < 256; n++) {
    const rgb = `rgb(${xterm256(n).join(",")})`;
    rules.push(`.ansi-fg-${n}{color:${rgb}}`, `.ansi-bg-${n}{background-color:${rgb}}`);
  }
  const sheet = new CSSStyleSheet();
  sheet.replaceSync(rules.join("\n"));
  document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
}

// colourClass is the class of colour c (0–255) as foreground or background ("fg", "bg").
function colourClass(c, layer) {
  if (c < 16) return `ansi-${c >= 8 ? "bright-" : ""}${NAMES[c % 8]}-${layer}`;
  return `ansi-${layer}-${c}`;
}

// extended reads a 38/48 colour (5;n or 2;r;g;b) from codes at i; it answers the colour
// ({i} or {rgb}) and how many codes it used after the 38 or 48.
function extended(codes, i) {
  if (codes[i + 1] === 5 && codes[i + 2] >= 0 && codes[i + 2] < 256) return [{ i: codes[i + 2] }, 2];
  if (codes[i + 1] === 2 && codes.length > i + 4) {
    const rgb = codes.slice(i + 2, i + 5).map((v) => Math.min(255, Math.max(0, v || 0)));
    return [{ rgb }, 4];
  }
  return [null, codes[i + 1] === 5 ? 2 : codes[i + 1] === 2 ? 4 : 1];
}

// sgr applies the codes of one SGR sequence to the state s.
function sgr(s, codes) {
  for (let i = 0; i < codes.length; i++) {
    const c = codes[i];
    if (c === 0 || Number.isNaN(c)) Object.assign(s, { b: 0, d: 0, it: 0, u: 0, st: 0, fg: null, bg: null });
    else if (c === 1) s.b = 1;
    else if (c === 2) s.d = 1;
    else if (c === 3) s.it = 1;
    else if (c === 4) s.u = 1;
    else if (c === 9) s.st = 1;
    else if (c === 22) { s.b = 0; s.d = 0; }
    else if (c === 23) s.it = 0;
    else if (c === 24) s.u = 0;
    else if (c === 29) s.st = 0;
    else if (c >= 30 && c <= 37) s.fg = { i: c - 30 };
    else if (c >= 90 && c <= 97) s.fg = { i: c - 90 + 8 };
    else if (c >= 40 && c <= 47) s.bg = { i: c - 40 };
    else if (c >= 100 && c <= 107) s.bg = { i: c - 100 + 8 };
    else if (c === 39) s.fg = null;
    else if (c === 49) s.bg = null;
    else if (c === 38 || c === 48) {
      const [col, used] = extended(codes, i);
      if (col) s[c === 38 ? "fg" : "bg"] = col;
      i += used;
    }
  }
}

// Escape sequences: CSI (SGR is the one kept), OSC (to BEL or ST), and two-character ones.
const ESC = /\x1b\[([0-9;:]*)([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?/g;

// ansiSegments splits output into runs of text with one style each: {text, cls, style}.
export function ansiSegments(text) {
  const out = [], s = { b: 0, d: 0, it: 0, u: 0, st: 0, fg: null, bg: null };
  let last = 0;
  const push = (t) => {
    if (!t) return;
    const cls = [], style = {};
    if (s.b) cls.push("ansi-bold");
    if (s.d) cls.push("ansi-dim");
    if (s.it) cls.push("ansi-italic");
    if (s.u) cls.push("ansi-underline");
    if (s.st) cls.push("ansi-strike");
    for (const [layer, col, prop] of [["fg", s.fg, "color"], ["bg", s.bg, "backgroundColor"]]) {
      if (!col) continue;
      if (col.rgb) style[prop] = `rgb(${col.rgb.join(",")})`;
      else cls.push(colourClass(col.i, layer));
    }
    out.push({ text: t, cls: cls.join(" "), style: Object.keys(style).length ? style : null });
  };
  for (const m of text.matchAll(ESC)) {
    push(text.slice(last, m.index));
    last = m.index + m[0].length;
    if (m[2] === "m") sgr(s, m[1].split(/[;:]/).map((x) => (x === "" ? 0 : Number(x))));
  }
  push(text.slice(last));
  return out;
}

// Ansi renders terminal output as spans (plain text runs stay text nodes).
export function Ansi({ text }) {
  ensureSheet();
  return ansiSegments(text).map((g, i) => (g.cls || g.style
    ? h("span", { key: i, class: g.cls || undefined, style: g.style || undefined }, g.text) : g.text));
}
