// explain.html's own script: reads what `xgrad explain` measured (the page's JSON block, written by
// report/explain_output.cpp) and walks through the argument for 1/sqrt(d_k) in five sections, drawing its figures with
// uPlot and the attention heatmaps on canvases. Embedded in the page by the build (report/web/embed.cmake); runs from
// file:// with no network. Text from the data is only ever set as textContent, never parsed as HTML.
// window.xgradExplain exposes the state the browser test (tests/browser/explain_page_test.js) checks.
(function () {
  "use strict";

  var started = performance.now();
  var data = JSON.parse(document.getElementById("xgrad-explain").textContent);
  // figures: every figure box, in page order ({id, host, charts, canvases, drawCount}); a figure two sections name
  // is drawn in both.
  var state = { dk: 0, figures: [] };
  var sliderFigures = { score_hist: drawHistograms, sorted_weights: drawSortedWeights, heatmap: drawHeatmaps };
  var wideFigures = { score_hist: 1, sorted_weights: 1, heatmap: 1, runs_vs_dk: 1 };  // the page's full width

  // ---- elements and numbers ---------------------------------------------------------------------------------------

  // An element with a class and plain text (textContent: the data's strings are never HTML).
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = String(text);
    return e;
  }
  function append(parent, children) {
    children.forEach(function (c) { if (c) parent.appendChild(c); });
    return parent;
  }

  function num(v) {
    if (v == null || !isFinite(v)) return "—";
    var a = Math.abs(v);
    return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(2) : String(+v.toPrecision(3));
  }
  function finite(v) { return typeof v === "number" && isFinite(v); }

  // ---- arms -------------------------------------------------------------------------------------------------------

  // The i-th scale's colour: data.scale_colours[scale] when the data has it ({scale: "#rrggbb"}, optional; not in the
  // contract), else a palette's.
  var armColours = ["#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"];
  function armColour(i) {
    var scale = data.scales[i], given = data.scale_colours && data.scale_colours[scale];
    return given || armColours[i % armColours.length];
  }
  // The colour of a per_dk arm: its scale's (arms are in scales order; by position when the scale is unknown).
  function scaleColour(scale, i) {
    var k = data.scales.indexOf(scale);
    return armColour(k >= 0 ? k : i);
  }
  function armLabel(scale) { return (data.scale_labels && data.scale_labels[scale]) || scale; }
  function translucent(hex, a) {
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + a + ")";
  }

  // The rows of `rows` (points or runs.points) of one scale, by d_k.
  function armRows(rows, scale) {
    return (rows || []).filter(function (p) { return p.scale === scale && finite(p.d_k); })
                       .sort(function (a, b) { return a.d_k - b.d_k; });
  }

  // ---- charts -----------------------------------------------------------------------------------------------------

  // A log axis is drawn as log10 of the values on a linear scale, ticks at whole decades (uPlot's own log scale
  // rounds its labels, and score gradients reach 1e-30).
  function toLog(v) { return finite(v) && v > 0 ? Math.log10(v) : null; }
  function decadeRange(u, min, max) {
    if (min == null || max == null) return [0, 1];
    var lo = Math.floor(min), hi = Math.ceil(max);
    return hi > lo ? [lo, hi] : [lo - 1, hi + 1];
  }
  function decadeSplits(u, axis, min, max) {
    var step = Math.max(1, Math.ceil((max - min) / 6)), out = [];
    for (var k = Math.ceil(min); k <= max + 1e-9; k += step) out.push(k);
    return out;
  }
  function decadeLabel(k) { return k >= -2 && k <= 3 ? String(+Math.pow(10, k).toPrecision(1)) : "1e" + k; }

  function axesFor(spec) {
    var x = { label: spec.xLabel, labelSize: 20 };
    if (spec.integerX) x.incrs = [1, 2, 5, 10, 20, 50, 100, 200, 500];
    var y = { label: spec.yLabel, labelSize: 20, size: 56 };
    if (spec.logY) {
      y.splits = decadeSplits;
      y.values = function (u, splits) { return splits.map(decadeLabel); };
    }
    return [x, y];
  }
  function scalesFor(spec) {
    var x = { time: false };
    if (spec.logX) { x.distr = 3; x.log = spec.logX; }
    var y = { auto: true };
    if (spec.logY) y.range = function (u, min, max) { return decadeRange(u, barsMin(spec, min), barsMax(spec, max)); };
    else if (spec.yRange) y.range = spec.yRange;
    return { x: x, y: y };
  }

  // One line of a chart: {label, colour, x, y (x increasing), dash, width, points, pointsOnly, stepped, fill}.
  function seriesFor(line, logY) {
    var s = { label: line.label, stroke: line.colour, width: line.width || 2, dash: line.dash, spanGaps: true,
              points: { show: !!line.pointsOnly || !!line.points, size: line.pointsOnly ? 8 : 6 },
              value: function (u, v) { return v == null ? "" : num(logY ? Math.pow(10, v) : v); } };
    if (line.pointsOnly) s.paths = function () { return null; };
    if (line.stepped) s.paths = uPlot.paths.stepped({ align: 1 });
    if (line.fill) s.fill = line.fill;
    return s;
  }

  // A uPlot chart of `spec.lines` in `host`; spec: {lines, xLabel, yLabel, logX (base or 0), logY, yRange, integerX,
  // bars, width, height}. bars: error bars, [{colour, x, lo, hi}] (logY charts).
  function lineChart(host, spec) {
    var lines = spec.lines.filter(function (l) { return l.x.length > 0; });
    if (!lines.length) return null;
    var tables = lines.map(function (l) {
      return [l.x, spec.logY ? l.y.map(toLog) : l.y.map(function (v) { return finite(v) ? v : null; })];
    });
    var width = spec.width || Math.max(300, host.clientWidth || 520);
    return new uPlot({
      width: width, height: spec.height || Math.round(Math.min(360, width * 0.62)),
      scales: scalesFor(spec), axes: axesFor(spec),
      series: [{ label: spec.xLabel, value: function (u, v) { return v == null ? "" : num(v); } }]
        .concat(lines.map(function (l) { return seriesFor(l, spec.logY); })),
      hooks: { draw: [function (u) { drawBars(u, spec.bars || []); }] }
    }, uPlot.join(tables), host);
  }

  // Error bars' extent, in the chart's y units (log10 on a log axis), for its y range.
  function barEnds(spec) {
    var out = [];
    (spec.bars || []).forEach(function (b) { out = out.concat(b.lo.map(toLog), b.hi.map(toLog)); });
    return out.filter(function (v) { return v != null; });
  }
  function barsMin(spec, min) {
    return barEnds(spec).reduce(function (m, v) { return m == null || v < m ? v : m; }, min);
  }
  function barsMax(spec, max) {
    return barEnds(spec).reduce(function (m, v) { return m == null || v > m ? v : m; }, max);
  }

  // Vertical bars from lo to hi at each x (on a log y axis), with short caps, clipped to the plot.
  function drawBars(u, bars) {
    var ctx = u.ctx;
    ctx.save();
    ctx.beginPath();
    ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
    ctx.clip();
    ctx.lineWidth = devicePixelRatio;
    bars.forEach(function (b) {
      ctx.strokeStyle = b.colour;
      b.x.forEach(function (x, k) { barAt(u, ctx, x, toLog(b.lo[k]), toLog(b.hi[k])); });
    });
    ctx.restore();
  }
  function barAt(u, ctx, x, lo, hi) {
    if (hi == null || !(x > 0)) return;
    if (lo == null) lo = u.scales.y.min;  // a 10th percentile of 0: the bar runs to the bottom of the log axis
    var px = u.valToPos(x, "x", true), y1 = u.valToPos(lo, "y", true), y2 = u.valToPos(hi, "y", true);
    var cap = 4 * devicePixelRatio;
    ctx.beginPath();
    ctx.moveTo(px, y1); ctx.lineTo(px, y2);
    ctx.moveTo(px - cap, y1); ctx.lineTo(px + cap, y1);
    ctx.moveTo(px - cap, y2); ctx.lineTo(px + cap, y2);
    ctx.stroke();
  }

  // x of a log axis: only positive values.
  function positiveX(rows, key) {
    return rows.filter(function (p) { return finite(p[key]) && p[key] > 0; });
  }
  // Per arm the line of `key` of `rows` against d_k.
  function armLine(rows, scale, i, key, extra) {
    var r = armRows(rows, scale);
    return Object.assign({ label: armLabel(scale), colour: armColour(i), points: true,
                           x: r.map(function (p) { return p.d_k; }), y: r.map(function (p) { return p[key]; }) },
                         extra || {});
  }
  function perArm(rows, key, extra) {
    return data.scales.map(function (scale, i) { return armLine(rows, scale, i, key, extra); });
  }

  // ---- the d_k control's figures ----------------------------------------------------------------------------------

  function armsAt(dkIndex) { return (data.per_dk[dkIndex] || { arms: [] }).arms; }

  // A row of small boxes, one per arm, in the figure's host (cleared first).
  function armBoxes(fig) {
    destroyCharts(fig);
    fig.host.textContent = "";
    var row = append(el("div", "arm-row"), []);
    fig.host.appendChild(row);
    return row;
  }
  function destroyCharts(fig) {
    (fig.charts || []).forEach(function (c) { if (c) c.destroy(); });
    fig.charts = [];
    fig.canvases = [];
  }
  function armBox(row, arm, i, subtitle) {
    var title = armLabel(arm.scale) + (subtitle ? " — " + subtitle : "");
    var box = append(el("div", "arm"), [el("div", "arm-title", title)]);
    box.style.borderTopColor = scaleColour(arm.scale, i);
    row.appendChild(box);
    return box;
  }

  // The histogram as steps over its bin edges, and the normal density N(score_mean, theory_std) over the same span.
  function histLines(arm, colour) {
    var h = arm.hist || {}, d = h.density || [], x = [], y = [];
    if (!finite(h.x0) || !finite(h.width) || !d.length) return [];
    for (var i = 0; i <= d.length; i++) {
      x.push(h.x0 + i * h.width);
      y.push(i < d.length ? d[i] : 0);
    }
    var lines = [{ label: "measured", colour: colour, x: x, y: y, stepped: true, width: 1.5,
                   fill: translucent(colour, 0.25) }];
    var sd = arm.theory_std, mean = finite(arm.score_mean) ? arm.score_mean : 0;
    if (finite(sd) && sd > 0) lines.push(normalLine(mean, sd, x[0], x[x.length - 1]));
    return lines;
  }
  function normalLine(mean, sd, lo, hi) {
    var x = [], y = [], n = 160;
    for (var i = 0; i <= n; i++) {
      var v = lo + (hi - lo) * i / n, z = (v - mean) / sd;
      x.push(v);
      y.push(Math.exp(-0.5 * z * z) / (sd * Math.sqrt(2 * Math.PI)));
    }
    return { label: "N(mean, theory std)", colour: "#222", x: x, y: y, width: 1.5, dash: [6, 4] };
  }
  function drawHistograms(fig) {
    var row = armBoxes(fig);
    armsAt(state.dk).forEach(function (arm, i) {
      var box = armBox(row, arm, i, "std " + num(arm.score_std) + " (theory " + num(arm.theory_std) + ")");
      var host = box.appendChild(el("div", "plot"));
      var lines = histLines(arm, scaleColour(arm.scale, i));
      fig.charts.push(lineChart(host, { lines: lines, xLabel: "score", yLabel: "density", width: armWidth(fig),
                                        height: 220 }));
    });
  }
  function armWidth(fig) {
    var n = Math.max(1, data.scales.length);
    return Math.max(240, Math.floor(((fig.host.clientWidth || 600) - 16 * (n - 1)) / n) - 12);
  }

  function drawSortedWeights(fig) {
    destroyCharts(fig);
    fig.host.textContent = "";
    var lines = armsAt(state.dk).map(function (arm, i) {
      var w = arm.sorted_weights || [];
      return { label: armLabel(arm.scale), colour: scaleColour(arm.scale, i), points: true,
               x: w.map(function (v, k) { return k + 1; }), y: w };
    });
    fig.charts.push(lineChart(fig.host, { lines: lines, xLabel: "rank of the key (largest weight first)",
                                          yLabel: "attention weight", yRange: [0, 1], integerX: true }));
  }

  // ---- heatmaps ---------------------------------------------------------------------------------------------------

  // A sequential colour scale from dark (weight 0) to bright (weight 1), viridis' stops; masked cells are blank.
  var rampStops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  function rampColour(w) {
    var t = Math.max(0, Math.min(1, w)) * (rampStops.length - 1), k = Math.min(rampStops.length - 2, Math.floor(t));
    var f = t - k, a = rampStops[k], b = rampStops[k + 1];
    return "rgb(" + [0, 1, 2].map(function (c) { return Math.round(a[c] + (b[c] - a[c]) * f); }).join(",") + ")";
  }
  var maskedColour = "#ffffff";

  function heatmapCanvas(matrix, size) {
    var n = matrix.length, cell = Math.max(4, Math.floor(size / Math.max(1, n)));
    var canvas = el("canvas", "heatmap");
    canvas.width = canvas.height = cell * n;
    var ctx = canvas.getContext("2d");
    matrix.forEach(function (row, q) {
      (row || []).forEach(function (w, k) {
        ctx.fillStyle = finite(w) ? rampColour(w) : maskedColour;
        ctx.fillRect(k * cell, q * cell, cell, cell);
      });
    });
    return canvas;
  }
  function colourScale() {
    var bar = el("canvas", "colour-bar");
    bar.width = 160;
    bar.height = 12;
    var ctx = bar.getContext("2d");
    for (var x = 0; x < bar.width; x++) {
      ctx.fillStyle = rampColour(x / (bar.width - 1));
      ctx.fillRect(x, 0, 1, bar.height);
    }
    var masked = el("span", "swatch");
    masked.style.background = maskedColour;
    return append(el("div", "colour-scale"), [el("span", null, "weight 0"), bar, el("span", null, "1"), masked,
                                              el("span", null, "masked")]);
  }
  function drawHeatmaps(fig) {
    var row = armBoxes(fig);
    armsAt(state.dk).forEach(function (arm, i) {
      var box = armBox(row, arm, i, arm.heatmap_label || "");
      var canvas = heatmapCanvas(arm.heatmap || [], Math.min(300, armWidth(fig)));
      canvas.setAttribute("role", "img");
      canvas.setAttribute("aria-label", "attention weights, " + armLabel(arm.scale) + ", d_k " + data.d_ks[state.dk]);
      var readout = el("div", "heat-readout", " ");
      showWeightOnHover(canvas, arm.heatmap || [], readout);
      append(box, [el("div", "axis-note", "query ↓  key →"), canvas, readout]);
      fig.canvases.push(canvas);
    });
    fig.host.appendChild(colourScale());
  }
  // The weight under the pointer, as "query q, key k: w" (0-based, as the matrix is stored).
  function showWeightOnHover(canvas, matrix, readout) {
    canvas.addEventListener("mousemove", function (e) {
      var r = canvas.getBoundingClientRect(), n = matrix.length;
      var q = Math.floor((e.clientY - r.top) / r.height * n), k = Math.floor((e.clientX - r.left) / r.width * n);
      var w = (matrix[q] || [])[k];
      readout.textContent = "query " + q + ", key " + k + ": " + (finite(w) ? num(w) : "masked");
    });
    canvas.addEventListener("mouseleave", function () { readout.textContent = " "; });
  }

  // ---- the figures against d_k and against the score std ----------------------------------------------------------

  function stdGuide(lines) {
    // A slope-1/2 line through the first arm's theory std at the smallest d_k: where sqrt(d_k) growth would go.
    var first = armRows(data.points, data.scales[0]).filter(function (p) { return finite(p.theory_std); })[0];
    if (!first) return;
    var x = data.d_ks.slice();
    lines.push({ label: "slope 1/2", colour: "#888", dash: [2, 3], width: 1, x: x,
                 y: x.map(function (d) { return first.theory_std * Math.sqrt(d / first.d_k); }) });
  }
  function drawScoreStd(host) {
    var lines = perArm(data.points, "score_std", { pointsOnly: true });
    data.scales.forEach(function (scale, i) {
      lines.push(armLine(data.points, scale, i, "theory_std", { label: armLabel(scale) + ": theory", width: 1.5,
                                                                dash: [6, 4], points: false }));
    });
    stdGuide(lines);
    return lineChart(host, { lines: lines, xLabel: "d_k", yLabel: "score std", logX: 2, logY: true });
  }

  // Per arm one point per d_k at (score std, value), over the Monte Carlo curve.
  function drawAgainstStd(host, curveKey, pointKey, yLabel) {
    var curves = data.curves || {}, lines = [];
    if (curves.std && curves[curveKey])
      lines.push({ label: "softmax of normal scores", colour: "#444", width: 1.5, x: curves.std, y: curves[curveKey] });
    data.scales.forEach(function (scale, i) {
      var r = positiveX(armRows(data.points, scale), "score_std").sort(function (a, b) {
        return a.score_std - b.score_std;
      });
      lines.push({ label: armLabel(scale), colour: armColour(i), pointsOnly: true,
                   x: r.map(function (p) { return p.score_std; }), y: r.map(function (p) { return p[pointKey]; }) });
    });
    return lineChart(host, { lines: lines, xLabel: "score std", yLabel: yLabel, logX: 10 });
  }

  // The median score gradient per arm, with bars from its 10th to its 90th percentile.
  function drawScoreGrad(host) {
    var bars = data.scales.map(function (scale, i) {
      var r = armRows(data.points, scale);
      return { colour: armColour(i), x: r.map(function (p) { return p.d_k; }),
               lo: r.map(function (p) { return p.score_grad_p10; }),
               hi: r.map(function (p) { return p.score_grad_p90; }) };
    });
    return lineChart(host, { lines: perArm(data.points, "score_grad_median"), bars: bars, xLabel: "d_k",
                             yLabel: "‖dLoss/ds‖ per query (median)", logX: 2, logY: true });
  }

  function drawWGrad(host) {
    var lines = [];
    data.scales.forEach(function (scale, i) {
      lines.push(armLine(data.points, scale, i, "grad_norm_w_q", { label: armLabel(scale) + " W_q" }));
      lines.push(armLine(data.points, scale, i, "grad_norm_w_k", { label: armLabel(scale) + " W_k", dash: [8, 4] }));
    });
    return lineChart(host, { lines: lines, xLabel: "d_k", yLabel: "gradient norm", logX: 2, logY: true });
  }

  // Per arm the share of saturated queries whose peak is on the answer, and (dashed) the share chance gives.
  function drawEarned(host) {
    var lines = perArm(data.points, "earned_share").concat(data.scales.map(function (scale, i) {
      return armLine(data.points, scale, i, "chance_share", { label: armLabel(scale) + ": chance", dash: [4, 4],
                                                              width: 1.5, points: false });
    }));
    if (!lines.some(function (l) { return l.y.some(finite); })) return null;
    return lineChart(host, { lines: lines, xLabel: "d_k", yLabel: "share of saturated queries", logX: 2,
                             yRange: [0, 1] });
  }

  function drawSaturated(host) {
    return lineChart(host, { lines: perArm(data.points, "saturated_share"), xLabel: "d_k",
                             yLabel: "share saturated (max weight > 0.99)", logX: 2, yRange: [0, 1] });
  }

  // With --runs: one line per label the runs give (an arm; its scale's colour, dashed for a further label of the
  // same scale) against d_k.
  // A run's d_k must be positive (a log axis); on a log y axis a value <= 0 is a gap.
  function runLines(points, key, logY) {
    var labels = [], seen = {};
    points.forEach(function (p) {
      var l = p.label || armLabel(p.scale);
      if (!(l in seen)) { seen[l] = labels.length; labels.push({ label: l, scale: p.scale, rows: [] }); }
      labels[seen[l]].rows.push(p);
    });
    var perScale = {};
    return labels.map(function (g) {
      var i = Math.max(0, data.scales.indexOf(g.scale)), k = perScale[g.scale] = (perScale[g.scale] || 0) + 1;
      var rows = g.rows.filter(function (p) { return finite(p.d_k) && p.d_k > 0; })
                       .sort(function (a, b) { return a.d_k - b.d_k; });
      return { label: g.label, colour: armColour(i), points: true, dash: k > 1 ? [8, 4] : undefined,
               x: rows.map(function (p) { return p.d_k; }),
               y: rows.map(function (p) { return logY && !(p[key] > 0) ? null : p[key]; }) };
    });
  }
  // One small chart per quantity.
  var runQuantities = [["final_loss", "final loss (nats)", false], ["steps_to_loss", "steps to the loss threshold", false],
                       ["saturated_share", "saturated share", false],
                       ["score_grad_relative", "score gradient / loss", true]];
  function drawRuns(host, fig) {
    var runs = data.runs;
    if (!runs || !runs.points || !runs.points.length) return null;
    var row = host.appendChild(el("div", "arm-row"));
    var charts = runQuantities.map(function (q) {
      var box = row.appendChild(el("div", "arm"));
      box.appendChild(el("div", "arm-title", q[1]));
      return lineChart(box.appendChild(el("div", "plot")), { lines: runLines(runs.points, q[0], q[2]), xLabel: "d_k",
        yLabel: q[1], logX: 2, logY: q[2], width: Math.max(240, Math.floor((host.clientWidth || 900) / 4) - 16),
        height: 220 });
    });
    if (runs.note) host.appendChild(el("p", "caption", runs.note));
    fig.charts = charts.filter(Boolean);
    return fig.charts[0] || null;
  }

  var drawers = {
    score_std_vs_dk: drawScoreStd,
    entropy_vs_std: function (h) { return drawAgainstStd(h, "entropy", "entropy_mean", "entropy (nats)"); },
    max_prob_vs_std: function (h) { return drawAgainstStd(h, "max_prob", "max_prob_mean", "max weight"); },
    jacobian_vs_std: function (h) {
      return drawAgainstStd(h, "jacobian_norm", "jacobian_norm_mean", "‖diag(p) − ppᵀ‖_F");
    },
    score_grad_vs_dk: drawScoreGrad,
    w_grad_vs_dk: drawWGrad,
    earned_vs_dk: drawEarned,
    saturated_vs_dk: drawSaturated,
    runs_vs_dk: drawRuns
  };

  // ---- drawing ----------------------------------------------------------------------------------------------------

  function drawFigure(fig) {
    if (sliderFigures[fig.id]) {
      sliderFigures[fig.id](fig);
    } else {
      destroyCharts(fig);
      fig.host.textContent = "";
      var draw = drawers[fig.id];
      var chart = draw ? draw(fig.host, fig) : null;
      if (chart && !fig.charts.length) fig.charts = [chart];
      if (!chart) fig.host.appendChild(el("p", "empty", draw ? "No data for this figure (see the notes)."
                                                             : "This page does not know how to draw " + fig.id + "."));
    }
    fig.drawCount++;
  }

  function setDk(index) {
    state.dk = Math.max(0, Math.min(data.d_ks.length - 1, index));
    slider.value = String(state.dk);
    sliderValue.textContent = "d_k = " + data.d_ks[state.dk];
    Array.prototype.forEach.call(document.querySelectorAll(".dk-button"), function (b, i) {
      b.classList.toggle("active", i === state.dk);
    });
    state.figures.forEach(function (fig) {
      if (!sliderFigures[fig.id]) return;
      fig.dkLabel.textContent = " (d_k = " + data.d_ks[state.dk] + ")";
      drawFigure(fig);
    });
  }

  // ---- the page ---------------------------------------------------------------------------------------------------

  function figureBox(id) {
    var meta = (data.figures || {})[id] || { title: id, caption: "" };
    var fig = { id: id, host: el("div", "plot-host"), charts: [], canvases: [], drawCount: 0, dkLabel: el("span") };
    var title = append(el("h3", null, meta.title || id), sliderFigures[id] ? [fig.dkLabel] : []);
    fig.box = append(el("figure", "figure"), [title, fig.host, el("figcaption", "caption", meta.caption || "")]);
    fig.box.setAttribute("data-figure", id);
    if (wideFigures[id]) fig.box.classList.add("wide");
    state.figures.push(fig);
    return fig.box;
  }

  var verdictClasses = { holds: 1, fails: 1, partly: 1 };
  function sectionEl(s) {
    var v = s.verdict || {}, cls = verdictClasses[v.verdict_class] ? v.verdict_class : "unknown";
    var head = append(el("h2"), [el("span", "number", s.number), document.createTextNode(" " + (s.title || ""))]);
    var verdict = append(el("p", "verdict " + cls), [el("strong", "verdict-label", v.verdict || ""),
                                                    el("span", "verdict-text", v.text || "")]);
    var figures = append(el("div", "figures"), (s.figures || []).map(figureBox));
    var section = append(el("section", "step"), [head, verdict, el("p", "claim", s.claim || "")]
        .concat((s.paragraphs || []).map(function (p) { return el("p", "paragraph", p); }), [figures]));
    section.id = "section-" + (s.id || s.number);
    section.setAttribute("data-verdict-class", cls);
    return section;
  }

  var slider = el("input");
  var sliderValue = el("output", "dk-value");
  function controls() {
    slider.type = "range";
    slider.id = "dk-slider";
    slider.min = "0";
    slider.max = String(Math.max(0, data.d_ks.length - 1));
    slider.step = "1";
    slider.addEventListener("input", function () { setDk(+slider.value); });
    var ticks = append(el("span", "dk-ticks"), data.d_ks.map(function (d, i) {
      var b = el("button", "dk-button", d);
      b.addEventListener("click", function () { setDk(i); });
      return b;
    }));
    return append(el("div", "controls"), [el("label", "dk-label", "d_k of the histogram, the sorted weights and the " +
                                                                  "heatmaps:"), slider, sliderValue, ticks]);
  }

  function notesEl() {
    var notes = data.notes || [];
    if (!notes.length) return null;
    var d = append(el("details", "notes"), [el("summary", null, "What this page leaves out (" + notes.length + ")"),
                                            append(el("ul"), notes.map(function (n) { return el("li", null, n); }))]);
    d.open = true;
    return d;
  }
  function header() {
    return append(el("header"), [el("h1", null, data.title || "xgrad explain"), el("p", "setup", data.setup || ""),
                                 notesEl()]);
  }

  var app = document.getElementById("app");
  app.textContent = "";
  document.title = data.title || "xgrad explain";
  append(app, [header(), controls()].concat((data.sections || []).map(sectionEl)));

  function drawAll() {
    state.figures.forEach(function (fig) { if (!sliderFigures[fig.id]) drawFigure(fig); });
    setDk(state.dk);
  }
  drawAll();

  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(drawAll, 150);
  });

  window.xgradExplain = { state: state, data: data, setDk: setDk, drawMs: null };
  requestAnimationFrame(function () {
    requestAnimationFrame(function () {
      window.xgradExplain.drawMs = performance.now() - started;
      window.xgradExplain.sinceNavigationMs = performance.now();
    });
  });
})();
