// slimvec report.html: plots, table, planner and notes from the JSON in #report-data.
// Hand-written SVG and DOM; no library, no network. The planner mirrors
// slimvec.planner.plan.make_plan and slimvec.planner.sizing.SizeModel (see data.py).
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("report-data").textContent);
  const ROWS = D.rows, FAC = D.facets;
  // the k of every "at k" metric on the page (data.py: null when the runs mix several k)
  const AT_K = "@" + (D.k === null || D.k === undefined ? "k" : D.k);
  const NULL = "\u2014";
  const SVGNS = "http://www.w3.org/2000/svg";
  const $ = (id) => document.getElementById(id);

  // ------------------------------------------------------------------ helpers
  function num(v) {
    if (v === null || v === undefined || typeof v === "boolean") return null;
    const x = Number(v);
    return Number.isFinite(x) ? x : null;
  }
  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    if (attrs) for (const k in attrs) { if (attrs[k] !== undefined && attrs[k] !== null) e.setAttribute(k, attrs[k]); }
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function sv(tag, attrs, text) {
    const e = document.createElementNS(SVGNS, tag);
    if (attrs) for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  // same as report.human_bytes
  function humanBytes(n) {
    if (n === null || n === undefined) return NULL;
    let v = Number(n);
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    for (const u of units) {
      if (Math.abs(v) < 1024 || u === "TiB") return u === "B" ? v.toFixed(0) + " B" : v.toFixed(1) + " " + u;
      v /= 1024;
    }
    return v.toFixed(1) + " TiB";
  }
  function fmt(v, dec) {
    if (v === null || v === undefined) return NULL;
    if (typeof v === "boolean") return v ? "yes" : "no";
    if (typeof v === "number") {
      if (!Number.isFinite(v)) return NULL;
      if (dec === 0) return Math.round(v).toLocaleString("en-US");
      return v.toFixed(dec);
    }
    return String(v);
  }
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                   "#bcbd22", "#17becf", "#393b79", "#ad494a", "#637939", "#8c6d31", "#7b4173", "#3182bd"];
  const familyColor = {};
  [...new Set(FAC.map((f) => f.family))].sort((a, b) => (a === "none" ? -1 : b === "none" ? 1 : a.localeCompare(b)))
    .forEach((f, i) => { familyColor[f] = f === "none" ? "#111111" : PALETTE[i % PALETTE.length]; });

  // ------------------------------------------------------------------ sources
  (function sources() {
    const box = $("sources");
    for (const s of D.sources) {
      const d = el("div", { class: "src" });
      d.append(el("b", null, s.label), document.createTextNode(`: ${s.n_rows} rows from ${s.path}`
        + (s.wall_s ? `, ${s.wall_s} s wall` : "") + (s.datasets && s.datasets.length ? `, datasets ${s.datasets.map((x) => `${x.name} (${fmt(x.n_corpus, 0)} vectors of ${x.dim} dims)`).join("; ")}` : "")));
      if (s.command) {
        const det = el("details"); det.append(el("summary", null, "command"), el("code", null, s.command));
        d.append(det);
      }
      box.append(d);
    }
  })();

  // ------------------------------------------------------------------ filters
  const FILTERS = [["family", "reducer family"], ["store_name", "store"], ["quant", "quantization"],
                   ["rescoring", "rescoring"], ["role", "row kind"]];
  if (D.sources.length > 1) FILTERS.push(["source", "run"]);
  const datasetsAll = [...new Set(ROWS.map((r) => String(r.dataset)))];
  if (datasetsAll.length > 1) FILTERS.push(["dataset", "dataset"]);
  function facet(i, key) {
    if (key === "source") return String(ROWS[i].source);
    if (key === "dataset") return String(ROWS[i].dataset);
    return String(FAC[i][key]);
  }
  const selected = {};
  for (const [key] of FILTERS) selected[key] = new Set(ROWS.map((_, i) => facet(i, key)));
  function visible(i) {
    for (const [key] of FILTERS) if (!selected[key].has(facet(i, key))) return false;
    return true;
  }
  function buildFilters() {
    const box = $("filters");
    box.textContent = "";
    for (const [key, title] of FILTERS) {
      const counts = {};
      ROWS.forEach((_, i) => { const v = facet(i, key); counts[v] = (counts[v] || 0) + 1; });
      const name = el("div", { class: "fname" }, title);
      const vals = el("div", { "data-filter": key });
      for (const v of Object.keys(counts).sort()) {
        const chip = el("span", { class: "chip " + (selected[key].has(v) ? "on" : "off"), "data-value": v });
        if (key === "family") { const sw = el("span", { class: "sw" }); sw.style.cssText = `display:inline-block;width:8px;height:8px;border-radius:50%;margin-right:4px;background:${familyColor[v]}`; chip.append(sw); }
        chip.append(document.createTextNode(v), el("span", { class: "n" }, String(counts[v])));
        const only = el("span", { class: "only", title: "only this value" }, "only");
        chip.append(only);
        chip.addEventListener("click", (ev) => {
          if (ev.target === only) { selected[key] = new Set([v]); }
          else if (selected[key].has(v)) selected[key].delete(v); else selected[key].add(v);
          update();
        });
        vals.append(chip);
      }
      const all = el("span", { class: "linkbtn" }, "all");
      all.addEventListener("click", () => { selected[key] = new Set(Object.keys(counts)); update(); });
      vals.append(all);
      box.append(name, vals);
    }
  }

  // ------------------------------------------------------------------ plots
  const metricSel = $("metric");
  for (const [key, title] of D.metrics) {
    const o = el("option", { value: key }, title);
    metricSel.append(o);
  }
  // the default y-axis: a metric that tells the rows apart (data.default_metric says which and why)
  const DEF = D.default_metric || { key: D.metrics[0][0], reason: "" };
  const metricTitle = (k) => (D.metrics.find(([m]) => m === k) || [k, k])[1];
  metricSel.value = DEF.key;
  function metricWhy() {
    const k = metricSel.value;
    $("metric-why").textContent = k === DEF.key ? `y-axis: ${metricTitle(k)}, chosen because ${DEF.reason}`
      : `y-axis: ${metricTitle(k)}, chosen by hand (the default, ${metricTitle(DEF.key)}, because ${DEF.reason})`;
  }
  metricSel.addEventListener("change", update);
  $("ymin").addEventListener("input", update);

  function niceStep(span, target) {
    const raw = span / Math.max(target, 1);
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const m = raw / p;
    return (m < 1.5 ? 1 : m < 3 ? 2 : m < 7 ? 5 : 10) * p;
  }
  function linTicks(lo, hi) {
    const step = niceStep(hi - lo, 5);
    const out = [];
    for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toFixed(10));
    return { ticks: out, step };
  }
  function logTicks(lo, hi, base2) {
    const out = [];
    if (base2) {
      let a = Math.floor(Math.log2(lo)), b = Math.ceil(Math.log2(hi));
      const stride = Math.max(1, Math.ceil((b - a) / 7));
      for (let e = a; e <= b; e += stride) out.push(Math.pow(2, e));
    } else {
      let a = Math.floor(Math.log10(lo)), b = Math.ceil(Math.log10(hi));
      const mult = (b - a) <= 2 ? [1, 2, 5] : [1];
      for (let e = a; e <= b; e++) for (const m of mult) out.push(m * Math.pow(10, e));
    }
    return out.filter((v) => v >= lo * 0.999 && v <= hi * 1.001);
  }
  function bytesLabel(v) {
    if (v >= 1024 * 1024) return (v / 1048576) + " Mi";
    if (v >= 1024) return (v / 1024) + " Ki";
    return String(v);
  }
  function msLabel(v) { return v >= 1 ? String(+v.toFixed(3)) : String(+v.toPrecision(2)); }

  // Pareto front as pareto_front in report.py: sorted by x asc (y desc), keep rows raising the best y
  function front(idx, xk, yk) {
    const s = idx.slice().sort((a, b) => (num(ROWS[a][xk]) - num(ROWS[b][xk])) || (num(ROWS[b][yk]) - num(ROWS[a][yk])));
    const out = []; let best = -Infinity;
    for (const i of s) { const y = num(ROWS[i][yk]); if (y > best) { out.push(i); best = y; } }
    return out;
  }

  function markShape(g, role, x, y, color, i) {
    let m;
    if (role === "peer") {
      m = sv("rect", { x: x - 4.5, y: y - 4.5, width: 9, height: 9 });
    } else if (role === "full") {
      m = sv("path", { d: `M${x},${y - 7}L${x + 7},${y}L${x},${y + 7}L${x - 7},${y}Z` });
    } else {
      m = sv("circle", { cx: x, cy: y, r: 4.2 });
    }
    const rescored = FAC[i].rescoring !== "none";
    m.setAttribute("class", `mark role-${role}` + (rescored ? " rescored" : ""));
    if (rescored) {  // hollow: the same index re-ranked with full vectors sits at the same bytes
      m.setAttribute("fill", "#ffffff"); m.setAttribute("fill-opacity", "0");
      m.style.stroke = color;  // inline: the stylesheet's white outline is for filled marks
    } else {
      m.setAttribute("fill", color);
      m.setAttribute("fill-opacity", role === "reduced" ? "0.78" : "1");
    }
    m.setAttribute("data-i", String(i));
    m.addEventListener("mouseenter", (ev) => showTip(ev, i));
    m.addEventListener("mousemove", moveTip);
    m.addEventListener("mouseleave", hideTip);
    m.addEventListener("click", () => jumpToRow(i));
    g.append(m);
  }

  // The fronts' marks carry their configuration's name. Each label is tried above-right,
  // below-right, above-left and below-left of its mark; one whose box would leave the plot or
  // overlap a label already placed is dropped (the mark's tooltip still names it).
  function placeLabels(g, items, box) {
    const placed = [];
    const hit = (a, b) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
    for (const [px, py, name] of items) {
      const t = sv("text", { class: "mark-label", "font-size": "10" }, name);
      g.append(t);
      let ok = false;
      for (const [dx, dy, anchor] of [[6, -6, "start"], [6, 14, "start"], [-6, -6, "end"], [-6, 14, "end"]]) {
        t.setAttribute("x", px + dx); t.setAttribute("y", py + dy); t.setAttribute("text-anchor", anchor);
        const b = t.getBBox();
        if (b.x < box.x0 || b.x + b.width > box.x1 || b.y < box.y0 || b.y + b.height > box.y1) continue;
        if (placed.some((p) => hit(p, b))) continue;
        placed.push({ x: b.x, y: b.y, width: b.width, height: b.height }); ok = true; break;
      }
      if (!ok) t.remove();
    }
    g.setAttribute("data-dropped", String(items.length - placed.length));
  }

  function drawPlot(svg, xk, xTitle, base2, yk, yTitle, idxAll) {
    const W = 600, H = 400, L = 62, R = 18, T = 14, B = 46;
    svg.setAttribute("width", W); svg.setAttribute("height", H);
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.textContent = "";
    const idx = idxAll.filter((i) => { const x = num(ROWS[i][xk]); return x !== null && x > 0 && num(ROWS[i][yk]) !== null; });
    svg.setAttribute("data-marks", String(idx.length));
    if (!idx.length) {
      svg.append(sv("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty" }, `no selected row has both ${xTitle} and ${yTitle}`));
      return idx.length;
    }
    const xs = idx.map((i) => num(ROWS[i][xk])), ys = idx.map((i) => num(ROWS[i][yk]));
    let x0 = Math.log10(Math.min(...xs)), x1 = Math.log10(Math.max(...xs));
    if (x1 - x0 < 0.3) { x0 -= 0.15; x1 += 0.15; }
    const xpad = (x1 - x0) * 0.05; x0 -= xpad; x1 += xpad;
    const yFloor = num($("ymin").value.trim() === "" ? null : $("ymin").value);
    let y0 = Math.min(...ys), y1 = Math.max(...ys);
    if (yFloor !== null && yFloor < y1 && yFloor > y0) {
      y0 = yFloor; y1 += (y1 - y0) * 0.06;
    } else {
      if (y1 - y0 < 0.02) { y0 -= 0.01; y1 += 0.01; }
      const ypad = (y1 - y0) * 0.06; y0 -= ypad; y1 += ypad;
    }
    const X = (v) => L + (Math.log10(v) - x0) / (x1 - x0) * (W - L - R);
    const Y = (v) => T + (1 - (v - y0) / (y1 - y0)) * (H - T - B);
    const grid = sv("g", { class: "grid" }), axis = sv("g", { class: "axis" });
    const xt = logTicks(Math.pow(10, x0), Math.pow(10, x1), base2);
    for (const v of xt) {
      const px = X(v);
      grid.append(sv("line", { x1: px, x2: px, y1: T, y2: H - B }));
      axis.append(sv("line", { x1: px, x2: px, y1: H - B, y2: H - B + 4 }));
      axis.append(sv("text", { x: px, y: H - B + 16, "text-anchor": "middle" }, base2 ? bytesLabel(v) : msLabel(v)));
    }
    const { ticks: yt, step } = linTicks(y0, y1);
    const ydec = Math.max(0, Math.min(4, -Math.floor(Math.log10(step))));
    for (const v of yt) {
      const py = Y(v);
      grid.append(sv("line", { x1: L, x2: W - R, y1: py, y2: py }));
      axis.append(sv("line", { x1: L - 4, x2: L, y1: py, y2: py }));
      axis.append(sv("text", { x: L - 7, y: py + 4, "text-anchor": "end" }, v.toFixed(ydec)));
    }
    axis.append(sv("path", { d: `M${L},${T}V${H - B}H${W - R}`, fill: "none" }));
    axis.append(sv("text", { x: L + (W - L - R) / 2, y: H - 8, "text-anchor": "middle", class: "title" }, xTitle));
    axis.append(sv("text", { x: 14, y: T + (H - T - B) / 2, "text-anchor": "middle", class: "title", transform: `rotate(-90 14 ${T + (H - T - B) / 2})` }, yTitle));
    svg.append(grid, axis);
    const clipId = svg.id + "-clip";
    const defs = sv("defs"), clip = sv("clipPath", { id: clipId });
    clip.append(sv("rect", { x: L - 8, y: T - 8, width: W - L - R + 16, height: H - T - B + 8 }));
    defs.append(clip); svg.append(defs);
    // fronts, one per (run, dataset, footing): a re-ranked row never competes with rows that were
    // not re-ranked (ranking.equal_footing, issue 28)
    const groups = {};
    for (const i of idx) {
      const k = ROWS[i].source + " / " + ROWS[i].dataset + (FAC[i].reranked ? " / re-ranked" : " / not re-ranked");
      (groups[k] = groups[k] || []).push(i);
    }
    const dashes = ["", "6 3", "2 3", "8 3 2 3"];
    const labels = sv("g", { class: "labels", "clip-path": `url(#${clipId})` });
    const named = [];  // [x, y, name] of the fronts' marks, labelled by placeLabels
    Object.keys(groups).forEach((k, gi) => {
      const f = front(groups[k], xk, yk);
      for (const i of f) named.push([X(num(ROWS[i][xk])), Y(num(ROWS[i][yk])), FAC[i].label.replace(" → ", "→")]);
      let d = "";
      f.forEach((i, j) => {
        const px = X(num(ROWS[i][xk])), py = Y(num(ROWS[i][yk]));
        if (j === 0) d += `M${px},${py}`; else d += `H${px}V${py}`;
      });
      if (f.length) d += `H${W - R}`;
      const p = sv("path", { d, class: "front", "clip-path": `url(#${clipId})`, stroke: "#444", "stroke-dasharray": dashes[gi % dashes.length], "data-front": String(f.length) });
      const t = sv("title", {}, `Pareto front (${k}): ${f.length} configurations`);
      p.append(t);
      svg.append(p);
    });
    const marks = sv("g", { class: "marks", "clip-path": `url(#${clipId})` });
    // full-dimension and peer marks on top
    const order = idx.slice().sort((a, b) => (FAC[a].role === "reduced" ? 0 : 1) - (FAC[b].role === "reduced" ? 0 : 1));
    for (const i of order) markShape(marks, FAC[i].role, X(num(ROWS[i][xk])), Y(num(ROWS[i][yk])), familyColor[FAC[i].family], i);
    svg.append(labels);  // in the document, so that placeLabels can measure its texts
    placeLabels(labels, named, { x0: L, x1: W - R, y0: T, y1: H - B });
    svg.append(marks, labels);
    const below = ys.filter((v) => v < y0).length;
    if (below) svg.append(sv("text", { x: W - R, y: H - B - 6, "text-anchor": "end", class: "title" }, `${below} mark(s) below ${y0.toFixed(2)} hidden`));
    return idx.length;
  }

  function buildLegend() {
    const box = $("legend"); box.textContent = "";
    for (const f of Object.keys(familyColor)) {
      if (!FAC.some((x) => x.family === f)) continue;
      const s = el("span"); const sw = el("span", { class: "sw" }); sw.style.background = familyColor[f];
      s.append(sw, document.createTextNode(f === "none" ? "none (full dimension)" : f)); box.append(s);
    }
    const shapes = el("span", { class: "hint" }, "● reduced   ○ rescored (hollow)   ◆ full dimension   ■ peer baseline   — Pareto front (one per run × dataset × re-ranked or not)");
    box.append(shapes);
  }

  // ------------------------------------------------------------------ tooltip
  const tip = $("tooltip");
  function showTip(ev, i) {
    const r = ROWS[i];
    tip.textContent = "";
    tip.append(el("div", { class: "tt-title" }, `${FAC[i].label}  (${FAC[i].role})`));
    // a short card, not every field (the table below has them all; click the mark to go there)
    const t = el("table");
    const f = FAC[i];
    const n3 = (v) => (v === null || v === undefined ? NULL : Number(v).toFixed(3));
    const lines = [["run / dataset", `${r.source} / ${r.dataset}`],
                   ["bytes/vec", r.bytes_per_vector === null ? NULL : Number(r.bytes_per_vector).toFixed(1)
                     + (f.rescore_ram_per_vector ? ` + rescoring ${f.rescore_ram_per_vector} B RAM, ${f.rescore_disk_per_vector} B disk` : "")],
                   [`nbr R${AT_K} / task R${AT_K}`, `${n3(r.neighbor_recall_at_k)} / ${n3(r.task_recall_at_k)}`],
                   ["p50 ms", r.latency_p50_ms === null || r.latency_p50_ms === undefined ? NULL : Number(r.latency_p50_ms).toFixed(3)],
                   ["build it", f.build || ("not buildable: " + (f.why_not || "?"))]];
    for (const [k, s] of lines) { const tr = el("tr"); tr.append(el("td", null, k), el("td", null, s)); t.append(tr); }
    tip.append(t);
    tip.hidden = false;
    moveTip(ev);
  }
  function moveTip(ev) {
    const w = tip.offsetWidth, h = tip.offsetHeight;
    let x = ev.clientX + 14, y = ev.clientY + 12;
    if (x + w > window.innerWidth - 8) x = ev.clientX - w - 14;
    if (y + h > window.innerHeight - 8) y = Math.max(8, window.innerHeight - h - 8);
    tip.style.left = x + "px"; tip.style.top = y + "px";
  }
  function hideTip() { tip.hidden = true; }

  // ------------------------------------------------------------------ the table of rows
  const COLS = [
    ["source", "run", "s"], ["dataset", "dataset", "s"], ["_role", "kind", "s"], ["reducer", "reducer", "s"],
    ["dim_out", "dim", 0], ["store", "store", "s"], ["_quant", "quant", "s"], ["_rescoring", "rescoring", "s"],
    ["_rescore_ram", "+RAM B/vec (rescore ids)", 0], ["_rescore_disk", "+disk B/vec (rescore reads)", 0],
    ["bytes_per_vector", "bytes/vec", 1], ["index_bytes", "index", "bytes"], ["task_recall_at_k", "task R" + AT_K, 3],
    ["task_mrr_at_k", "MRR" + AT_K, 3], ["neighbor_recall_at_k", "nbr R" + AT_K, 3], ["sts_spearman", "STS ρ", 3],
    ["cluster_accuracy", "cluster acc", 3], ["routed_recall_at_k", "routed R" + AT_K, 3],
    ["latency_p50_ms", "p50 ms", 3], ["latency_p95_ms", "p95 ms", 3], ["latency_p99_ms", "p99 ms", 3],
    ["qps", "QPS", 0], ["fit_s", "fit s", 2], ["transform_s_per_10k", "transform s/10k", 3], ["build_s", "build s", 2],
  ].filter(([k]) => !(k === "source" && D.sources.length < 2));
  function cellValue(i, k) {
    if (k === "_role") return FAC[i].role;
    if (k === "_quant") return FAC[i].quant;
    if (k === "_rescoring") return FAC[i].rescoring;
    if (k === "_rescore_ram") return FAC[i].rescore_ram_per_vector || null;
    if (k === "_rescore_disk") return FAC[i].rescore_disk_per_vector || null;
    return ROWS[i][k];
  }
  let sortKey = "bytes_per_vector", sortDir = -1;
  const tableRows = [];
  function buildTable() {
    const t = $("rows-table"); t.textContent = "";
    const head = el("thead"), hr = el("tr");
    for (const [k, title, dec] of COLS) {
      const th = el("th", { "data-key": k, class: dec === "s" ? "" : "num" }, title);
      th.addEventListener("click", () => { if (sortKey === k) sortDir = -sortDir; else { sortKey = k; sortDir = dec === "s" ? 1 : -1; } renderTable(); });
      hr.append(th);
    }
    head.append(hr); t.append(head);
    const body = el("tbody"); t.append(body);
    ROWS.forEach((r, i) => {
      const tr = el("tr", { "data-i": String(i), class: "role-" + FAC[i].role });
      for (const [k, , dec] of COLS) {
        const v = cellValue(i, k);
        const td = el("td", { class: dec === "s" ? "" : "num" });
        if (k === "_role") {
          if (v !== "reduced") td.append(el("span", { class: "badge " + v }, v === "full" ? "full" : v));
          else td.textContent = "reduced";
        } else if (dec === "bytes") td.textContent = num(v) === null ? NULL : humanBytes(num(v));
        else if (dec === "s") td.textContent = v === null || v === undefined ? NULL : String(v);
        else td.textContent = fmt(num(v), dec);
        tr.append(td);
      }
      tableRows[i] = tr;
      body.append(tr);
    });
  }
  function renderTable() {
    const q = $("table-search").value.trim().toLowerCase();
    const body = $("rows-table").querySelector("tbody");
    const idx = ROWS.map((_, i) => i).filter((i) => visible(i) && (!q || (FAC[i].label + " " + ROWS[i].dataset + " " + ROWS[i].source + " " + FAC[i].role + " " + FAC[i].quant).toLowerCase().includes(q)));
    const isStr = (COLS.find(([k]) => k === sortKey) || [])[2] === "s";
    idx.sort((a, b) => {
      const va = cellValue(a, sortKey), vb = cellValue(b, sortKey);
      if (isStr) return sortDir * String(va ?? "").localeCompare(String(vb ?? ""));
      const na = num(va), nb = num(vb);
      if (na === null && nb === null) return 0;
      if (na === null) return 1; if (nb === null) return -1;  // nulls last either way
      return sortDir * (na - nb);
    });
    body.textContent = "";
    for (const i of idx) body.append(tableRows[i]);
    $("rows-table").querySelectorAll("th").forEach((th) => {
      th.classList.toggle("sorted-asc", th.dataset.key === sortKey && sortDir > 0);
      th.classList.toggle("sorted-desc", th.dataset.key === sortKey && sortDir < 0);
    });
    $("table-count").textContent = `${idx.length} of ${ROWS.length} rows`;
  }
  $("table-search").addEventListener("input", renderTable);
  function jumpToRow(i) {
    const tr = tableRows[i];
    if (!tr || !tr.isConnected) return;
    document.querySelectorAll("tr.hl").forEach((x) => x.classList.remove("hl"));
    tr.classList.add("hl");
    tr.scrollIntoView({ block: "center" });
  }

  // ------------------------------------------------------------------ capacity planner
  const P = D.planner;
  const UNITS = { "": 1, b: 1, k: 2 ** 10, kib: 2 ** 10, kb: 1e3, m: 2 ** 20, mib: 2 ** 20, mb: 1e6, g: 2 ** 30, gib: 2 ** 30,
                  gb: 1e9, t: 2 ** 40, tib: 2 ** 40, tb: 1e12 };
  // as plan.parse_bytes
  function parseBytes(text) {
    const m = /^\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*$/.exec(text);
    if (!m) throw new Error(`Memory budget ${JSON.stringify(text)}: expected a number with a unit, e.g. 2GiB, 512MiB, 1.5GB.`);
    const value = parseFloat(m[1]), unit = m[2].toLowerCase();
    if (!(unit in UNITS) || value <= 0) throw new Error(`Memory budget ${JSON.stringify(text)}: expected a positive size with one of the units B, KiB, MiB, GiB, TiB (binary, also K/M/G/T) or KB, MB, GB, TB (decimal).`);
    return Math.trunc(value * UNITS[unit]);
  }
  const FEATURES = ["fixed", "fixed_per_dim", "per_vector", "per_dim", "per_payload_byte"];
  // as sizing.ComponentFit.predict: coef @ [1, d, n, n*d, n*p]
  function predict(c, n, d, p) {
    const f = [1, d, n, n * d, n * p];
    let s = 0;
    for (let j = 0; j < 5; j++) s += c[FEATURES[j]] * f[j];
    return s;
  }
  function ramBytes(model, n, d, p) {
    let files = 0;
    for (const c of model.resident) if (c in model.components) files += Math.max(predict(model.components[c], n, d, p), 0);
    return files + model.extra_ram_per_vector * n;
  }
  function diskBytes(model, n, d, p) {
    let s = 0;
    for (const c of Object.keys(model.components)) s += Math.max(predict(model.components[c], n, d, p), 0);
    return s;
  }
  function cmpTuple(a, b) {
    for (let j = 0; j < a.length; j++) { if (a[j] < b[j]) return -1; if (a[j] > b[j]) return 1; }
    return 0;
  }
  // benchmarks.latency.latency_at: a scan grows linearly with N; a graph is quoted as measured up
  // to twice the measured n and refused (null) beyond
  function p50At(c, docs) {
    if (c.p50_ms === null || c.p50_ms === undefined || !c.p50_n) return null;
    if (c.growth === "linear") return docs <= c.p50_n ? c.p50_ms : c.p50_ms * docs / c.p50_n;
    return docs <= 2 * c.p50_n ? c.p50_ms : null;
  }
  // as plan.make_plan: predicted sizes, meets_target, and its ordering
  function makePlan(docs, dim, minQuality, budget, metric, maxP50) {
    const block = P.dims[String(dim)];
    const pay = P.payload_bytes || 0;
    const rankBy = (block.ranked_by || {})[metric] || metric;
    const cands = block.candidates.map((c, pos) => {
      const model = block.models[c.store];
      const rs = c.rescore_bytes || [0, 0];  // full vectors: id lookup in RAM, vectors on disk
      const ram = ramBytes(model, docs, c.dim_out, pay) + c.reducer_bytes + rs[0] * docs;
      const disk = diskBytes(model, docs, c.dim_out, pay) + c.reducer_bytes + rs[1] * docs;
      const q = c.quality[metric];
      const rq = c.quality[rankBy];
      let ok = true;
      if (minQuality !== null) ok = q !== null && q !== undefined && q >= minQuality;
      if (budget !== null) ok = ok && ram <= budget;
      const p50 = p50At(c, docs);
      if (maxP50 !== null) ok = ok && p50 !== null && p50 <= maxP50;
      const built = c.buildable !== false;
      return { c, pos, ram, disk, q: q === undefined ? null : q, rq: rq === undefined ? null : rq,
               built, meets: ok && built, p50 };
    });
    // benchmarks.ranking.rank_key: buildable first, then meeting the target; a floor on a metric
    // that cannot discriminate filters but ranks nothing (the metric it ranks by does)
    const floor = rankBy === metric ? minQuality : null;
    const key = (x) => {
      const quality = x.rq !== null ? x.rq : -1.0;
      const head = [x.built ? 0 : 1, x.meets ? 0 : 1];
      if (x.meets) return head.concat(floor !== null ? [x.ram, -quality] : [-quality, x.ram]);
      return head.concat(floor !== null ? [-quality, x.ram] : [x.ram, -quality]);
    };
    cands.sort((a, b) => cmpTuple(key(a), key(b)) || (a.pos - b.pos));
    return cands;
  }
  function parseOptNumber(text, what) {
    const t = text.trim();
    if (!t) return null;
    const v = Number(t.replace(/[_,]/g, ""));
    if (!Number.isFinite(v)) throw new Error(`${what}: expected a number, got ${JSON.stringify(text)}.`);
    return v;
  }
  const planTitle = (m) => ((P && P.titles) || {})[m] || metricTitle(m);
  function setupPlanner() {
    const hint = $("planner-hint");
    if (!P || !Object.keys(P.dims).length) {
      $("plan-form").hidden = true;
      const why = P ? Object.entries(P.errors || {}).map(([d, e]) => `dimension ${d}: ${e}`).join("; ") : "the page was rendered without size models (--no-planner)";
      hint.textContent = "No planner: " + (why || "no row has a local store with a size model") + ".";
      return;
    }
    hint.textContent = "RAM and disk come from the store size models `slimvec plan` fits (real builds at small sizes, linear in N), exported into this page with every configuration's measured quality: " +
      "for the same inputs the page lists the configurations `slimvec plan` (make_plan) lists, in its order, with its RAM and disk on these models (a fresh `slimvec plan` re-measures its builds: within about 1%). " +
      "Quality is the lowest over the datasets it was measured on, p50 the highest. The maximum p50 is a page-only filter (the CLI has none). Payload bytes: 0.";
    const dimSel = $("plan-dim");
    for (const d of Object.keys(P.dims)) dimSel.append(el("option", { value: d }, d));
    const metricSel2 = $("plan-metric");
    for (const m of P.metrics) metricSel2.append(el("option", { value: m }, planTitle(m)));
    metricSel2.value = P.default_metric || P.metrics[0];  // one the rows measured (--vectors: no task recall)
    for (const id of ["plan-docs", "plan-dim", "plan-budget", "plan-metric", "plan-min", "plan-p50", "plan-fitting"]) {
      $(id).addEventListener("input", runPlanner);
      $(id).addEventListener("change", runPlanner);
    }
    $("plan-form").addEventListener("submit", (ev) => { ev.preventDefault(); runPlanner(); });
    runPlanner();
  }
  function runPlanner() {
    const msg = $("plan-message"), table = $("plan-table"), notes = $("plan-notes");
    msg.className = "message"; table.textContent = ""; notes.textContent = "";
    let docs, budget = null, minQ, maxP;
    try {
      docs = parseOptNumber($("plan-docs").value, "documents");
      if (docs === null || docs <= 0 || !Number.isInteger(docs)) throw new Error("documents: give a positive whole number.");
      const b = $("plan-budget").value.trim();
      if (b) budget = parseBytes(b);
      minQ = parseOptNumber($("plan-min").value, "minimum quality");
      maxP = parseOptNumber($("plan-p50").value, "maximum p50");
      if (minQ === null && budget === null && maxP === null) throw new Error("Give a target: a minimum quality and/or a RAM budget (and optionally a maximum p50).");
    } catch (e) {
      msg.textContent = e.message; msg.classList.add("err"); table.setAttribute("data-state", "error"); return;
    }
    const dim = $("plan-dim").value, metric = $("plan-metric").value;
    const plan = makePlan(docs, Number(dim), minQ, budget, metric, maxP);
    const fitting = plan.filter((x) => x.meets);
    table.setAttribute("data-state", "ok");
    if (fitting.length) {
      const best = fitting[0];
      msg.textContent = `${fitting.length} of ${plan.length} configurations fit. Recommended: ${best.c.label} — RAM ${humanBytes(best.ram)}, disk ${humanBytes(best.disk)}. Build it: ${best.c.command}`;
      msg.classList.add("ok");
    } else {
      msg.textContent = `No configuration meets the target; the closest of ${plan.length} are listed first.`;
      msg.classList.add("err");
    }
    const head = el("thead"), hr = el("tr");
    for (const [t, c] of [["#", "num"], ["fits", ""], ["reducer", ""], ["dim", "num"], ["store", ""], [planTitle(metric), "num"], ["p50 ms at " + fmt(docs, 0), "num"], ["RAM", "num"], ["disk", "num"], ["measured on", ""]])
      hr.append(el("th", { class: c }, t));
    head.append(hr); table.append(head);
    const body = el("tbody");
    const shown = $("plan-fitting").checked ? fitting : plan;
    shown.forEach((x, j) => {
      const tr = el("tr", { class: x.meets ? "fits" : "nofit", "data-label": x.c.label, "data-ram": String(x.ram), "data-disk": String(x.disk), "data-meets": x.meets ? "1" : "0" });
      const cells = [[String(j + 1), "num"], [x.meets ? "yes" : "no", ""], [x.c.reducer, ""], [String(x.c.dim_out), "num"],
                     [x.c.store + (x.c.rescore ? (x.c.depth ? ` +rescore×${x.c.depth}` : " +rescore") : ""), ""], [x.q === null ? NULL : x.q.toFixed(3), "num"],
                     [x.c.p50_ms === null || x.c.p50_ms === undefined ? NULL
                       : (x.p50 === null ? `${NULL} (${x.c.p50_ms.toFixed(3)} at n = ${fmt(x.c.p50_n, 0)}, not extrapolated)`
                          : `${x.p50.toFixed(3)} (measured at n = ${fmt(x.c.p50_n, 0)})`), "num"], [humanBytes(x.ram), "num"], [humanBytes(x.disk), "num"],
                     [x.c.datasets.join(", ") || NULL, ""]];
      for (const [t, c] of cells) tr.append(el("td", { class: c }, t));
      body.append(tr);
    });
    table.append(body);
    const block = P.dims[dim];
    const ul = el("ul", { class: "notes" });
    const rankedBy = (block.ranked_by || {})[metric] || metric;
    // benchmarks.ranking.ranking_metric: a metric that cannot tell the rows apart gives way to the
    // next that can; when none can, the chosen one still ranks (and says so)
    for (const f of (block.flagged || {})[metric] || [])
      ul.append(el("li", { class: "flag" }, f.metric === rankedBy
        ? `${planTitle(f.metric)} hardly tells these configurations apart (${f.reason}) and no other measured metric does better, so they are still ranked by it.`
        : `${planTitle(f.metric)} does not tell these configurations apart (${f.reason}), so they are ranked by ${planTitle(rankedBy)}`
          + (f.metric === metric && minQ !== null ? `; the minimum quality still applies to ${planTitle(metric)}.` : ".")));
    for (const n of block.notes) ul.append(el("li", null, n));
    for (const k of block.checks) ul.append(el("li", null, `size model of ${k.store} checked at n=${fmt(k.n, 0)}, dim ${k.dim} (not fitted on): predicted ${humanBytes(k.predicted_bytes)}, measured ${humanBytes(k.measured_bytes)}, error ${(k.error * 100).toFixed(1)}%`));
    notes.append(ul);
  }

  // ------------------------------------------------------------------ reducer cost, routed, notes
  function simpleTable(t, header, rows, numeric) {
    t.textContent = "";
    const head = el("thead"), hr = el("tr");
    header.forEach((h, j) => hr.append(el("th", { class: numeric[j] ? "num" : "" }, h)));
    head.append(hr); t.append(head);
    const body = el("tbody");
    for (const r of rows) {
      const tr = el("tr");
      r.forEach((c, j) => { const td = el("td", { class: numeric[j] ? "num" : "" }); if (c instanceof Node) td.append(c); else td.textContent = c; tr.append(td); });
      body.append(tr);
    }
    t.append(body);
  }
  function buildCosts() {
    const seen = new Map();
    ROWS.forEach((r, i) => {
      if (FAC[i].role === "routed" || FAC[i].role === "peer") return;
      const k = `${r.source}|${r.dataset}|${r.reducer}`;
      if (!seen.has(k)) seen.set(k, r);
    });
    const items = [...seen.values()].sort((a, b) => (num(b.dim_out) || 0) - (num(a.dim_out) || 0) || String(a.reducer).localeCompare(String(b.reducer)));
    const maxFit = Math.max(1e-9, ...items.map((r) => num(r.fit_s) || 0));
    const multi = D.sources.length > 1 || datasetsAll.length > 1;
    const rows = items.map((r) => {
      const fit = el("span"); fit.textContent = fmt(num(r.fit_s), 2);
      const bar = el("span", { class: "bar" }); bar.style.width = Math.max(1, 90 * (num(r.fit_s) || 0) / maxFit) + "px"; fit.append(bar);
      const out = [String(r.reducer), fmt(num(r.dim_out), 0), fit, fmt(num(r.transform_s_per_10k), 4), num(r.reducer_bytes) === null ? NULL : humanBytes(num(r.reducer_bytes))];
      if (multi) out.unshift(`${r.source} / ${r.dataset}`);
      return out;
    });
    const header = ["reducer", "dim", "fit s", "transform s / 10k vectors", "artifact"];
    const numeric = [false, true, true, true, true];
    if (multi) { header.unshift("run / dataset"); numeric.unshift(false); }
    simpleTable($("cost-table"), header, rows, numeric);
  }
  function buildRouted() {
    const idx = ROWS.map((_, i) => i).filter((i) => num(ROWS[i].routed_recall_at_k) !== null);
    if (!idx.length) { $("routed").querySelector(".table-wrap").replaceWith(el("p", { class: "hint" }, "No cluster-routed rows in these results (bench with --kmeans K).")); return; }
    idx.sort((a, b) => (num(ROWS[b].routed_recall_at_k) - num(ROWS[a].routed_recall_at_k)));
    const multi = D.sources.length > 1 || datasetsAll.length > 1;
    const rows = idx.map((i) => {
      const r = ROWS[i];
      const out = [String(r.reducer), String(r.store), fmt(num(r.cluster_accuracy), 3), fmt(num(r.routed_recall_at_k), 3),
                   fmt(num(r.routed_fraction_scanned), 4), fmt(num(r.task_recall_at_k), 3)];
      if (multi) out.unshift(`${r.source} / ${r.dataset}`);
      return out;
    });
    const header = ["reducer", "routing (clusters, probes)", "cluster acc", "routed R" + AT_K, "fraction scanned", "task R" + AT_K];
    const numeric = [false, false, true, true, true, true];
    if (multi) { header.unshift("run / dataset"); numeric.unshift(false); }
    simpleTable($("routed-table"), header, rows, numeric);
  }
  function buildNotes() {
    const box = $("notes-body");
    const h = el("h3", null, "Skipped configurations"); box.append(h);
    if (!D.skipped.length) box.append(el("p", { class: "hint" }, "Nothing was skipped."));
    for (const g of D.skipped) {
      const det = el("details", { class: "skip-group" });
      const s = el("summary"); s.append(el("b", null, `${g.count} × `), document.createTextNode(g.reason.length > 220 ? g.reason.slice(0, 220) + "…" : g.reason));
      det.append(s);
      det.append(el("div", { class: "small" }, `runs: ${g.sources.join(", ")}; configurations: ${g.configs.join(", ")}`));
      det.append(el("div", { class: "small" }, `first reason in full: ${g.example}`));
      box.append(det);
    }
    box.append(el("h3", null, "Metrics that do not apply (null, shown as —)"));
    const ul = el("ul", { class: "notes" });
    for (const n of D.nulls) {
      const parts = Object.entries(n.by_role).map(([r, c]) => `${c} ${r}`).join(", ");
      ul.append(el("li", null, n.count === n.total ? `${n.metric}: null for every row` : `${n.metric}: null for ${n.count} of ${n.total} rows (${parts})`));
    }
    if (!D.nulls.length) ul.append(el("li", null, "Every metric applies to every row."));
    box.append(ul);
    const dsNotes = [];
    for (const s of D.sources) for (const d of s.datasets || []) for (const n of d.notes || []) dsNotes.push(`${s.label} / ${d.name}: ${n}`);
    if (dsNotes.length) {
      box.append(el("h3", null, "Datasets"));
      const u2 = el("ul", { class: "notes" }); dsNotes.forEach((n) => u2.append(el("li", null, n))); box.append(u2);
    }
  }

  // ------------------------------------------------------------------ update all
  function update() {
    buildFilters();
    const idx = ROWS.map((_, i) => i).filter(visible);
    $("filter-count").textContent = `${idx.length} of ${ROWS.length} rows selected`;
    const mk = metricSel.value, mt = metricTitle(mk);
    metricWhy();
    const a = drawPlot($("plot-bytes"), "bytes_per_vector", "bytes per vector (allocated on disk / n)", true, mk, mt, idx);
    const b = drawPlot($("plot-latency"), "latency_p50_ms", "p50 single-query latency (ms)", false, mk, mt, idx);
    $("plot-count").textContent = `${a} marks against bytes, ${b} against latency (selected rows with both values)`;
    renderTable();
  }
  buildLegend();
  buildTable();
  buildCosts();
  buildRouted();
  buildNotes();
  setupPlanner();
  update();
  document.body.setAttribute("data-ready", "1");
})();
