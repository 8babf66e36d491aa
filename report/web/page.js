// report.html's own script: reads the runs from the page's JSON block (report/html.cpp writes it) and draws them with
// uPlot, in the colours, dashes and smoothing of the picture (report/picture.h) the PNG/SVG figures use. Embedded in
// the page by the build (report/web/embed.cmake); runs from file:// with no network. window.xgradPage exposes the
// state the browser test (tests/browser) checks.
(function () {
  "use strict";

  var started = performance.now();
  var data = JSON.parse(document.getElementById("xgrad-data").textContent);
  var picture = data.picture;
  var runs = data.runs.map(function (r, i) {
    return { index: i, name: r.name, settings: r.settings, series: data.series[i] };
  });

  var state = {
    groupBy: picture.group_by.slice(),
    facetBy: picture.facet_by,  // one chart per value of this setting in every panel ("": one chart)
    band: "sd",          // "sd": mean ± sd; "minmax": min to max
    smoothing: picture.smoothing.half_width,  // centred moving average, half-width in steps; 0 = off
    hidden: {},          // group key -> true
    highlight: null,     // run indices highlighted (an arms-table row), or null
    pinned: null,        // the arms-table row whose highlight stays
    panels: []           // {column, xlog, ylog, facets: [{value, chart, roles, plotEl}], ...}
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

  // Groups that are not told apart by scaling (none of the picture's colours applies) take these.
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
  // The picture's dash `i` for a line `width` pixels wide: its lengths in half line widths, as gnuplot's SVG draws it.
  function dashPx(i, width, ratio) {
    return picture.dashes[i % picture.dashes.length].map(function (v) { return v * width / 2 * (ratio || 1); });
  }

  function fmt(v) {
    if (v == null || !isFinite(v)) return "—";
    var a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(3);
    return String(+v.toPrecision(4));
  }
  // Setting values in order, numbers as numbers (d_k 16, 64, 256).
  function compareValues(x, y) {
    var nx = Number(x), ny = Number(y);
    if (x === y) return 0;
    if (x !== "" && y !== "" && !isNaN(nx) && !isNaN(ny)) return nx - ny;
    return x < y ? -1 : 1;
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

  // ---- groups and facets ------------------------------------------------------------------------------------------

  // The settings that split groups: those ticked, but the one the panels are split by.
  function groupKeys() { return state.groupBy.filter(function (k) { return k !== state.facetBy; }); }

  // The runs split by keyOf(run), in the order first seen: [{key, runs}].
  function partition(keyOf) {
    var at = {}, out = [];
    runs.forEach(function (run) {
      var key = keyOf(run);
      if (!(key in at)) out.push({ key: key, runs: [] }), at[key] = out.length - 1;
      out[at[key]].runs.push(run.index);
    });
    return out;
  }

  function computeGroups() {
    var keys = groupKeys();
    var groups = partition(function (run) {
      return keys.map(function (k) { return k + "=" + run.settings[k]; }).join(" ");
    });
    groups.sort(function (a, b) {
      var ra = runs[a.runs[0]].settings, rb = runs[b.runs[0]].settings;
      for (var i = 0; i < keys.length; i++) {
        var d = compareValues(ra[keys[i]], rb[keys[i]]);
        if (d) return d;
      }
      return 0;
    });
    // Labels leave out "—" (a setting the run does not have).
    function labelOf(g) {
      var run = runs[g.runs[0]];
      return keys.filter(function (k) { return run.settings[k] !== "—"; })
                 .map(function (k) { return k + "=" + run.settings[k]; }).join(" ");
    }
    // Colour by scaling (the picture's colour of each), dash by the other settings that split groups (optimizer and
    // lr in the default experiment), or by scaling where nothing else does, as the PNGs draw a panel's scalings.
    var byScale = keys.indexOf("scale") >= 0, rest = keys.filter(function (k) { return k !== "scale"; }), dashOf = {};
    groups.forEach(function (g, gi) {
      var s = runs[g.runs[0]].settings, spec = byScale && picture.scalings[s.scale];
      var r = rest.map(function (k) { return s[k]; }).join("\u0000");
      if (!(r in dashOf)) dashOf[r] = Object.keys(dashOf).length;
      g.label = labelOf(g) || "all runs";
      g.color = spec ? spec.colour : color(gi);
      g.dash = !spec ? 0 : rest.length ? dashOf[r] : spec.dash;
    });
    return groups;
  }

  function computeFacets() {
    var k = state.facetBy;
    return partition(function (run) { return k ? run.settings[k] : ""; })
      .map(function (f) { return { value: k ? f.key : null, label: k ? k + "=" + f.key : "", runs: f.runs }; })
      .sort(function (a, b) { return compareValues(a.value, b.value); });
  }
  var groups = computeGroups(), facets = computeFacets();

  // ---- series arithmetic ------------------------------------------------------------------------------------------

  // A run's points of `column`: {x, y} (y null at gaps), or null when the run lacks the column.
  var columnIndex = {};
  data.columns.forEach(function (c, i) { columnIndex[c] = i; });
  function runPoints(run, column) {
    var c = run.series.cols[columnIndex[column]];
    if (!c) return null;
    return { x: run.series.x[c[0]], y: c[1] };
  }

  // The picture's smoothing, as report/picture.cpp's smooth() computes it for the PNGs (the same sums in the same
  // order): at a finite point at step s, the mean of the finite points within s ± h, h = min(halfWidth, s - first,
  // last - s) over the steps of the first and last finite points. A centred mean does not shift a falling curve to
  // later steps (an exponential one does), and its window is in steps, so it means the same on a series logged every
  // k steps or downsampled. Gaps stay gaps.
  function smooth(x, y, halfWidth) {
    var steps = [], prefix = [0];
    for (var i = 0; i < y.length; i++)
      if (y[i] != null && isFinite(y[i])) { steps.push(x[i]); prefix.push(prefix[prefix.length - 1] + y[i]); }
    if (!(halfWidth > 0) || !steps.length) return y;
    function bound(v, upper) {  // the first index whose step is > v (upper) or >= v
      var lo = 0, hi = steps.length;
      while (lo < hi) { var m = (lo + hi) >> 1; if (upper ? steps[m] <= v : steps[m] < v) lo = m + 1; else hi = m; }
      return lo;
    }
    return y.map(function (v, i) {
      if (v == null || !isFinite(v)) return v;
      var s = x[i], h = Math.min(halfWidth, s - steps[0], steps[steps.length - 1] - s);
      var lo = bound(s - h, false), hi = bound(s + h, true);
      return (prefix[hi] - prefix[lo]) / (hi - lo);
    });
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
    return a === b || (a.length === b.length && a.every(function (v, i) { return v === b[i]; }));
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
      var s = 0, n = 0, mn = Infinity, mx = -Infinity, r, v;
      for (r = 0; r < ys.length; r++) {
        if ((v = ys[r][i]) == null) continue;
        s += v; n++;
        mn = Math.min(mn, v); mx = Math.max(mx, v);
      }
      if (n === 0) { mean.push(null); lo.push(null); hi.push(null); continue; }
      var m = s / n, ss = 0;
      mean.push(m);
      if (state.band === "minmax") { lo.push(mn); hi.push(mx); continue; }
      for (r = 0; r < ys.length; r++) if ((v = ys[r][i]) != null) ss += (v - m) * (v - m);
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

  // ---- axes -------------------------------------------------------------------------------------------------------

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
    var stride = Math.max(1, Math.ceil((max - min) / 8));
    for (var k = Math.ceil(min / stride) * stride; k <= max + 1e-9; k += stride) out.push(k);
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

  // ---- panels: one column each, one chart (facet) per value of state.facetBy ------------------------------------

  function panelData(panel, facet) {
    var tables = [], series = [{}], bands = [], roles = [], counter = { n: 0 }, inFacet = {};
    facet.runs.forEach(function (ri) { inFacet[ri] = true; });
    groups.forEach(function (g, gi) {
      var pts = [];
      g.runs.forEach(function (ri) {
        var p = inFacet[ri] && runPoints(runs[ri], panel.column);
        if (!p) return;
        var raw = positive(p.x, p.y, panel.xlog, panel.ylog, counter);
        pts.push({ x: raw.x, y: smooth(raw.x, raw.y, state.smoothing), run: ri });
        tables.push([raw.x, panel.ylog ? log10s(raw.y) : raw.y]);
        series.push({ label: runs[ri].name, group: gi, width: 1, stroke: stroke(g, ri) });
        roles.push({ group: gi, run: ri, role: "run" });
      });
      if (pts.length === 0) return;
      var st = groupStats(pts);
      tables.push(panel.ylog ? [st.x, log10s(st.lo), log10s(st.hi), log10s(st.mean)] : [st.x, st.lo, st.hi, st.mean]);
      var base = series.length;
      series.push({ label: g.label + " low", group: gi, width: 0, stroke: g.color },
                  { label: g.label + " high", group: gi, width: 0, stroke: g.color },
                  { label: g.label, group: gi, width: 2, stroke: stroke(g) });
      roles.push({ group: gi, role: "lo" }, { group: gi, role: "hi" }, { group: gi, role: "mean" });
      bands.push({ series: [base + 1, base], fill: alpha(g.color, 0.18) });
    });
    return { data: tables.length ? uPlot.join(tables) : [[]], series: series, bands: bands, roles: roles,
             dropped: counter.n };
  }

  // Faint runs behind their group's mean; an arms-table row shows its runs (ri) or means at full strength, the others
  // fainter.
  function stroke(g, ri) {
    return function () {
      var h = state.highlight, on = h && (ri == null ? g.runs : [ri]).some(function (r) { return h.indexOf(r) >= 0; });
      if (ri == null) return !h || on ? g.color : alpha(g.color, 0.25);
      return h ? (on ? g.color : alpha(g.color, 0.06)) : alpha(g.color, state.smoothing > 0 ? 0.3 : 0.35);
    };
  }

  // The y range every facet of a panel shares, so that their curves compare at a glance; null for one facet.
  function sharedRange(built) {
    var lo = Infinity, hi = -Infinity;
    if (built.length < 2) return null;
    built.forEach(function (b) {
      b.pd.data.slice(1).forEach(function (col) {
        col.forEach(function (v) { if (v != null) { lo = Math.min(lo, v); hi = Math.max(hi, v); } });
      });
    });
    return hi >= lo ? uPlot.rangeNum(lo, hi, 0.1, true) : null;  // as uPlot ranges one chart
  }

  function chartSize(f) {
    var w = Math.max(240, f.plotEl.clientWidth || 420);
    return { width: w, height: Math.round(Math.min(340, Math.max(200, w * 0.62))) };
  }

  function drawPanel(panel) {
    panel.facets.forEach(function (f) { if (f.chart) f.chart.destroy(); });
    panel.grid.textContent = "";
    var built = facets.map(function (facet) { return { facet: facet, pd: panelData(panel, facet) }; });
    var range = sharedRange(built), dropped = 0;
    panel.facets = built.map(function (b) {
      var f = { value: b.facet.value, label: b.facet.label, roles: b.pd.roles, plotEl: el("div", { class: "plot" }) };
      panel.grid.appendChild(el("div", { class: "facet" }, [b.facet.label ? el("h4", { text: b.facet.label }) : null,
                                                             f.plotEl]));
      var size = chartSize(f);
      f.chart = new uPlot({
        width: size.width, height: size.height,
        legend: { show: false },
        cursor: { drag: { x: true, y: true, uni: 30 } },
        scales: { x: { time: false, distr: panel.xlog ? 3 : 1, log: 10 },
                  y: range ? { distr: 1, range: function () { return range.slice(); } } : { distr: 1 } },
        axes: [{ label: "step", labelSize: 20 }, panel.ylog ? logAxis() : linearAxis()],
        series: b.pd.series.map(function (s, i) {
          if (i === 0) return { label: "step" };
          var g = groups[s.group];
          return { label: s.label, stroke: s.stroke, width: s.width, points: { show: false }, spanGaps: false,
                   dash: s.width ? dashPx(g.dash, s.width, devicePixelRatio) : undefined, show: !state.hidden[g.key] };
        }),
        bands: b.pd.bands,
        hooks: { setCursor: [function (u) { showValues(panel, f, u); }] }
      }, b.pd.data, f.plotEl);
      dropped += b.pd.dropped;
      return f;
    });
    panel.note.textContent = dropped > 0 ? dropped + " points at or below 0 are not shown on the log axis." : "";
    panel.drawCount = (panel.drawCount || 0) + 1;
  }

  function showValues(panel, f, u) {
    var idx = u.cursor.idx;
    if (idx == null) { panel.readout.textContent = ""; return; }
    var parts = [(f.label ? f.label + ", " : "") + "step " + fmt(u.data[0][idx])];
    f.roles.forEach(function (r, i) {
      if (r.role !== "mean" || state.hidden[groups[r.group].key]) return;
      var v = u.data[i + 1][idx];
      if (v != null) parts.push(groups[r.group].label + ": " + fmt(panel.ylog ? Math.pow(10, v) : v));
    });
    panel.readout.textContent = parts.join("   ");
  }

  function checkbox(cls, label, checked, onchange) {
    var box = el("input", { type: "checkbox", class: cls });
    box.checked = checked;
    box.addEventListener("change", function () { onchange(box.checked); });
    return el("label", { class: "toggle" }, [box, document.createTextNode(" " + label)]);
  }

  function addPanel(column) {
    var panel = { column: column, xlog: false, ylog: false, facets: [] };
    var sel = el("select", { class: "metric", title: "metrics.csv column", onchange: function () {
      panel.column = sel.value; drawPanel(panel);
    } }, data.columns.map(function (c) { return el("option", { value: c, text: c }); }));
    sel.value = column;
    panel.grid = el("div", { class: "facets" });
    panel.readout = el("div", { class: "readout" });
    panel.note = el("div", { class: "panel-note" });
    panel.el = el("section", { class: "panel" }, [el("div", { class: "panel-controls" }, [
      sel,
      checkbox("xlog", "log x", false, function (v) { panel.xlog = v; drawPanel(panel); }),
      checkbox("ylog", "log y", false, function (v) { panel.ylog = v; drawPanel(panel); }),
      el("button", { class: "remove", title: "remove this panel", text: "×", onclick: function () {
        panel.facets.forEach(function (f) { f.chart.destroy(); });
        panel.el.remove();
        state.panels.splice(state.panels.indexOf(panel), 1);
      } })
    ]), panel.grid, panel.readout, panel.note]);
    panelsEl.appendChild(panel.el);
    state.panels.push(panel);
    drawPanel(panel);
    return panel;
  }

  function redrawAll() { state.panels.forEach(drawPanel); }
  function eachChart(fn) {
    state.panels.forEach(function (p) { p.facets.forEach(function (f) { fn(f, p); }); });
  }

  // ---- legend (one entry per group, in every facet) ---------------------------------------------------------------

  function setGroupShown(gi, shown) {
    var key = groups[gi].key;
    if (shown) delete state.hidden[key]; else state.hidden[key] = true;
    eachChart(function (f) {
      f.roles.forEach(function (r, i) { if (r.group === gi) f.chart.setSeries(i + 1, { show: shown }); });
    });
    renderLegend();
  }

  function swatch(g) {
    var c = el("canvas", { class: "swatch", width: 30, height: 10 }), ctx = c.getContext("2d");
    ctx.strokeStyle = g.color;
    ctx.lineWidth = 2;
    ctx.setLineDash(dashPx(g.dash, 2));
    ctx.beginPath(); ctx.moveTo(0, 5); ctx.lineTo(30, 5); ctx.stroke();
    return c;
  }

  function renderLegend() {
    legendEl.textContent = "";
    groups.forEach(function (g, gi) {
      var hidden = !!state.hidden[g.key];
      legendEl.appendChild(el("button", { class: "legend-item" + (hidden ? " off" : ""), "data-group": gi,
                                          title: hidden ? "show this group" : "hide this group",
                                          onclick: function () { setGroupShown(gi, hidden); } }, [
        swatch(g), document.createTextNode(g.label + " (" + g.runs.length + (g.runs.length === 1 ? " run)" : " runs)"))
      ]));
    });
    countsEl.textContent = runs.length + (runs.length === 1 ? " run" : " runs") + " in " + groups.length +
      (groups.length === 1 ? " group" : " groups") +
      (state.facetBy ? ", one chart per " + state.facetBy + " (" + facets.length + ")" : "");
    countsEl.setAttribute("data-runs", runs.length);
    countsEl.setAttribute("data-groups", groups.length);
    panelsEl.className = state.facetBy ? "faceted" : "";
  }

  function regroup() {
    groups = computeGroups();
    facets = computeFacets();
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
    var thead = el("thead"), tbody = el("tbody"), tr = el("tr");
    arms.header.forEach(function (h, ci) {
      tr.appendChild(el("th", { text: h, title: "sort", onclick: function () {
        asc = sortCol === ci ? !asc : true;
        sortCol = ci;
        order.sort(function (a, b) {
          var x = arms.rows[a][ci], y = arms.rows[b][ci], vx = sortValue(x), vy = sortValue(y);
          var d = vx != null && vy != null ? vx - vy : vx != null ? -1 : vy != null ? 1 : x < y ? -1 : x > y ? 1 : 0;
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
    return el("table", { id: "arms-table", class: "arms" }, [thead, tbody]);
  }

  function highlight(runIndices) {
    state.highlight = runIndices;
    eachChart(function (f) { f.chart.redraw(false, false); });
  }

  // ---- summary figures (report.md's, from summary_figures) ---------------------------------------------------------

  // One figure: a line per SummaryLine in its colour and dash (picture.h's summary_styles, as the PNGs), its points
  // with error bars (lo to hi, drawn after the lines). Points are [x, y, lo, hi, runs, diverged runs left out].
  function summaryChart(fig, host, width) {
    var tables = fig.lines.map(function (line) {
      var pts = line.points.filter(function (p) { return p[0] != null && (!fig.log_x || p[0] > 0); });
      var ys = pts.map(function (p) { return p[1]; });
      return [pts.map(function (p) { return p[0]; }), fig.log_y ? log10s(ys) : ys];
    });
    if (!tables.length) return null;
    // Values show while hovering; otherwise the legend holds the line names only (no "--" placeholders).
    var series = [{ label: fig.x_label, value: function (u, v) { return v == null ? "" : fmt(v); } }].concat(
      fig.lines.map(function (line) {
        return { label: line.label, stroke: line.colour, width: line.theory ? 1.5 : 2,
                 dash: dashPx(line.dash, line.theory ? 1.5 : 2, devicePixelRatio),
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
        ctx.strokeStyle = line.colour;
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
      scales: { x: { time: false, distr: fig.log_x ? 3 : 1, log: fig.name.indexOf("d_k") >= 0 ? 2 : 10 },
                y: { distr: 1, range: yRange } },
      axes: [{ label: fig.x_label, labelSize: 20 },
             // The y label runs along the plot's height: "(log scale)" is left to the axis's powers of ten so
             // the longest label (the score gradient's) is not cut.
             fig.log_y ? logAxis({ label: fig.y_label.replace(/ \(log scale\)$/, "") })
                       : linearAxis({ label: fig.y_label })],
      series: series,
      hooks: { draw: [errorBars] }
    }, uPlot.join(tables), host);
  }

  var summaryFigures = [];
  function renderSummary() {
    if (!data.summary || !data.summary.length) return null;
    var grid = el("div", { id: "summary-figures" });
    data.summary.forEach(function (fig) {
      var host = el("div", { class: "plot" });
      grid.appendChild(el("div", { class: "panel summary-figure", "data-figure": fig.name }, [
        el("h3", { text: fig.title }), host,
        el("p", { class: "caption", text: fig.caption }),
        fig.notes.length ? list(fig.notes, { class: "caption" }) : null]));
      summaryFigures.push({ fig: fig, host: host });
    });
    return el("section", null, [
      el("h2", { text: "Summary figures" }),
      el("p", { class: "hint", text: "As in report.md. Click a line in a legend to hide it; hover for values." }),
      grid]);
  }
  function drawSummary() {
    summaryFigures.forEach(function (s) {
      if (s.chart) s.chart.destroy();
      s.chart = summaryChart(s.fig, s.host, Math.max(280, s.host.clientWidth || 420));
    });
  }

  function list(items, attrs) { return el("ul", attrs, items.map(function (t) { return el("li", { text: t }); })); }
  function listSection(title, items) {
    return items && items.length ? el("details", null, [el("summary", { text: title + " (" + items.length + ")" }),
                                                        list(items)]) : null;
  }
  function text(s) { return document.createTextNode(s); }

  // ---- page -------------------------------------------------------------------------------------------------------

  var app = document.getElementById("app");
  app.textContent = "";
  document.title = data.title;
  var countsEl = el("span", { id: "counts" }), legendEl = el("div", { id: "legend" });
  var panelsEl = el("div", { id: "panels" });

  var common = Object.keys(data.common_settings).map(function (k) { return k + "=" + data.common_settings[k]; });
  var groupBoxes = el("div", { id: "group-by" }, [el("span", { class: "label", text: "group by:" })]);
  data.group_keys.forEach(function (k) {
    groupBoxes.appendChild(checkbox("group-key", k, state.groupBy.indexOf(k) >= 0, function (on) {
      state.groupBy = data.group_keys.filter(function (g) { return g === k ? on : state.groupBy.indexOf(g) >= 0; });
      regroup();
    }));
  });
  if (!data.group_keys.length) groupBoxes.appendChild(el("span", { text: "(every run has the same settings)" }));
  var facetSel = el("select", { id: "facet-by", title: "one chart per value of this setting in every panel",
                                onchange: function () { state.facetBy = facetSel.value; regroup(); } },
    [el("option", { value: "", text: "one chart per panel" })].concat(data.group_keys.map(function (k) {
      return el("option", { value: k, text: "a chart per " + k });
    })));
  facetSel.value = state.facetBy;
  var bandSel = el("select", { id: "band", onchange: function () { state.band = bandSel.value; redrawAll(); } }, [
    el("option", { value: "sd", text: "band: mean ± sd" }), el("option", { value: "minmax", text: "band: min to max" })
  ]);
  // The slider reaches a tenth of the longest run, and at least twice the figures' smoothing it starts at.
  var lastStep = 0, smoothOut = el("output", { id: "smoothing-value" });
  runs.forEach(function (r) { r.series.x.forEach(function (x) { lastStep = Math.max(lastStep, x[x.length - 1] || 0); }); });
  var smoothIn = el("input", { id: "smoothing", type: "range", min: "0", step: "1", value: String(state.smoothing),
                               max: String(Math.max(1, Math.ceil(lastStep / 10), 2 * state.smoothing)) });
  function showSmoothing() { smoothOut.textContent = state.smoothing > 0 ? "± " + state.smoothing + " steps" : "off"; }
  smoothIn.addEventListener("input", function () { state.smoothing = +smoothIn.value; showSmoothing(); redrawAll(); });
  showSmoothing();
  var details = [listSection("The usual story: holds", data.checks && data.checks.holds),
                 listSection("The usual story: does NOT hold", data.checks && data.checks.fails),
                 listSection("The usual story: not decided", data.checks && data.checks.undecided)];
  var csv = function (id, label, name, table) {
    return el("button", { id: id, text: label, onclick: function () { download(name, table.header, table.rows); } });
  };
  [
    el("header", null, [
      el("h1", { text: data.title }),
      el("p", { class: "summary" }, [countsEl, text(data.downsampled
        ? "; long series downsampled by min-max buckets (spikes kept; see below)." : "; every point shown.")]),
      common.length ? el("details", { class: "common" }, [el("summary", { text: "Settings shared by every run" }),
                                                          el("p", { text: common.join(", ") })]) : null]),
    data.findings && data.findings.length ? el("section", { id: "findings" }, [
      el("h2", { text: "Findings" }),
      el("ul", null, data.findings.map(function (f) {
        // Details on this page where it has them (the summary figures), else in report.md beside it.
        var href = f.anchor === "summary-figures" ? "#" + f.anchor : "report.md#" + f.anchor;
        return el("li", null, [text(f.text + " "),
                               el("a", { href: href, class: "details-link", text: "→ details" })]);
      }))]) : null,
    data.explain ? el("p", { id: "explain-link" }, [
      text("The argument for 1/sqrt(d_k), step by step, measured on this model and these runs: "),
      // A directory name may hold "#", "?", "%" or a space: each path segment is encoded, the "/"s kept.
      el("a", { href: data.explain.split("/").map(encodeURIComponent).join("/"), text: data.explain })]) : null,
    data.notes.length ? el("details", { id: "notes", open: "" }, [
      el("summary", { text: "What this page leaves out or changes (" + data.notes.length + ")" }),
      // A note is one line; the runs or columns it counts are listed behind it.
      el("ul", null, data.notes.map(function (n) {
        return el("li", null, [text(n.text), n.items.length ? el("details", null, [
          el("summary", { text: "list (" + n.items.length + ")" }),
          el("ul", null, n.items.map(function (item) { return el("li", { text: item }); }))]) : null]);
      }))]) : null,
    el("div", { id: "controls" }, [groupBoxes, el("div", { class: "row" }, [
      facetSel, bandSel,
      el("label", { title: "centred moving average over ± this many steps, as the PNG figures' means (their " +
                           "default); 0 = off. The runs stay raw, faint behind." },
         [text("smoothing "), smoothIn, text(" "), smoothOut]),
      el("button", { id: "add-panel", text: "add panel", onclick: function () { addPanel(data.columns[0]); } }),
      el("span", { class: "hint", text: "drag to zoom, double-click to reset; click a group to hide it" })])]),
    legendEl, panelsEl, renderSummary(),
    el("h2", { text: "Arms" }),
    el("p", { class: "hint", text: "As in report.md: runs that differ only in seed. Click a column to sort, hover or " +
                                   "click a row to highlight its runs." }),
    renderArms(),
    el("div", { class: "downloads" }, [
      csv("download-arms", "download arms table (CSV)", "arms.csv", data.arms),
      csv("download-final", "download final metrics of every run (CSV)", "final_metrics.csv", data.final)]),
    details.some(Boolean) ? el("h2", { text: "Details" }) : null,
    details.some(Boolean) ? el("section", { id: "details" }, details) : null
  ].forEach(function (e) { if (e) app.appendChild(e); });

  renderLegend();
  (data.default_panels.length ? data.default_panels : data.columns.slice(0, 1)).forEach(addPanel);
  drawSummary();

  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      eachChart(function (f) { f.chart.setSize(chartSize(f)); });
      drawSummary();
    }, 100);
  });

  window.xgradPage = {
    state: state, runs: runs, picture: picture,
    groups: function () { return groups; },
    facets: function () { return facets; },
    setGroupShown: setGroupShown,
    summaryCharts: function () { return summaryFigures.map(function (s) { return s.chart; }); },
    csvCell: csvCell,
    smooth: smooth,
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
