// noveld's live-stories page: polls the read-only JSON API and redraws. Every piece of data
// goes into the page through textContent or an SVG attribute, never as markup.
"use strict";

const EVERY_MS = 3000;
const HISTORY = 40; // sizes kept per story across polls (the growth line when the API has none)
const SVG = "http://www.w3.org/2000/svg";
const history = new Map(); // uid -> [[time ms, size], ...]
const span = { window: null, bucket: null }; // seconds of document time: "recent", one bucket

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  return e;
}

function fmtInt(n) {
  return n === null || n === undefined ? "—" : Math.round(n).toLocaleString("en-US");
}

function fmtTime(iso) {
  if (!iso) return null;
  const d = new Date(iso);
  if (isNaN(d)) return String(iso);
  return d.toISOString().slice(0, 19).replace("T", " ") + " UTC";
}

function fmtSpan(s) {
  // a span of document time: "3 h", "90 min", "7 d"
  if (!s) return null;
  if (s % 86400 === 0 && s > 3 * 86400) return `${s / 86400} d`;
  if (s % 3600 === 0) return `${s / 3600} h`;
  if (s % 60 === 0) return `${s / 60} min`;
  return `${s} s`;
}

function fmtPer(s) {
  // one bucket: "hour", "15 min"
  const unit = { 60: "minute", 3600: "hour", 86400: "day" }[s];
  return unit || fmtSpan(s);
}

function remember(uid, size, now) {
  let h = history.get(uid);
  if (!h) history.set(uid, (h = []));
  h.push([now, size]);
  if (h.length > HISTORY) h.shift();
}

function growth(story) {
  // the API's docs per time bucket, else the sizes this page saw
  if (story.sparkline && story.sparkline.length > 1) {
    const n = story.sparkline.length, per = fmtPer(span.bucket);
    const kind = per ? `per ${per}, last ${fmtSpan(n * span.bucket)}` : "per time bucket";
    return { points: story.sparkline, kind, counts: true };
  }
  const h = history.get(story.uid) || [];
  return { points: h.map((p) => p[1]), kind: "size since this page opened", counts: false };
}

function recent(story) {
  if (story.recent !== null && story.recent !== undefined) return fmtInt(story.recent);
  const h = history.get(story.uid) || [];
  if (h.length < 2) return "—";
  const d = h[h.length - 1][1] - h[0][1];
  return (d >= 0 ? "+" : "") + fmtInt(d);
}

function sparkline(g, w, h) {
  const s = svg("svg", {
    class: "spark", width: w, height: h, viewBox: `0 0 ${w} ${h}`, preserveAspectRatio: "none", role: "img",
  });
  const title = svg("title");
  title.textContent = `growth: ${g.counts ? "documents " : ""}${g.kind}` + (g.counts ? ` (at most ${Math.max(...g.points)})` : "");
  s.appendChild(title);
  const pts = g.points;
  if (pts.length < 2) {
    const t = svg("text", { x: 0, y: h - 4, class: "none" });
    t.textContent = "collecting…";
    s.appendChild(t);
    return s;
  }
  const lo = g.counts ? 0 : Math.min(...pts), hi = Math.max(...pts); // counts: from zero
  if (hi === lo) s.classList.add("flat");
  const span = hi - lo || 2; // flat: a line at mid-height
  const base = hi === lo ? h / 2 : h - 2;
  const xy = pts.map((v, i) => [(i / (pts.length - 1)) * (w - 2) + 1, base - ((v - lo) / span) * (h - 4)]);
  const line = xy.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" ");
  s.appendChild(svg("polygon", { class: "area", points: `1,${h - 1} ${line} ${w - 1},${h - 1}` }));
  s.appendChild(svg("polyline", { class: "line", points: line }));
  return s;
}

function terms(list, max) {
  const box = el("div", "terms");
  for (const [term, weight] of (list || []).slice(0, max)) {
    const t = el("span", "term", term);
    t.title = `${(weight * 100).toFixed(1)} % of the story's words`;
    box.appendChild(t);
  }
  return box;
}

function exemplars(list) {
  // with their text: one line each; ids alone: one line for all
  const shown = (list || []).slice(0, 3);
  if (!shown.some((ex) => ex.text)) return el("div", "meta ids", "documents " + shown.map((ex) => ex.id).join(", "));
  const ul = el("ul", "exemplars");
  for (const ex of shown) {
    const li = el("li");
    if (ex.text) li.appendChild(el("span", "text", ex.text + " "));
    li.appendChild(el("span", "id", ex.id));
    ul.appendChild(li);
  }
  return ul;
}

function card(b) {
  const c = el("article", b.live ? "card" : "card gone");
  c.dataset.uid = b.uid;
  const top = el("div", "top");
  top.appendChild(el("span", "name", b.uid));
  if (b.label) top.appendChild(el("span", "label", b.label));
  const size = el("span", "size", fmtInt(b.size));
  size.appendChild(el("small", null, b.live ? "docs" : "ended"));
  top.appendChild(size);
  c.appendChild(top);
  c.appendChild(terms(b.top_terms, 6));
  const g = growth(b);
  c.appendChild(sparkline(g, 256, 34));
  if (g.counts) c.appendChild(el("div", "meta axis", `documents ${g.kind} · ${recentText(b)}`));
  const born = fmtTime(b.born_at) || fmtTime(b.noticed_at);
  const meta = [born ? `born ${born}` : "born before this process's records"];
  const seen = fmtTime(b.last_seen);
  if (seen && seen !== born) meta.push(`last document ${seen}`);
  if (b.founding_doc_id && !(b.exemplars || []).some((ex) => ex.id === b.founding_doc_id)) {
    meta.push(`first document ${b.founding_doc_id}`);
  }
  c.appendChild(el("div", "meta", meta.join(" · ")));
  if (b.exemplars && b.exemplars.length) c.appendChild(exemplars(b.exemplars));
  return c;
}

function recentText(s) {
  const w = fmtSpan(span.window);
  return `${recent(s)} in the last ${w || "window"}`;
}

function drawEmerging(births) {
  // the newest live births, those growing most now first (a birth is 3 documents or so: the
  // ones that keep gathering more are the news)
  const box = document.getElementById("emerging");
  const newest = births.filter((b) => b.live).slice(0, 24);
  const now = (b) => (b.recent === null || b.recent === undefined ? -1 : b.recent);
  const shown = newest
    .map((b, i) => [b, i])
    .sort((x, y) => now(y[0]) - now(x[0]) || y[0].size - x[0].size || x[1] - y[1])
    .slice(0, 8)
    .map((x) => x[0]);
  box.replaceChildren(...(shown.length ? shown.map(card) : [el("p", "empty", "No story born yet.")]));
}

function drawLargest(stories) {
  const body = document.querySelector("#largest tbody");
  if (!stories.length) {
    const td = el("td", "empty", "No live story yet.");
    td.colSpan = 6;
    const tr = el("tr");
    tr.appendChild(td);
    body.replaceChildren(tr);
    return;
  }
  body.replaceChildren(
    ...stories.map((s, i) => {
      const tr = el("tr");
      tr.dataset.uid = s.uid;
      tr.appendChild(el("td", "num", i + 1));
      const name = el("td", "story", s.uid);
      if (s.label) name.appendChild(el("span", "label", s.label));
      tr.appendChild(name);
      tr.appendChild(el("td", "num size", fmtInt(s.size)));
      tr.appendChild(el("td", "num", recent(s)));
      const g = el("td");
      g.appendChild(sparkline(growth(s), 120, 24));
      tr.appendChild(g);
      const t = el("td");
      t.appendChild(terms(s.top_terms, 8));
      const said = (s.exemplars || []).find((ex) => ex.text);
      if (said) t.appendChild(el("div", "meta exemplar", said.text));
      tr.appendChild(t);
      return tr;
    }),
  );
}

const BUCKETS = [5, 15, 30, 60, 300, 900, 3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400].map((s) => s * 1000);
const MIN_SLOTS = 24; // a short history still reads as a timeline, not one wide block

function drawTimeline(births) {
  const box = document.getElementById("timeline");
  const times = births.map((b) => Date.parse(b.born_at || b.noticed_at || "")).filter((t) => !isNaN(t));
  if (!times.length) {
    box.replaceChildren(el("p", "empty", "No birth with a known time yet."));
    return;
  }
  const lo = Math.min(...times), hi = Math.max(...times);
  const step = BUCKETS.find((b) => (hi - lo) / b <= 40) || BUCKETS[BUCKETS.length - 1];
  const first = Math.floor(lo / step) * step;
  const n = Math.floor((hi - first) / step) + 1;
  const slots = Math.max(n, MIN_SLOTS);
  const counts = new Array(n).fill(0);
  for (const t of times) counts[Math.floor((t - first) / step)] += 1;
  const w = 960, h = 90, top = Math.max(...counts), bw = (w - 20) / slots;
  const s = svg("svg", {
    width: "100%", height: h + 18, viewBox: `0 0 ${w} ${h + 18}`, preserveAspectRatio: "xMinYMax meet", role: "img",
  });
  const title = svg("title");
  title.textContent = `${times.length} births, ${step >= 60000 ? step / 60000 + " min" : step / 1000 + " s"} per bar`;
  s.appendChild(title);
  s.appendChild(svg("line", { class: "base", x1: 10, x2: w - 10, y1: h, y2: h }));
  counts.forEach((c, i) => {
    if (!c) return;
    const bh = Math.max(2, (c / top) * (h - 16));
    const x = 10 + i * bw + 1;
    const r = svg("rect", { class: "bar", x, y: h - bh, width: Math.max(1, bw - 2), height: bh });
    const tip = svg("title");
    tip.textContent = `${c} born from ${fmtTime(new Date(first + i * step).toISOString())}`;
    r.appendChild(tip);
    s.appendChild(r);
    if (bw >= 18) {
      const label = svg("text", { class: "axis", x: x + (bw - 2) / 2, y: h - bh - 3, "text-anchor": "middle" });
      label.textContent = String(c);
      s.appendChild(label);
    }
  });
  const left = svg("text", { class: "axis", x: 10, y: h + 14 });
  left.textContent = fmtTime(new Date(first).toISOString());
  const right = svg("text", { class: "axis", x: w - 10, y: h + 14, "text-anchor": "end" });
  right.textContent = fmtTime(new Date(first + slots * step).toISOString());
  s.append(left, right);
  box.replaceChildren(s);
}

function drawStatus(st) {
  span.window = st.recent_window_s || null;
  span.bucket = st.bucket_s || null;
  const w = fmtSpan(span.window), per = fmtPer(span.bucket);
  document.getElementById("recent-head").textContent = w ? `last ${w}` : "recent";
  document.getElementById("growth-head").textContent = per ? `docs per ${per}` : "growth";
  document.getElementById("where").textContent =
    `namespace ${st.namespace}` + (st.model ? ` · ${st.model}` : "") +
    (st.likelihood ? ` (${st.likelihood})` : "") + ` · from ${st.source}`;
  const items = [
    ["documents", fmtInt(st.docs)],
    ["docs / s", st.docs_per_s === null ? "—" : st.docs_per_s.toLocaleString("en-US")],
    ["live stories", fmtInt(st.clusters)],
    ["births", fmtInt(st.births)],
    ["lag (messages)", fmtInt(st.lag_messages)],
    ["last commit", st.last_commit_age_s === null ? "—" : `${Math.round(st.last_commit_age_s)} s ago`],
  ];
  document.getElementById("status").replaceChildren(
    ...items.map(([k, v]) => {
      const d = el("div");
      d.dataset.key = k;
      d.append(el("dt", null, k), el("dd", null, v));
      return d;
    }),
  );
}

function problem(text) {
  const p = document.getElementById("problem");
  p.textContent = text || "";
  p.hidden = !text;
}

async function api(path) {
  const r = await fetch(path, { credentials: "same-origin", cache: "no-store" });
  if (r.status === 401) throw new Error("This view needs its token: open it as /?token=YOUR_TOKEN.");
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || `${path}: HTTP ${r.status}`);
  return body;
}

async function poll() {
  try {
    const [st, b, s] = await Promise.all([api("/api/status"), api("/api/births?limit=100"), api("/api/stories?limit=25")]);
    const now = Date.now();
    const sizes = new Map([...b.births, ...s.stories].map((x) => [x.uid, x.size]));
    for (const [uid, size] of sizes) remember(uid, size, now);
    drawStatus(st);
    drawEmerging(b.births);
    drawLargest(s.stories);
    drawTimeline(b.births);
    problem(st.note || "");
    document.getElementById("updated").textContent = `updated ${new Date(now).toLocaleTimeString()}`;
    document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
  } catch (e) {
    problem(`Cannot refresh: ${e.message}`);
  }
}

document.getElementById("every").textContent = String(EVERY_MS / 1000);
poll();
setInterval(poll, EVERY_MS);
