// Foldline's status page: polls /api/status and draws the DAG and tables.
// Every value reaches the page as text (textContent), never as HTML.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const W = 220, H = 86, GAP_X = 60, GAP_Y = 22, PAD = 16;

function el(name, attrs, text) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function fmt(n) { return n === undefined || n === null ? "-" : String(n); }
function rate(r) { return (r || 0).toFixed(1); }
function age(seconds) {
  if (seconds === undefined || seconds === null) return "-";
  const s = Math.max(0, Math.round(seconds));
  if (s < 120) return s + "s";
  if (s < 7200) return Math.round(s / 60) + "m";
  if (s < 172800) return Math.round(s / 3600) + "h";
  return Math.round(s / 86400) + "d";
}
function since(time, now) {
  if (!time) return "-";
  return age((now - Date.parse(time)) / 1000) + " ago";
}

function backlog(stage) {
  return (stage.subscriptions || []).reduce((n, s) => n + (s.backlog || 0), 0);
}
function rateOut(stage) {
  return (stage.subscriptions || []).reduce((n, s) => n + (s.rateOut || 0), 0);
}

// layout places the ledger, the stages and the views in columns by depth.
function layout(report) {
  const nodes = new Map();
  const add = (id, kind, depth, data) => { nodes.set(id, { id, kind, depth, data }); };
  add("ledger", "ledger", 0, null);
  const depth = new Map([["ledger", 0]]);
  for (const st of report.stages) { // upstream first
    let d = 0;
    for (const up of st.upstream) d = Math.max(d, (depth.get(up) || 0) + 1);
    depth.set(st.name, d);
    add(st.name, st.kind, d, st);
  }
  for (const v of report.views) {
    const sink = report.stages.find(s => s.view === v.view);
    add("view:" + v.view, "view", sink ? depth.get(sink.name) + 1 : 1, v);
  }
  const columns = new Map();
  for (const n of nodes.values()) {
    if (!columns.has(n.depth)) columns.set(n.depth, []);
    const col = columns.get(n.depth);
    n.x = PAD + n.depth * (W + GAP_X);
    n.y = PAD + col.length * (H + GAP_Y);
    col.push(n);
  }
  const edges = [];
  for (const st of report.stages) {
    for (const up of st.upstream) edges.push([up, st.name]);
    if (st.view) edges.push([st.name, "view:" + st.view]);
  }
  let maxDepth = 0, maxRows = 0;
  for (const [d, col] of columns) { maxDepth = Math.max(maxDepth, d); maxRows = Math.max(maxRows, col.length); }
  return { nodes, edges, width: 2 * PAD + (maxDepth + 1) * W + maxDepth * GAP_X, height: 2 * PAD + maxRows * H + (maxRows - 1) * GAP_Y };
}

function lines(n, report, now) {
  if (n.kind === "ledger") {
    const first = report.stages.filter(s => s.upstream.includes("ledger"));
    return [["title", "ledger"], ["topics", "read by " + first.map(s => s.name).join(", ")]];
  }
  if (n.kind === "view") {
    const v = n.data;
    return [
      ["title", v.view],
      ["table", v.table || "not deployed"],
      ["rows", "rows (est.) " + fmt(v.rowsEstimated) + ", backlog " + fmt(v.backlog)],
      ["freshness", (v.ageSeconds === undefined || v.ageSeconds === null ? "" : "event " + age(v.ageSeconds) + " old, ") + "applied " + since(v.lastApplied, now)],
    ];
  }
  const st = n.data;
  return [
    ["title", st.name],
    ["running", st.running + "/" + st.instances + " running" + (st.restarts ? ", " + st.restarts + " restarts" : "")],
    ["processed", "processed " + st.processed + ", errors " + st.errors],
    ["backlog", "backlog " + backlog(st) + ", " + rate(rateOut(st)) + "/s"],
  ];
}

function drawDAG(report, now) {
  const svg = document.getElementById("dag");
  const { nodes, edges, width, height } = layout(report);
  svg.replaceChildren();
  svg.setAttribute("viewBox", "0 0 " + width + " " + height);
  svg.setAttribute("height", height);
  const defs = el("defs");
  const marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" });
  marker.appendChild(el("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#8a94a3" }));
  defs.appendChild(marker);
  svg.appendChild(defs);
  for (const [from, to] of edges) {
    const a = nodes.get(from), b = nodes.get(to);
    if (!a || !b) continue;
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
    svg.appendChild(el("path", { class: "edge", "data-from": from, "data-to": to, d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}` }));
  }
  for (const n of nodes.values()) {
    const cls = ["node", n.kind];
    if (n.data && n.kind !== "view" && n.data.running < n.data.instances) cls.push("down");
    if (n.data && n.kind !== "view" && backlog(n.data) > 0) cls.push("behind");
    const g = el("g", { class: cls.join(" "), "data-kind": n.kind === "view" ? "view" : (n.kind === "ledger" ? "ledger" : "stage"), "data-name": n.kind === "view" ? n.data.view : n.id, transform: `translate(${n.x},${n.y})` });
    g.appendChild(el("rect", { width: W, height: H }));
    lines(n, report, now).forEach(([field, text], i) => {
      g.appendChild(el("text", { x: 10, y: 20 + i * 18, class: i === 0 ? "title" : "", "data-field": field }, text));
    });
    if (n.kind !== "ledger" && n.kind !== "view") {
      g.dataset.processed = String(n.data.processed);
      g.dataset.backlog = String(backlog(n.data));
    }
    if (n.kind === "view") g.dataset.rowsEstimated = String(n.data.rowsEstimated);
    svg.appendChild(g);
  }
}

function drawStages(report) {
  const tbody = document.querySelector("#stages tbody");
  tbody.replaceChildren();
  for (const st of report.stages) {
    const tr = document.createElement("tr");
    tr.dataset.stage = st.name;
    cell(tr, st.name);
    cell(tr, st.kind);
    cell(tr, st.upstream.join(", "));
    cell(tr, st.running + "/" + st.instances, "num");
    cell(tr, st.restarts, "num");
    cell(tr, st.processed, "num");
    cell(tr, st.errors, "num");
    cell(tr, backlog(st), "num");
    cell(tr, rate(rateOut(st)), "num");
    cell(tr, (st.instanceList || []).map(i => "#" + i.id + (i.running ? " running" : " stopped") + (i.error ? ": " + i.error : "")).join("; "));
    tbody.appendChild(tr);
  }
}

function drawViews(report, now) {
  const tbody = document.querySelector("#views tbody");
  tbody.replaceChildren();
  for (const v of report.views) {
    const tr = document.createElement("tr");
    tr.dataset.view = v.view;
    cell(tr, v.view);
    cell(tr, v.table ? v.keyspace + "." + v.table : "-");
    cell(tr, fmt(v.rowsEstimated), "num");
    cell(tr, fmt(v.backlog), "num");
    cell(tr, v.newestEvent || "-");
    cell(tr, age(v.ageSeconds));
    cell(tr, since(v.lastApplied, now));
    cell(tr, fmt(v.skipped), "num");
    cell(tr, fmt(v.rejected), "num");
    cell(tr, (v.versions || []).map(x => x.table + " (" + x.state + ")").join(", ") + (v.error ? " — " + v.error : ""));
    tbody.appendChild(tr);
  }
}

function drawBackfills(report) {
  const section = document.getElementById("backfills-section");
  const box = document.getElementById("backfills");
  const list = report.backfills || [];
  section.hidden = list.length === 0;
  box.replaceChildren();
  for (const b of list) {
    const div = document.createElement("div");
    div.dataset.backfill = b.view;
    const title = document.createElement("p");
    title.textContent = b.view + " → " + b.table + " (" + b.state + (b.until ? ", until " + b.until : "") + "), " + Math.round(b.elapsedSeconds) + " s" + (b.caughtUp ? ", caught up" : "");
    div.appendChild(title);
    for (const s of b.stages || []) {
      const p = document.createElement("p");
      const bar = document.createElement("span");
      bar.className = "bar";
      const fill = document.createElement("span");
      const pct = s.total > 0 ? Math.max(0, Math.min(100, 100 * s.done / s.total)) : 0;
      fill.style.width = pct + "%";
      bar.appendChild(fill);
      const label = document.createElement("span");
      label.textContent = " " + s.name + " " + pct.toFixed(1) + "% (" + s.done + " of " + s.total + "), backlog " + fmt(s.backlog) + ", " + rate(s.ratePerSecond) + "/s" + (s.etaSeconds !== undefined ? ", ETA " + age(s.etaSeconds) : "");
      p.append(bar, label);
      div.appendChild(p);
    }
    box.appendChild(div);
  }
}

async function refresh() {
  let snap;
  try {
    const resp = await fetch("api/status", { cache: "no-store" });
    snap = await resp.json();
  } catch (e) {
    snap = { error: "the page cannot reach foldline ui: " + e };
  }
  const error = document.getElementById("error");
  error.hidden = !snap.error;
  error.textContent = snap.error || "";
  const report = snap.report;
  if (report) {
    const now = Date.parse(snap.at) || Date.now();
    document.getElementById("tenant").textContent = "— tenant " + report.tenant + ", keyspace " + report.keyspace;
    document.getElementById("meta").textContent = "status of " + new Date(report.at).toLocaleTimeString() + ", read every " + snap.intervalSeconds + " s";
    drawDAG(report, now);
    drawStages(report);
    drawViews(report, now);
    drawBackfills(report);
    document.body.dataset.updated = snap.at;
  }
  setTimeout(refresh, Math.max(500, (snap.intervalSeconds || 2) * 1000));
}

refresh();
