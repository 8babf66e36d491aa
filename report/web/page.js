// report.html's own script: reads the runs from the page's JSON block (report/html.cpp writes it) and draws
// them with uPlot. Embedded in the page by the build (report/web/embed.cmake); runs from file:// with no
// network. window.xgradPage exposes the state the browser test (tests/browser) checks.
(function () {
  "use strict";

  var started = performance.now();
  var data = JSON.parse(document.getElementById("xgrad-data").textContent);
  var runs = data.runs.map(function (r, i) {
    return { index: i, name: r.name, settings: r.settings, diverged: r.diverged, divergedStep: r.diverged_step,
             incomplete: r.incomplete, incompleteReason: r.incomplete_reason, rows: r.rows, series: data.series[i] };
  });

  var state = {
    groupBy: data.default_group_by.slice(),
    band: "sd",          // "sd": mean ± sd; "minmax": min to max
    smoothing: 0,        // EMA weight in [0, 1); 0 = off
    hidden: {},          // group key -> true
    highlight: null,     // run indices highlighted (an arms-table row), or null
    pinned: null,        // the arms-table row whose highlight stays
    panels: []           // {column, xlog, ylog, chart, el, ...}
  };

  // ---- helpers ----------------------------------------------------------------------------------------------------

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) {
      if (k === "text") e.textContent = attrs[k];
      else if (k === "class") e.className = attrs[k];
      else if (k.slice(0, 2) === "on") e.addEventListener(k.slice(2), attrs[k]);
      else e.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) e.appendChild(c); });
    return e;
  }

  var palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
                 "#17becf", "#393b79", "#ad494a", "#637939", "#8c6d31", "#7b4173", "#3182bd", "#e6550d", "#31a354"];
  function color(i) {
    return i < palette.length ? palette[i] : "hsl(" + ((i * 137.508) % 360).toFixed(0) + ",60%,42%)";
  }
  function alpha(c, a) {
    if (c.charAt(0) === "#") {
      var n = parseInt(c.slice(1), 16);
      return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + a + ")";
    }
    return c.replace("hsl(", "hsla(").replace(")", "," + a + ")");
  }

  function fmt(v) {
    if (v == null || !isFinite(v)) return "—";
    var a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(3);
    return String(+v.toPrecision(4));
  }

  // A cell of a downloaded CSV. Text a spreadsheet would run as a formula (=, +, -, @, tab or CR first; a run name
  // or setting value can be anything) gets a leading ' (OWASP's advice); numbers, negative ones included, stay.
  function csvCell(s) {
    s = s == null ? "" : String(s);
    if (/^[=+\-@\t\r]/.test(s) && (s.trim() === "" || isNaN(Number(s)))) s = "'" + s;
    return /[",\n\r]/.test(s) ? "\"" + s.replace(/"/g, "\"\"") + "\"" : s;
  }
  function download(name, header, rows) {
    var text = [header].concat(rows).map(function (r) { return r.map(csvCell).join(","); }).join("\n") + "\n";
    var a = el("a", { href: URL.createObjectURL(new Blob([text], { type: "text/csv" })), download: name });
    document.body.appendChild(a);
    a.click();
    setTimeout(function () { URL.revokeObjectURL(a.href); a.remove(); }, 0);
  }

  // ---- groups -----------------------------------------------------------------------------------------------------

  function groupKey(run) {
    return state.groupBy.map(function (k) { return k + "=" + run.settings[k]; }).join(" ");
  }
  function computeGroups() {
    var byKey = {}, groups = [];
    runs.forEach(function (run) {
      var key = groupKey(run);
      if (!(key in byKey)) {
        byKey[key] = groups.length;
        groups.push({ key: key, runs: [], color: color(groups.length) });
      }
      groups[byKey[key]].runs.push(run.index);
    });
    // In the order of their settings, numbers as numbers (d_k 16, 64, 256), then recoloured in that order.
    groups.sort(function (a, b) {
      var ra = runs[a.runs[0]].settings, rb = runs[b.runs[0]].settings;
      for (var i = 0; i < state.groupBy.length; i++) {
        var k = state.groupBy[i], x = ra[k], y = rb[k], nx = Number(x), ny = Number(y);
        if (x === y) continue;
        if (x !== "" && y !== "" && !isNaN(nx) && !isNaN(ny)) return nx - ny;
        return x < y ? -1 : 1;
      }
      return 0;
    });
    groups.forEach(function (g, i) { g.color = color(i); });
    // Labels name d_k, scale, optimizer and lr, and of the other settings only those that tell the groups apart: one
    // implied by the others (an optimizer's beta1 or momentum, given the optimizer) is left out, from the last one,
    // while the labels stay distinct; "—" (a setting the run does not have) is never shown.
    var labelKeys = state.groupBy.slice();
    function labelOf(g, keys) {
      var run = runs[g.runs[0]];
      return keys.filter(function (k) { return run.settings[k] !== "—"; })
                 .map(function (k) { return k + "=" + run.settings[k]; }).join(" ");
    }
    function distinct(keys) {
      var seen = {};
      return groups.every(function (g) {
        var l = labelOf(g, keys);
        if (seen[l]) return false;
        seen[l] = 1;
        return true;
      });
    }
    for (var i = labelKeys.length - 1; i >= 0; i--) {
      if (["d_k", "scale", "optimizer", "lr"].indexOf(labelKeys[i]) >= 0) continue;  // always named, as in report.md
      var without = labelKeys.slice(0, i).concat(labelKeys.slice(i + 1));
      if (distinct(without)) labelKeys = without;
    }
    groups.forEach(function (g) { g.label = labelOf(g, labelKeys) || "all runs"; });
    return groups;
  }
  var groups = computeGroups();

  // ---- series arithmetic ------------------------------------------------------------------------------------------

  // A run's points of `column`: {x, y} (y null at gaps), or null when the run lacks the column.
  var columnIndex = {};
  data.columns.forEach(function (c, i) { columnIndex[c] = i; });
  function runPoints(run, column) {
    var c = run.series.cols[columnIndex[column]];
    if (!c) return null;
    return { x: run.series.x[c[0]], y: c[1] };
  }

  // Exponential moving average with the startup bias removed (as in Adam): after k finite points the weights sum to
  // 1 - w^k, so the average is divided by that. Gaps stay gaps and do not reset it.
  function ema(y, w) {
    if (!(w > 0)) return y;
    var out = new Array(y.length), m = 0, k = 0;
    for (var i = 0; i < y.length; i++) {
      if (y[i] == null) { out[i] = null; continue; }
      m = w * m + (1 - w) * y[i];
      k++;
      out[i] = m / (1 - Math.pow(w, k));
    }
    return out;
  }

  // y of (x, y) at each of `xs` (sorted): exact where x holds the point, linear between two finite neighbours, null
  // outside x's range or next to a gap.
  function resample(x, y, xs) {
    var out = new Array(xs.length), j = 0;
    for (var i = 0; i < xs.length; i++) {
      var u = xs[i];
      while (j + 1 < x.length && x[j + 1] <= u) j++;
      if (x[j] === u) out[i] = y[j];
      else if (x[j] < u && j + 1 < x.length && y[j] != null && y[j + 1] != null)
        out[i] = y[j] + (y[j + 1] - y[j]) * (u - x[j]) / (x[j + 1] - x[j]);
      else out[i] = null;
    }
    return out;
  }

  function sameArray(a, b) {
    if (a === b) return true;
    if (a.length !== b.length) return false;
    for (var i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
    return true;
  }

  // Mean and band over a group's runs at the union of their steps.
  function groupStats(points) {
    var xs = points[0].x, shared = points.every(function (p) { return sameArray(p.x, xs); });
    if (!shared) {
      var all = [];
      points.forEach(function (p) { all = all.concat(p.x); });
      all.sort(function (a, b) { return a - b; });
      xs = all.filter(function (v, i) { return i === 0 || v !== all[i - 1]; });
    }
    var ys = points.map(function (p) { return shared ? p.y : resample(p.x, p.y, xs); });
    // A quantity never negative in this group (a loss, a norm, a share) gets no band below its smallest value.
    var floor = Infinity;
    ys.forEach(function (y) { y.forEach(function (v) { if (v != null && v < floor) floor = v; }); });
    if (!(floor >= 0)) floor = -Infinity;
    var mean = [], lo = [], hi = [];
    for (var i = 0; i < xs.length; i++) {
      var s = 0, n = 0, mn = Infinity, mx = -Infinity;
      for (var r = 0; r < ys.length; r++) {
        var v = ys[r][i];
        if (v == null) continue;
        s += v; n++;
        if (v < mn) mn = v;
        if (v > mx) mx = v;
      }
      if (n === 0) { mean.push(null); lo.push(null); hi.push(null); continue; }
      var m = s / n;
      mean.push(m);
      if (state.band === "minmax") { lo.push(mn); hi.push(mx); continue; }
      var ss = 0;
      for (r = 0; r < ys.length; r++) if (ys[r][i] != null) ss += (ys[r][i] - m) * (ys[r][i] - m);
      var sd = n > 1 ? Math.sqrt(ss / (n - 1)) : 0;
      lo.push(Math.max(m - sd, floor)); hi.push(m + sd);
    }
    return { x: xs, mean: mean, lo: lo, hi: hi };
  }

  // Log axes cannot show x or y <= 0: such points become gaps, counted for the panel's note.
  function positive(x, y, xlog, ylog, counter) {
    var ox = [], oy = [];
    for (var i = 0; i < x.length; i++) {
      if (xlog && !(x[i] > 0)) { counter.n++; continue; }
      var v = y[i];
      if (ylog && v != null && !(v > 0)) { counter.n++; v = null; }
      ox.push(x[i]); oy.push(v);
    }
    return { x: ox, y: oy };
  }

  // A log y axis is drawn as log10 of the values on a linear scale, with ticks labelled by the values: uPlot's own
  // log scale rounds to fixed decimals and fails on the values these runs have (score gradients of 1e-30).
  function log10s(y) {
    return y.map(function (v) { return v != null && v > 0 ? Math.log10(v) : null; });
  }
  function logSplits(u, axisIdx, min, max) {
    var out = [];
    if (!(isFinite(min) && isFinite(max))) return out;
    if (max - min <= 2.5) {
      for (var e = Math.floor(min); e <= Math.ceil(max); e++)
        [1, 2, 5].forEach(function (m) {
          var v = e + Math.log10(m);
          if (v >= min - 1e-9 && v <= max + 1e-9) out.push(v);
        });
      if (out.length >= 3) return out;
      // Less than a few 1-2-5 steps across: evenly spaced values, as on a linear axis, at their logs.
      var lo = Math.pow(10, min), hi = Math.pow(10, max), raw = (hi - lo) / 4;
      var mag = Math.pow(10, Math.floor(Math.log10(raw))), step = mag * (raw / mag >= 5 ? 5 : raw / mag >= 2 ? 2 : 1);
      out = [];
      for (var v = Math.ceil(lo / step) * step; v <= hi * (1 + 1e-12); v += step) if (v > 0) out.push(Math.log10(v));
      return out;
    }
    var step = Math.max(1, Math.ceil((max - min) / 8));
    for (var k = Math.ceil(min / step) * step; k <= max + 1e-9; k += step) out.push(k);
    return out;
  }
  function logLabel(v) {
    var r = Math.round(v);
    if (Math.abs(v - r) > 1e-6) return fmt(Math.pow(10, v));
    return r >= -2 && r <= 3 ? String(+Math.pow(10, r).toPrecision(1)) : "1e" + r;
  }
  // Linear-axis tick labels with as many digits as the ticks' spacing needs: uPlot's default rounds to a few
  // decimals, which labels every tick of a series near 1e-5 (a score gradient) "0".
  function linearLabels(splits) {
    var step = Infinity, big = 0;
    for (var i = 0; i < splits.length; i++) {
      big = Math.max(big, Math.abs(splits[i]));
      if (i > 0 && splits[i] - splits[i - 1] > 0) step = Math.min(step, splits[i] - splits[i - 1]);
    }
    if (!(big > 0)) return splits.map(function () { return "0"; });
    if (!isFinite(step)) step = big;
    var digits = Math.max(1, Math.min(15, Math.ceil(Math.log10(big / step) - 1e-9) + 1));
    var exp = big < 1e-3 || big >= 1e6;
    return splits.map(function (v) {
      if (Math.abs(v) < step * 1e-6) return "0";
      return exp ? v.toExponential(digits - 1).replace(/\.?0+e/, "e") : String(+v.toPrecision(digits));
    });
  }
  function logAxis(extra) {
    // Decades as 1e-5 (logLabel); evenly spaced values of a narrow range with the digits their spacing needs.
    var values = function (u, splits) {
      var decades = splits.every(function (v) { return Math.abs(v - Math.round(v)) < 1e-6; });
      return decades ? splits.map(logLabel)
                     : linearLabels(splits.map(function (v) { return Math.pow(10, v); }));
    };
    return Object.assign({ size: 60, splits: logSplits, values: values }, extra || {});
  }
  function linearAxis(extra) {
    return Object.assign({ size: 60, values: function (u, splits) { return linearLabels(splits); } }, extra || {});
  }

  // ---- panels -----------------------------------------------------------------------------------------------------

  function panelData(panel) {
    var tables = [], series = [{}], bands = [], roles = [], counter = { n: 0 };
    var smoothing = state.smoothing;
    groups.forEach(function (g, gi) {
      var pts = [];
      g.runs.forEach(function (ri) {
        var p = runPoints(runs[ri], panel.column);
        if (!p) return;
        var raw = positive(p.x, p.y, panel.xlog, panel.ylog, counter);
        pts.push({ x: raw.x, y: ema(raw.y, smoothing), run: ri });
        tables.push([raw.x, panel.ylog ? log10s(raw.y) : raw.y]);
        series.push({ label: runs[ri].name, group: gi, run: ri, role: "run", width: 1, points: { show: false },
                      stroke: runStroke(g, ri) });
        roles.push({ group: gi, run: ri, role: "run" });
      });
      if (pts.length === 0) return;
      var st = groupStats(pts);
      tables.push(panel.ylog ? [st.x, log10s(st.lo), log10s(st.hi), log10s(st.mean)] : [st.x, st.lo, st.hi, st.mean]);
      var base = series.length;
      series.push({ label: g.label + " low", group: gi, role: "lo", width: 0, points: { show: false },
                    stroke: g.color });
      series.push({ label: g.label + " high", group: gi, role: "hi", width: 0, points: { show: false },
                    stroke: g.color });
      series.push({ label: g.label, group: gi, role: "mean", width: 2, points: { show: false },
                    stroke: meanStroke(g) });
      roles.push({ group: gi, role: "lo" }, { group: gi, role: "hi" }, { group: gi, role: "mean" });
      bands.push({ series: [base + 1, base], fill: alpha(g.color, 0.18) });
    });
    var joined = tables.length ? uPlot.join(tables) : [[]];
    return { data: joined, series: series, bands: bands, roles: roles, dropped: counter.n };
  }

  // Faint runs behind the group's line; an arms-table row shows its runs at full strength, the others fainter.
  function runStroke(g, ri) {
    return function () {
      if (state.highlight) return state.highlight.indexOf(ri) >= 0 ? g.color : alpha(g.color, 0.06);
      return alpha(g.color, state.smoothing > 0 ? 0.3 : 0.35);
    };
  }
  function meanStroke(g) {
    return function () {
      if (!state.highlight) return g.color;
      var on = g.runs.some(function (ri) { return state.highlight.indexOf(ri) >= 0; });
      return on ? g.color : alpha(g.color, 0.25);
    };
  }

  function chartSize(panel) {
    var w = Math.max(280, panel.plotEl.clientWidth || 480);
    return { width: w, height: Math.round(Math.min(340, Math.max(220, w * 0.55))) };
  }

  function drawPanel(panel) {
    if (panel.chart) { panel.chart.destroy(); panel.chart = null; }
    var pd = panelData(panel);
    panel.roles = pd.roles;
    var size = chartSize(panel);
    var opts = {
      width: size.width, height: size.height,
      legend: { show: false },
      cursor: { drag: { x: true, y: true, uni: 30 } },
      scales: {
        x: { time: false, distr: panel.xlog ? 3 : 1, log: 10 },
        y: { distr: 1 }
      },
      axes: [{ label: "step", labelSize: 20 }, panel.ylog ? logAxis() : linearAxis()],
      series: pd.series.map(function (s, i) {
        if (i === 0) return { label: "step" };
        var out = { label: s.label, stroke: s.stroke, width: s.width, points: s.points, spanGaps: false,
                    show: !state.hidden[groups[s.group].key] };
        return out;
      }),
      bands: pd.bands,
      hooks: { setCursor: [function (u) { showValues(panel, u); }] }
    };
    panel.chart = new uPlot(opts, pd.data, panel.plotEl);
    panel.note.textContent = pd.dropped > 0
      ? pd.dropped + " points at or below 0 are not shown on the log axis." : "";
    panel.drawCount = (panel.drawCount || 0) + 1;
  }

  function showValues(panel, u) {
    var idx = u.cursor.idx;
    if (idx == null) { panel.readout.textContent = ""; return; }
    var parts = ["step " + fmt(u.data[0][idx])];
    panel.roles.forEach(function (r, i) {
      if (r.role !== "mean" || state.hidden[groups[r.group].key]) return;
      var v = u.data[i + 1][idx];
      if (v != null) parts.push(groups[r.group].label + ": " + fmt(panel.ylog ? Math.pow(10, v) : v));
    });
    panel.readout.textContent = parts.join("   ");
  }

  function columnSelect(panel) {
    var sel = el("select", { class: "metric", title: "metrics.csv column", onchange: function () {
      panel.column = sel.value; drawPanel(panel);
    } });
    data.columns.forEach(function (c) {
      var o = el("option", { value: c, text: c });
      if (c === panel.column) o.selected = true;
      sel.appendChild(o);
    });
    return sel;
  }

  function checkbox(cls, label, checked, onchange) {
    var box = el("input", { type: "checkbox", class: cls });
    box.checked = checked;
    box.addEventListener("change", function () { onchange(box.checked); });
    return el("label", { class: "toggle" }, [box, document.createTextNode(" " + label)]);
  }

  function addPanel(column) {
    var panel = { column: column, xlog: false, ylog: false, chart: null };
    panel.plotEl = el("div", { class: "plot" });
    panel.readout = el("div", { class: "readout" });
    panel.note = el("div", { class: "panel-note" });
    var controls = el("div", { class: "panel-controls" }, [
      columnSelect(panel),
      checkbox("xlog", "log x", false, function (v) { panel.xlog = v; drawPanel(panel); }),
      checkbox("ylog", "log y", false, function (v) { panel.ylog = v; drawPanel(panel); }),
      el("button", { class: "remove", title: "remove this panel", text: "×", onclick: function () {
        if (panel.chart) panel.chart.destroy();
        panel.el.remove();
        state.panels.splice(state.panels.indexOf(panel), 1);
      } })
    ]);
    panel.el = el("section", { class: "panel" }, [controls, panel.plotEl, panel.readout, panel.note]);
    panelsEl.appendChild(panel.el);
    state.panels.push(panel);
    drawPanel(panel);
    return panel;
  }

  function redrawAll() {
    state.panels.forEach(drawPanel);
  }
  function restyleAll() {
    state.panels.forEach(function (p) { if (p.chart) p.chart.redraw(false, false); });
  }

  // ---- legend (one entry per group) -------------------------------------------------------------------------------

  function setGroupShown(gi, shown) {
    var key = groups[gi].key;
    if (shown) delete state.hidden[key]; else state.hidden[key] = true;
    state.panels.forEach(function (p) {
      if (!p.chart) return;
      p.roles.forEach(function (r, i) { if (r.group === gi) p.chart.setSeries(i + 1, { show: shown }); });
    });
    renderLegend();
  }

  function renderLegend() {
    legendEl.textContent = "";
    groups.forEach(function (g, gi) {
      var hidden = !!state.hidden[g.key];
      var item = el("button", { class: "legend-item" + (hidden ? " off" : ""), "data-group": gi,
                                title: hidden ? "show this group" : "hide this group",
                                onclick: function () { setGroupShown(gi, hidden); } }, [
        el("span", { class: "swatch", style: "background:" + g.color }),
        document.createTextNode(g.label + " (" + g.runs.length + (g.runs.length === 1 ? " run)" : " runs)"))
      ]);
      legendEl.appendChild(item);
    });
    countsEl.textContent = runs.length + (runs.length === 1 ? " run" : " runs") + " in " + groups.length +
      (groups.length === 1 ? " group" : " groups");
    countsEl.setAttribute("data-runs", runs.length);
    countsEl.setAttribute("data-groups", groups.length);
  }

  function regroup() {
    groups = computeGroups();
    state.hidden = {};
    renderLegend();
    redrawAll();
  }

  // ---- arms table -------------------------------------------------------------------------------------------------

  function sortValue(s) {
    if (s === "never") return Infinity;
    var v = parseFloat(s);
    return isNaN(v) ? null : v;
  }

  function renderArms() {
    var arms = data.arms, order = arms.rows.map(function (r, i) { return i; }), sortCol = -1, asc = true;
    var table = el("table", { id: "arms-table", class: "arms" });
    var thead = el("thead"), tbody = el("tbody"), tr = el("tr");
    arms.header.forEach(function (h, ci) {
      tr.appendChild(el("th", { text: h, title: "sort", onclick: function () {
        asc = sortCol === ci ? !asc : true;
        sortCol = ci;
        order.sort(function (a, b) {
          var x = arms.rows[a][ci], y = arms.rows[b][ci], vx = sortValue(x), vy = sortValue(y), d;
          if (vx != null && vy != null) d = vx - vy;
          else if (vx != null) d = -1;
          else if (vy != null) d = 1;
          else d = x < y ? -1 : x > y ? 1 : 0;
          return asc ? d : -d;
        });
        Array.prototype.forEach.call(thead.querySelectorAll("th"), function (th, i) {
          th.className = i === ci ? (asc ? "asc" : "desc") : "";
        });
        body();
      } }));
    });
    thead.appendChild(tr);
    function body() {
      tbody.textContent = "";
      order.forEach(function (ai) {
        var row = el("tr", { "data-arm": ai }, arms.rows[ai].map(function (c) { return el("td", { text: c }); }));
        if (state.pinned === ai) row.className = "pinned";
        row.addEventListener("mouseenter", function () { if (state.pinned == null) highlight(arms.runs[ai]); });
        row.addEventListener("mouseleave", function () { if (state.pinned == null) highlight(null); });
        row.addEventListener("click", function () {
          state.pinned = state.pinned === ai ? null : ai;
          highlight(state.pinned == null ? null : arms.runs[ai]);
          body();
        });
        tbody.appendChild(row);
      });
    }
    body();
    table.appendChild(thead);
    table.appendChild(tbody);
    return table;
  }

  function highlight(runIndices) {
    state.highlight = runIndices;
    restyleAll();
  }

  // ---- summary figures (report.md's, from summary_figures) ---------------------------------------------------------

  // One figure: a line per SummaryLine, its points with error bars (lo to hi, drawn after the lines), theory lines
  // dashed. Points are [x, y, lo, hi, runs, diverged runs left out].
  function summaryChart(fig, host, width) {
    var tables = fig.lines.map(function (line) {
      var pts = line.points.filter(function (p) { return p[0] != null && (!fig.log_x || p[0] > 0); });
      var ys = pts.map(function (p) { return p[1]; });
      return [pts.map(function (p) { return p[0]; }), fig.log_y ? log10s(ys) : ys];
    });
    if (!tables.length) return null;
    var joined = uPlot.join(tables);
    var base = fig.name.indexOf("d_k") >= 0 ? 2 : 10;
    // Each line in its scaling's registered colour (as the PNGs), a theory line in its scaling's colour dashed;
    // further measured lines of one scaling told apart by their dash.
    var dashes = [undefined, [10, 3], [2, 3], [10, 3, 2, 3]], seen = {};
    var strokes = fig.lines.map(function (line, i) { return line.colour || color(i); });
    // Values show while hovering; otherwise the legend holds the line names only (no "--" placeholders).
    var series = [{ label: fig.x_label, value: function (u, v) { return v == null ? "" : fmt(v); } }].concat(fig.lines.map(function (line, i) {
      var k = line.theory ? 0 : (seen[line.scale] = (seen[line.scale] || 0) + 1) - 1;
      return { label: line.label, stroke: strokes[i], width: line.theory ? 1.5 : 2,
               dash: line.theory ? [6, 4] : dashes[k % dashes.length],
               spanGaps: true, points: { show: !line.theory, size: 6 },
               value: function (u, v) { return v == null ? "" : fmt(fig.log_y ? Math.pow(10, v) : v); } };
    }));
    // The y range holds the error bars too (a bar whose low end is <= 0 on a log axis goes to the bottom).
    function yRange(u, dataMin, dataMax) {
      var lo = dataMin, hi = dataMax;
      fig.lines.forEach(function (line) {
        line.points.forEach(function (p) {
          [p[1], p[2], p[3]].forEach(function (v) {
            if (v == null || (fig.log_y && !(v > 0))) return;
            var t = fig.log_y ? Math.log10(v) : v;
            if (lo == null || t < lo) lo = t;
            if (hi == null || t > hi) hi = t;
          });
        });
      });
      if (lo == null || hi == null) return [0, 1];
      var pad = (hi - lo) * 0.06 || Math.abs(hi) * 0.1 || 1;
      return [lo - pad, hi + pad];
    }
    function errorBars(u) {
      var ctx = u.ctx;
      ctx.save();
      ctx.beginPath();
      ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
      ctx.clip();
      ctx.lineWidth = 1.5 * devicePixelRatio;
      fig.lines.forEach(function (line, i) {
        if (line.theory || !u.series[i + 1].show) return;
        ctx.strokeStyle = strokes[i];
        line.points.forEach(function (p) {
          if (p[0] == null || p[2] == null || p[3] == null || (fig.log_x && !(p[0] > 0))) return;
          var lo = p[2], hi = p[3];
          if (fig.log_y) {
            lo = lo > 0 ? Math.log10(lo) : u.scales.y.min;
            hi = hi > 0 ? Math.log10(hi) : u.scales.y.min;
          }
          var x = u.valToPos(p[0], "x", true), y1 = u.valToPos(lo, "y", true), y2 = u.valToPos(hi, "y", true);
          ctx.beginPath();
          ctx.moveTo(x, y1); ctx.lineTo(x, y2);
          ctx.moveTo(x - 4, y1); ctx.lineTo(x + 4, y1);
          ctx.moveTo(x - 4, y2); ctx.lineTo(x + 4, y2);
          ctx.stroke();
        });
      });
      ctx.restore();
    }
    return new uPlot({
      width: width, height: Math.round(width * 0.8),
      scales: { x: { time: false, distr: fig.log_x ? 3 : 1, log: base }, y: { distr: 1, range: yRange } },
      axes: [{ label: fig.x_label, labelSize: 20 },
             // The y label runs along the plot's height: "(log scale)" is left to the axis's powers of ten so
             // the longest label (the score gradient's) is not cut.
             fig.log_y ? logAxis({ label: fig.y_label.replace(/ \(log scale\)$/, "") })
                       : linearAxis({ label: fig.y_label })],
      series: series,
      hooks: { draw: [errorBars] }
    }, joined, host);
  }

  function renderSummary() {
    if (!data.summary || !data.summary.length) return null;
    var grid = el("div", { id: "summary-figures" });
    var section = el("section", null, [
      el("h2", { text: "Summary figures" }),
      el("p", { class: "hint", text: "As in report.md. Click a line in a legend to hide it; hover for values." }),
      grid]);
    data.summary.forEach(function (fig) {
      var host = el("div", { class: "plot" });
      var box = el("div", { class: "panel summary-figure", "data-figure": fig.name }, [
        el("h3", { text: fig.title }), host,
        el("p", { class: "caption", text: fig.caption }),
        fig.notes.length ? el("ul", { class: "caption" }, fig.notes.map(function (n) { return el("li", { text: n }); }))
                         : null]);
      grid.appendChild(box);
      summaryFigures.push({ fig: fig, box: box, host: host });
    });
    return section;
  }
  var summaryFigures = [];
  function drawSummary() {
    summaryFigures.forEach(function (s) {
      if (s.chart) s.chart.destroy();
      s.chart = summaryChart(s.fig, s.host, Math.max(280, s.host.clientWidth || 420));
    });
  }

  function listSection(title, items, open) {
    if (!items || !items.length) return null;
    var d = el("details", open ? { open: "" } : null, [
      el("summary", { text: title + " (" + items.length + ")" }),
      el("ul", null, items.map(function (t) { return el("li", { text: t }); }))]);
    return d;
  }

  // ---- page -------------------------------------------------------------------------------------------------------

  var app = document.getElementById("app");
  app.textContent = "";
  document.title = data.title;
  var countsEl = el("span", { id: "counts" });
  var legendEl = el("div", { id: "legend" });
  var panelsEl = el("div", { id: "panels" });

  var common = Object.keys(data.common_settings).map(function (k) { return k + "=" + data.common_settings[k]; });
  app.appendChild(el("header", null, [
    el("h1", { text: data.title }),
    el("p", { class: "summary" }, [countsEl,
      document.createTextNode(data.downsampled
        ? "; long series downsampled by min-max buckets (spikes kept; see below)."
        : "; every point shown.")]),
    common.length ? el("details", { class: "common" }, [el("summary", { text: "Settings shared by every run" }),
                                                        el("p", { text: common.join(", ") })]) : null
  ]));
  if (data.findings && data.findings.length) {
    app.appendChild(el("section", { id: "findings" }, [
      el("h2", { text: "Findings" }),
      el("ul", null, data.findings.map(function (f) {
        // Details on this page where it has them (the summary figures), else in report.md beside it.
        var href = document.getElementById(f.anchor) || f.anchor === "summary-figures" ? "#" + f.anchor
                                                                                         : "report.md#" + f.anchor;
        return el("li", null, [document.createTextNode(f.text + " "),
                               el("a", { href: href, class: "details-link", text: "→ details" })]);
      }))]));
  }
  if (data.explain) {
    app.appendChild(el("p", { id: "explain-link" }, [
      document.createTextNode("The argument for 1/sqrt(d_k), step by step, measured on this model and these runs: "),
      el("a", { href: data.explain, text: data.explain })]));
  }
  if (data.notes.length) {
    app.appendChild(el("details", { id: "notes", open: "" }, [
      el("summary", { text: "What this page leaves out or changes (" + data.notes.length + ")" }),
      // A note is one line; the runs or columns it counts are listed behind it.
      el("ul", null, data.notes.map(function (n) {
        return el("li", null, [document.createTextNode(n.text), n.items.length ? el("details", null, [
          el("summary", { text: "list (" + n.items.length + ")" }),
          el("ul", null, n.items.map(function (item) { return el("li", { text: item }); }))]) : null]);
      }))
    ]));
  }

  var groupBoxes = el("div", { id: "group-by" }, [el("span", { class: "label", text: "group by:" })]);
  data.group_keys.forEach(function (k) {
    groupBoxes.appendChild(checkbox("group-key", k, state.groupBy.indexOf(k) >= 0, function (on) {
      state.groupBy = data.group_keys.filter(function (key) {
        return key === k ? on : state.groupBy.indexOf(key) >= 0;
      });
      regroup();
    }));
  });
  if (!data.group_keys.length) groupBoxes.appendChild(el("span", { text: "(every run has the same settings)" }));

  var bandSel = el("select", { id: "band", onchange: function () { state.band = bandSel.value; redrawAll(); } }, [
    el("option", { value: "sd", text: "band: mean ± sd" }), el("option", { value: "minmax", text: "band: min to max" })
  ]);
  var smoothOut = el("output", { id: "smoothing-value", text: "off" });
  var smooth = el("input", { id: "smoothing", type: "range", min: "0", max: "0.99", step: "0.01", value: "0" });
  smooth.addEventListener("input", function () {
    state.smoothing = +smooth.value;
    smoothOut.textContent = state.smoothing > 0 ? state.smoothing.toFixed(2) : "off";
    redrawAll();
  });
  app.appendChild(el("div", { id: "controls" }, [
    groupBoxes,
    el("div", { class: "row" }, [
      bandSel,
      el("label", { title: "exponential moving average, debiased; 0 = off. The runs stay raw, faint behind." }, [
        document.createTextNode("smoothing "), smooth, document.createTextNode(" "), smoothOut]),
      el("button", { id: "add-panel", text: "add panel", onclick: function () { addPanel(data.columns[0]); } }),
      el("span", { class: "hint", text: "drag to zoom, double-click to reset; click a group to hide it" })
    ])
  ]));
  app.appendChild(legendEl);
  app.appendChild(panelsEl);

  var summarySection = renderSummary();
  if (summarySection) app.appendChild(summarySection);

  app.appendChild(el("h2", { text: "Arms" }));
  app.appendChild(el("p", { class: "hint",
    text: "As in report.md: runs that differ only in seed. Click a column to sort, hover or click a row to highlight " +
          "its runs." }));
  app.appendChild(renderArms());
  app.appendChild(el("div", { class: "downloads" }, [
    el("button", { id: "download-arms", text: "download arms table (CSV)", onclick: function () {
      download("arms.csv", data.arms.header, data.arms.rows);
    } }),
    el("button", { id: "download-final", text: "download final metrics of every run (CSV)", onclick: function () {
      download("final_metrics.csv", data.final.header, data.final.rows);
    } })
  ]));

  var details = el("section", { id: "details" }, [
    listSection("Per-arm comparisons (as in report.md)", data.sentences, false),
    listSection("The usual story: holds", data.checks && data.checks.holds, false),
    listSection("The usual story: does NOT hold", data.checks && data.checks.fails, false),
    listSection("The usual story: not decided", data.checks && data.checks.undecided, false)]);
  if (details.childNodes.length) {
    app.appendChild(el("h2", { text: "Details" }));
    app.appendChild(details);
  }

  renderLegend();
  var panelColumns = data.default_panels.length ? data.default_panels : data.columns.slice(0, 1);
  panelColumns.forEach(addPanel);
  drawSummary();

  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      state.panels.forEach(function (p) { if (p.chart) p.chart.setSize(chartSize(p)); });
      drawSummary();
    }, 100);
  });

  window.xgradPage = {
    state: state, runs: runs,
    groups: function () { return groups; },
    setGroupShown: setGroupShown,
    summaryCharts: function () { return summaryFigures.map(function (s) { return s.chart; }); },
    csvCell: csvCell,
    groupStats: function (points) { return groupStats(points); },
    drawMs: null
  };
  requestAnimationFrame(function () {
    requestAnimationFrame(function () {
      window.xgradPage.drawMs = performance.now() - started;
      window.xgradPage.sinceNavigationMs = performance.now();
    });
  });
})();
