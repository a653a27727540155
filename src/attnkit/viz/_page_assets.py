"""The static parts of the interactive page (kept as Python strings so that they ship with the
package without package-data settings; the fonts come before CSS, from _page_fonts). The script
reads #attn-data and builds every element with createElement/textContent: no innerHTML
anywhere."""

CSS = r"""
body { margin: 1.2em; color: #222; }
h1 { font-size: 1.3em; margin: 0 0 .4em 0; }
.controls { margin: .4em 0 1em 0; display: flex; gap: 1.2em; align-items: center; }
.controls label { font-size: .9em; }
.hidden { display: none; }
.strip { display: flex; flex-wrap: wrap; gap: .35em; align-items: flex-end; margin: .2em 0; }
.strip-label { width: 6.5em; font-size: .8em; color: #666; }
.tok { border: 1px solid #bbb; border-radius: 4px; padding: .15em .4em; cursor: pointer;
       display: inline-flex; flex-direction: column; align-items: center; min-width: 1.6em;
       white-space: pre; background: #fff; }
.tok .w { font-size: .65em; color: inherit; min-height: 1em; }
.tok.query.active { outline: 2px solid #d33; }
.tok.query.pinned { outline: 2px solid #900; background: #fee; }
#status { font-size: .85em; color: #333; min-height: 1.3em; margin: .6em 0; }
table#matrix { border-collapse: collapse; margin-top: .6em; }
#matrix th { font-weight: normal; font-size: .8em; padding: 2px 4px; white-space: pre; }
#matrix thead th { writing-mode: vertical-rl; transform: rotate(180deg); text-align: left; }
#matrix tbody th { text-align: right; cursor: pointer; }
#matrix td.cell { width: 1.6em; height: 1.6em; border: 1px solid #eee; }
#matrix tr.row-hl th { color: #d33; font-weight: bold; }
#matrix td.cell.col-hl { border-color: #d33; }
#matrix td.cell.gold-sure { outline: 2px solid #e00; outline-offset: -2px; }
#matrix td.cell.gold-possible { outline: 2px dashed #e00; outline-offset: -2px; }
"""

BODY = r"""<h1 id="title"></h1>
<div class="controls">
  <label id="map-box">attention <select id="map"></select></label>
  <label id="layer-box">layer <select id="layer"></select></label>
  <label id="head-box">head <select id="head"></select></label>
  <span id="kind"></span>
</div>
<section id="tokens-view">
  <div class="strip" id="keys"><span class="strip-label"></span></div>
  <div class="strip" id="queries"><span class="strip-label"></span></div>
</section>
<div id="status">hover or click a target token</div>
<section id="matrix-view"><table id="matrix"><thead></thead><tbody></tbody></table></section>
"""

JS = r"""
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("attn-data").textContent);
  // every map of the page: the first at the top level, the others under "more"
  const views = [data].concat(data.more || []);
  const mapSel = document.getElementById("map");
  const layerSel = document.getElementById("layer"), headSel = document.getElementById("head");
  const keyStrip = document.getElementById("keys"), queryStrip = document.getElementById("queries");
  const thead = document.querySelector("#matrix thead");
  const tbody = document.querySelector("#matrix tbody");
  // the map shown and its sizes; the elements built for it
  let v = views[0], L = 0, H = 0, Tq = 0, Tk = 0;
  let pinned = null, keyEls = [], queryEls = [], cells = [], rows = [];

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function option(sel, value, text) {
    const o = el("option", "", text);
    o.value = value;
    sel.appendChild(o);
  }

  document.getElementById("title").textContent = data.title;
  document.title = data.title;
  views.forEach(function (w, k) { option(mapSel, String(k), w.label || w.name); });
  if (views.length === 1) document.getElementById("map-box").classList.add("hidden");

  // the (Tq, Tk) matrix currently shown: one head of one layer, or the mean of heads
  function matrix() {
    const layer = v.weights[Number(layerSel.value)];
    if (headSel.value !== "mean") return layer[Number(headSel.value)];
    const m = [];
    for (let i = 0; i < Tq; i++) {
      const row = new Array(Tk).fill(0);
      for (let h = 0; h < H; h++) for (let j = 0; j < Tk; j++) row[j] += layer[h][i][j] / H;
      m.push(row);
    }
    return m;
  }
  function shade(w, max) {
    const a = max > 0 ? w / max : 0;
    return "rgba(31, 97, 204, " + a.toFixed(3) + ")";
  }
  function emptyStrip(strip, label) {
    while (strip.lastElementChild !== strip.firstElementChild) strip.lastElementChild.remove();
    strip.firstElementChild.textContent = label;
  }

  // layer and head switches of map k: the layer kept where it exists (else the last), the
  // head kept where it exists (else head 0)
  function buildSwitches() {
    const layer = layerSel.value, head = headSel.value;
    layerSel.replaceChildren();
    headSel.replaceChildren();
    for (let l = 0; l < L; l++) option(layerSel, String(l), String(l));
    layerSel.value = layer !== "" && Number(layer) < L ? layer : String(L - 1);
    if (H > 1) option(headSel, "mean", "mean");
    for (let h = 0; h < H; h++) option(headSel, String(h), String(h));
    headSel.value = head === "mean" && H > 1 ? "mean"
      : head !== "" && head !== "mean" && Number(head) < H ? head : "0";
    document.getElementById("layer-box").classList.toggle("hidden", L === 1);
    document.getElementById("head-box").classList.toggle("hidden", H === 1);
  }

  function buildTokens() {
    emptyStrip(keyStrip, v.kind === "self" ? "keys" : "source");
    emptyStrip(queryStrip, v.kind === "self" ? "queries" : "target");
    keyEls = v.keys.map(function (t, j) {
      const s = el("span", "tok key");
      s.dataset.j = String(j);
      s.appendChild(el("span", "t", t));
      s.appendChild(el("span", "w", ""));
      keyStrip.appendChild(s);
      return s;
    });
    queryEls = v.queries.map(function (t, i) {
      const s = el("span", "tok query");
      s.dataset.i = String(i);
      s.appendChild(el("span", "t", t));
      s.appendChild(el("span", "w", ""));
      s.addEventListener("mouseenter", function () { if (pinned === null) show(i); });
      s.addEventListener("mouseleave", function () { if (pinned === null) clear(); });
      s.addEventListener("click", function () {
        pinned = pinned === i ? null : i;
        queryEls.forEach(function (q, k) { q.classList.toggle("pinned", k === pinned); });
        if (pinned === null) clear(); else show(i);
      });
      queryStrip.appendChild(s);
      return s;
    });
  }

  function buildMatrix() {
    thead.replaceChildren();
    tbody.replaceChildren();
    const head = el("tr");
    head.appendChild(el("th", "", ""));
    v.keys.forEach(function (t) { head.appendChild(el("th", "", t)); });
    thead.appendChild(head);
    cells = [];
    rows = [];
    v.queries.forEach(function (t, i) {
      const tr = el("tr");
      const th = el("th", "", t);
      th.addEventListener("mouseenter", function () { if (pinned === null) show(i); });
      th.addEventListener("mouseleave", function () { if (pinned === null) clear(); });
      tr.appendChild(th);
      const row = [];
      for (let j = 0; j < Tk; j++) {
        const td = el("td", "cell");
        td.dataset.i = String(i);
        td.dataset.j = String(j);
        td.addEventListener("mouseenter", function () {
          if (pinned === null) show(i);
          const w = matrix()[i][j];
          document.getElementById("status").textContent =
            v.queries[i] + " \u2192 " + v.keys[j] + ": " + w.toFixed(4);
          cells.forEach(function (r) { r[j].classList.add("col-hl"); });
        });
        td.addEventListener("mouseleave", function () {
          cells.forEach(function (r) { r[j].classList.remove("col-hl"); });
        });
        tr.appendChild(td);
        row.push(td);
      }
      tbody.appendChild(tr);
      rows.push(tr);
      cells.push(row);
    });
    (v.gold || []).forEach(function (g) {
      const s = g[0], t = g[1];
      const cls = g[2] === "sure" ? "gold-sure" : "gold-possible";
      if (t < Tq && s < Tk) cells[t][s].classList.add(cls);
    });
  }

  function paintMatrix() {
    const m = matrix();
    let max = 0;
    m.forEach(function (r) { r.forEach(function (w) { if (w > max) max = w; }); });
    for (let i = 0; i < Tq; i++) for (let j = 0; j < Tk; j++) {
      const td = cells[i][j], w = m[i][j];
      td.dataset.weight = String(w);
      td.title = w.toFixed(4);
      td.style.backgroundColor = shade(w, max);
    }
  }
  // highlight the key tokens by the weights of query token i
  function show(i) {
    const row = matrix()[i];
    const max = Math.max.apply(null, row);
    queryEls.forEach(function (q, k) { q.classList.toggle("active", k === i); });
    rows.forEach(function (r, k) { r.classList.toggle("row-hl", k === i); });
    keyEls.forEach(function (s, j) {
      s.dataset.weight = String(row[j]);
      s.classList.toggle("hl", row[j] > 0);
      s.style.backgroundColor = shade(row[j], max);
      s.style.color = max > 0 && row[j] / max > 0.6 ? "#fff" : "";
      s.lastElementChild.textContent = row[j].toFixed(2);
    });
    let best = 0;
    for (let j = 1; j < Tk; j++) if (row[j] > row[best]) best = j;
    document.getElementById("status").textContent =
      v.queries[i] + " attends most to " + v.keys[best] + " (" + row[best].toFixed(4) + ")";
  }
  function clear() {
    queryEls.forEach(function (q) { q.classList.remove("active"); });
    rows.forEach(function (r) { r.classList.remove("row-hl"); });
    keyEls.forEach(function (s) {
      delete s.dataset.weight;
      s.classList.remove("hl");
      s.style.backgroundColor = "";
      s.style.color = "";
      s.lastElementChild.textContent = "";
    });
  }
  function redraw() { paintMatrix(); if (pinned !== null) show(pinned); else clear(); }

  // show map k: its kind, switches, tokens and matrix
  function choose(k) {
    v = views[k];
    L = v.weights.length;
    H = v.weights[0].length;
    Tq = v.queries.length;
    Tk = v.keys.length;
    pinned = null;
    mapSel.value = String(k);
    document.body.dataset.map = v.name;
    document.getElementById("kind").textContent = v.kind === "self"
      ? "self-attention (keys = queries)"
      : "cross-attention (target \u2192 source)";
    document.getElementById("status").textContent = v.kind === "self"
      ? "hover or click a query token" : "hover or click a target token";
    buildSwitches();
    buildTokens();
    buildMatrix();
    redraw();
  }
  mapSel.addEventListener("change", function () { choose(Number(mapSel.value)); });
  layerSel.addEventListener("change", redraw);
  headSel.addEventListener("change", redraw);
  choose(Math.min(Math.max(Number(data.shown) || 0, 0), views.length - 1));
  document.body.dataset.ready = "1";
})();
"""
