// report.html in a real browser: makes a small sweep with the xgrad executable, runs `xgrad compare` on
// it, opens the page in Debian's chromium (headless) through puppeteer-core, and checks what a person would see:
// no console error or page exception, as many runs and groups as the sweep has, a hidden group's curves gone, a log
// y axis, a redraw on another column, a screenshot that is not blank, no http(s) reference in the file. Then the
// same on runs with bad input (a missing column, NaN/Inf rows, a metrics.csv with no rows): the page still draws and
// lists what it left out. Then the explain link of a report on a sweep whose name holds "#", "?", "%" and a space.
// Last, the default-experiment-like sweep test_report_html writes (the ctest fixture report_page_picture, in
// WORK_DIR/default_experiment): the default view is a chart per d_k in each panel, in the picture's colours and
// dashes, page.js smooths as report/picture.cpp does, and its screenshot is kept.
//   node tests/browser/report_page_test.js XGRAD_EXECUTABLE WORK_DIR
// Needs /usr/bin/chromium (or $CHROMIUM) and `npm ci` at the repository root; without them it fails and says what to
// install. The screenshots stay in WORK_DIR.
"use strict";

const fs = require("fs");
const path = require("path");
const { execFileSync } = require("child_process");

const { commandLine, requireBrowser, makeChecker, openFile, pngVariance } = require("./browser_support");
const [xgrad, workDir] = commandLine("node report_page_test.js XGRAD_EXECUTABLE WORK_DIR", 2);
const { chromium, puppeteer } = requireBrowser();
const { check, runMain } = makeChecker();

function run(args) {
  return execFileSync(xgrad, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"],
                                     env: Object.assign({}, process.env, { OPENBLAS_NUM_THREADS: "1" }) });
}

// The small sweep: 2 d_k x 2 scales x 2 seeds = 8 runs; grouped by all but seed, 4 groups of 2.
function makeSweep(dir) {
  fs.rmSync(dir, { recursive: true, force: true });
  run(["sweep", "--out", dir, "--d-model", "16", "--d-k", "4,8", "--scale", "sqrt_dk,none", "--seeds", "0,1",
       "--steps", "40", "--log-every", "5", "--print-every", "1000", "--jobs", "2"]);
  return fs.readdirSync(path.join(dir, "runs")).map((r) => path.join(dir, "runs", r)).sort();
}

// Bad input from the sweep's runs: one without a column, one with NaN and Inf rows, one with a header and no rows,
// one whose metrics.csv is empty (compare skips it), and one single run as its own group.
function makeBadInput(dir, runs) {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const copy = (src, name) => {
    const dst = path.join(dir, name);
    fs.mkdirSync(dst);
    for (const f of ["config.json", "metrics.csv", "summary.json"])
      if (fs.existsSync(path.join(src, f))) fs.copyFileSync(path.join(src, f), path.join(dst, f));
    return dst;
  };
  const edit = (d, f) => {
    const p = path.join(d, "metrics.csv");
    fs.writeFileSync(p, f(fs.readFileSync(p, "utf8").split("\n")).join("\n"));
  };
  // No accuracy column.
  edit(copy(runs[0], "no_accuracy"), (lines) => lines.map((l) => {
    const cells = l.split(",");
    if (l) cells.splice(2, 1);
    return cells.join(",");
  }));
  // NaN and Inf in the loss of rows 5 to 9, and losses down to 1e-35 in rows 15 to 20 (as a vanishing score
  // gradient has: a log axis must show them). The NaN steps are ones --on-nan skip skipped: in a run that stops at
  // the first (the default), rows after it are not the trainer's and compare drops them.
  const nonfinite = copy(runs[1], "nonfinite");
  const config = JSON.parse(fs.readFileSync(path.join(nonfinite, "config.json"), "utf8"));
  fs.writeFileSync(path.join(nonfinite, "config.json"), JSON.stringify({ ...config, on_nan: "skip" }));
  edit(nonfinite, (lines) => lines.map((l, i) => {
    if (i < 5 || (i > 9 && i < 15) || i > 20 || !l) return l;
    const cells = l.split(",");
    cells[1] = i > 9 ? `1e-${15 + i}` : i % 2 ? "nan" : "inf";
    return cells.join(",");
  }));
  edit(copy(runs[2], "header_only"), (lines) => [lines[0], ""]);
  fs.writeFileSync(path.join(copy(runs[3], "empty_file"), "metrics.csv"), "");
  copy(runs[4], "single");
  return 4;  // runs compare can read
}

async function openPage(browser, file, screenshot) {
  const opened = await openFile(browser, file, "window.xgradPage && window.xgradPage.drawMs != null");
  await opened.page.screenshot({ path: screenshot, fullPage: true });
  return opened;
}

const canvasHash = (page, i) => page.evaluate((i) => {
  const c = window.xgradPage.state.panels[i].facets[0].chart.ctx.canvas.toDataURL();
  let h = 0;
  for (let k = 0; k < c.length; k++) h = (h * 31 + c.charCodeAt(k)) | 0;
  return h;
}, i);

function checkFile(file) {
  const text = fs.readFileSync(file, "utf8");
  const urls = text.match(/https?:\/\/[^\s"'<>)]*/g) || [];
  check(urls.length === 0,
        `no http(s) reference in ${path.basename(file)}` + (urls.length ? `: ${urls.slice(0, 3)}` : ""));
  const m = text.match(/<script type="application\/json" id="xgrad-data">([\s\S]*?)<\/script>/);
  check(m != null, "the page embeds its data block");
  return JSON.parse(m[1]);
}

// The default-experiment-like sweep the ctest fixture report_page_picture writes (test_report_html): the default view
// is a chart per d_k in every panel, 6 groups in each (scaling x optimizer and lr; beta1, momentum split none), mean
// lines in the picture's colour of their scaling and a dash per optimizer and lr, smoothed by default as the PNGs,
// with the smoother of report/picture.cpp. Its screenshot stays in WORK_DIR.
async function checkDefaultExperiment(browser) {
  const dir = path.join(workDir, "default_experiment"), file = path.join(dir, "report.html");
  if (!fs.existsSync(file))
    return check(false, `${file} exists (the ctest fixture report_page_picture writes it: ctest -R report_page)`);
  const data = checkFile(file);
  const shot = path.join(workDir, "report_page_default_experiment.png");
  const { page, errors } = await openPage(browser, file, shot);
  const view = await page.evaluate(() => {
    const x = window.xgradPage;
    return { facetBy: x.state.facetBy, smoothing: x.state.smoothing, legend: document.querySelectorAll(".legend-item").length,
             panels: x.state.panels.map((p) => p.facets.map((f) => ({
               label: f.label,
               means: f.roles.map((r, i) => ({ r, s: f.chart.series[i + 1] })).filter((m) => m.r.role === "mean").map((m) => {
                 const run = x.runs[x.groups()[m.r.group].runs[0]].settings;
                 return { scale: run.scale, arm: run.optimizer + "@" + run.lr, dash: JSON.stringify(m.s.dash || []),
                          stroke: typeof m.s.stroke === "function" ? m.s.stroke(f.chart, 0) : m.s.stroke,
                          index: x.groups()[m.r.group].dash };
               }) }))) };
  });
  const dks = [...new Set(data.runs.map((r) => r.settings.d_k))].sort((a, b) => a - b);
  check(view.facetBy === "d_k" && view.panels.every((p) => JSON.stringify(p.map((f) => f.label)) ===
                                                          JSON.stringify(dks.map((d) => "d_k=" + d))),
        `every panel has a chart per d_k (${dks.length}: ${view.panels[0].map((f) => f.label)})`);
  const means = [].concat(...view.panels.map((p) => [].concat(...p.map((f) => f.means))));
  check(view.panels.every((p) => p.every((f) => f.means.length === 6)) && view.legend === 6,
        `6 groups in each chart, 6 legend entries (${view.panels[0].map((f) => f.means.length)}, ${view.legend})`);
  const colours = means.filter((m) => m.stroke !== data.picture.scalings[m.scale].colour);
  check(means.length > 0 && colours.length === 0,
        `each mean line in its scaling's colour from the picture (${JSON.stringify(data.picture.scalings)})` +
        (colours.length ? `: ${JSON.stringify(colours[0])}` : ""));
  const dashOf = {};
  means.forEach((m) => { (dashOf[m.arm] = dashOf[m.arm] || new Set()).add(m.dash); });
  const drawn = means.every((m) => m.dash === JSON.stringify(data.picture.dashes[m.index]));  // width 2: lengths x 1
  check(Object.keys(dashOf).length === 3 && Object.values(dashOf).every((d) => d.size === 1) &&
        new Set(Object.values(dashOf).map((d) => [...d][0])).size === 3 && drawn,
        `a dash per optimizer and lr, from the picture's dashes (${JSON.stringify(Object.keys(dashOf))})`);
  check(view.smoothing === data.picture.smoothing.half_width,
        `smoothing starts at the figures' half-width (${view.smoothing} steps)`);
  const sc = JSON.parse(fs.readFileSync(path.join(dir, "smoothing_case.json"), "utf8"));
  const js = await page.evaluate((sc) => window.xgradPage.smooth(sc.x, sc.y, sc.half_width), sc);
  const differ = sc.expected.filter((v, i) => v !== js[i]).length;
  check(js.length === sc.expected.length && differ === 0,
        `page.js smooths a series with gaps exactly as report/picture.cpp does (${differ} of ${js.length} differ)`);
  check((await pngVariance(page, shot)) > 100, "default experiment: the screenshot is not blank");
  check(errors.length === 0, "default experiment: no console error or page exception" +
                             (errors.length ? ": " + errors.join("; ") : ""));
  console.log(`     screenshot of the default view: ${shot}`);
}

// The explain link of a report written beside a sweep whose directory name holds " ", "#", "?" and "%" (a "#" would
// start a fragment): the link resolves to that sweep's explain/explain.html (compare needs only the file to exist).
async function checkExplainLink(browser, runs) {
  const sweep = path.join(workDir, "odd #1?%"), out = path.join(workDir, "odd_report");
  fs.rmSync(sweep, { recursive: true, force: true });
  fs.cpSync(runs[0], path.join(sweep, path.basename(runs[0])), { recursive: true });
  fs.mkdirSync(path.join(sweep, "explain"));
  fs.writeFileSync(path.join(sweep, "explain", "explain.html"), "<html></html>");
  run(["compare", sweep, "--out", out, "--plots", "false"]);
  const { page } = await openFile(browser, path.join(out, "report.html"), "window.xgradPage != null");
  const href = await page.evaluate(() => document.querySelector("#explain-link a").href);
  check(href.endsWith("/odd%20%231%3F%25/explain/explain.html") &&
        fs.existsSync(require("url").fileURLToPath(href)), `the explain link leads to the sweep's explain.html (${href})`);
  await page.close();
}

async function main() {
  fs.mkdirSync(workDir, { recursive: true });
  const sweep = path.join(workDir, "sweep");
  const runs = makeSweep(sweep);
  run(["compare", sweep, "--plots", "false"]);
  const file = path.join(sweep, "report.html");
  const data = checkFile(file);
  check(data.runs.length === runs.length,
        `the page's JSON holds the sweep's ${runs.length} runs (${data.runs.length})`);

  const browser = await puppeteer.launch({ executablePath: chromium, headless: true,
                                           args: ["--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"] });
  try {
    const shot = path.join(workDir, "report_page.png");
    const { page, errors, requests } = await openPage(browser, file, shot);
    const shown = await page.evaluate(() => {
      const c = document.getElementById("counts");
      return { runs: +c.dataset.runs, groups: +c.dataset.groups,
               legend: document.querySelectorAll(".legend-item").length,
               facets: window.xgradPage.state.panels[0].facets.length,
               panels: window.xgradPage.state.panels.length, drawMs: window.xgradPage.drawMs };
    });
    check(shown.runs === 8, `8 runs shown (${shown.runs})`);
    // The 4 arms: 2 groups (scale), 2 legend entries, in a chart per d_k.
    check(shown.groups === 2 && shown.legend === 2 && shown.facets === 2,
          `2 groups shown, 2 legend entries, 2 d_k charts (${shown.groups}, ${shown.legend}, ${shown.facets})`);
    check(shown.panels >= 2, `the default panels are drawn (${shown.panels})`);
    const figures = await page.evaluate(() => window.xgradPage.summaryCharts().map((u) => u && u.series.length));
    check(figures.length === data.summary.length && figures.length > 0 && figures.every((n) => n > 1),
          `report.md's ${data.summary.length} summary figures are drawn (${figures.length})`);
    console.log(`     drawn in ${shown.drawMs.toFixed(0)} ms after the script started`);
    // Summary lines in their scaling's registered colour (as the PNGs), theory lines included.
    const strokes = await page.evaluate(() => window.xgradPage.summaryCharts().map(
        (u) => u.series.slice(1).map((s, i) => (typeof s.stroke === "function" ? s.stroke(u, i + 1) : s.stroke))));
    const wanted = data.summary.map((f) => f.lines.map((l) => l.colour));
    check(JSON.stringify(strokes) === JSON.stringify(wanted),
          `summary lines drawn in their scalings' colours (${JSON.stringify(strokes)} vs ${JSON.stringify(wanted)})`);
    const links = await page.evaluate(() => document.querySelectorAll("#findings a.details-link").length);
    check(links === data.findings.length && links > 0, `each finding links to its details (${links})`);

    // Hiding a group: its curves (runs, band, mean) are no longer drawn, and the canvas changes.
    const before = await canvasHash(page, 0);
    await page.click('.legend-item[data-group="0"]');
    const hidden = await page.evaluate(() => {
      const p = window.xgradPage.state.panels[0].facets[0];
      return p.roles.map((r, i) => ({ group: r.group, show: p.chart.series[i + 1].show }));
    });
    check(hidden.filter((s) => s.group === 0).length > 0 && hidden.every((s) => s.show === (s.group !== 0)),
          "hiding group 0 hides its curves and only those");
    check((await canvasHash(page, 0)) !== before, "hiding a group changes the drawing");
    await page.click('.legend-item[data-group="0"]');
    check(await page.evaluate(() => window.xgradPage.state.panels[0].facets[0].chart.series.every((s) => s.show !== false)),
          "showing it again brings its curves back");

    // Log y: the curves are drawn at log10 of their values and the axis' ticks and labels change (the page draws a
    // log axis itself: uPlot's fails on values like 1e-30).
    const ticks = () => page.evaluate(() => {
      const p = window.xgradPage.state.panels[0], f = p.facets[0], u = f.chart;
      const mean = f.roles.findIndex((r) => r.role === "mean") + 1;
      const i = u.data[mean].findIndex((v) => v != null);
      return { ylog: p.ylog, splits: JSON.stringify(u.axes[1]._splits), labels: u.axes[1]._values,
               mean: u.data[mean][i] };
    });
    const lin = await ticks();
    await page.click(".panel:first-child input.ylog");
    const log = await ticks();
    check(!lin.ylog && log.ylog && Math.abs(Math.pow(10, log.mean) - lin.mean) < 1e-9 * Math.abs(lin.mean),
          `y switches from linear to log (a mean of ${lin.mean} drawn at log10 = ${log.mean})`);
    check(lin.splits !== log.splits && JSON.stringify(lin.labels) !== JSON.stringify(log.labels),
          `the y axis' ticks change with it (${lin.labels} -> ${log.labels})`);

    // Values near 1e-5 (a score gradient's median): every y tick label distinct and nonzero, on the linear axis
    // and on the log one (uPlot's default labels them all "0").
    for (const ylog of [true, false]) {
      if (ylog !== (await page.evaluate(() => window.xgradPage.state.panels[0].ylog)))
        await page.click(".panel:first-child input.ylog");
      const small = await page.evaluate((ylog) => {
        // The axis' own label function, as uPlot calls it, on ticks 2e-11 apart near 1e-5.
        const u = window.xgradPage.state.panels[0].facets[0].chart, axis = u.axes[1];
        const splits = [1e-5, 1.00002e-5, 1.00004e-5].map((v) => (ylog ? Math.log10(v) : v));
        return axis.values(u, splits, 1, 2e-11, 2e-11).map(String);
      }, ylog);
      check(small.length >= 2 && new Set(small).size === small.length && small.every((l) => l !== "0" && l !== ""),
            `${ylog ? "log" : "linear"} y ticks near 1e-5 read as distinct nonzero values (${small})`);
    }
    await page.click(".panel:first-child input.ylog");  // back to the log axis the checks below start from

    // Another column redraws the panel with other data.
    const draws = await page.evaluate(() => window.xgradPage.state.panels[0].drawCount);
    const hashBefore = await canvasHash(page, 0);
    await page.select(".panel:first-child select.metric", "grad_norm");
    const after = await page.evaluate(() => {
      const p = window.xgradPage.state.panels[0];
      return { draws: p.drawCount, column: p.column, points: p.facets[0].chart.data[0].length };
    });
    check(after.column === "grad_norm" && after.draws === draws + 1 && after.points > 0,
          `choosing grad_norm redraws the panel (${after.draws - draws} redraw, ${after.points} points)`);
    check((await canvasHash(page, 0)) !== hashBefore, "the drawing changes with the column");

    // One chart per panel: the 4 arms are 4 groups; regrouping by every setting but d_k gives 2 groups; smoothing and
    // the band switch redraw without error.
    await page.select("#facet-by", "");
    check(await page.evaluate(() => +document.getElementById("counts").dataset.groups === 4 &&
                                    window.xgradPage.state.panels.every((p) => p.facets.length === 1)),
          "one chart per panel: 4 groups (d_k and scale) in one chart");
    await page.evaluate(() => {
      const boxes = Array.from(document.querySelectorAll("input.group-key"));
      const dk = boxes.find((b) => b.parentElement.textContent.trim() === "d_k");
      dk.click();
    });
    check(await page.evaluate(() => +document.getElementById("counts").dataset.groups) === 2,
          "grouping without d_k gives 2 groups (scale)");
    await page.evaluate(() => {
      const s = document.getElementById("smoothing");
      s.value = "0.9";
      s.dispatchEvent(new Event("input"));
      const b = document.getElementById("band");
      b.value = "minmax";
      b.dispatchEvent(new Event("change"));
    });
    await page.hover("#arms-table tbody tr");
    check(await page.evaluate(() => Array.isArray(window.xgradPage.state.highlight) &&
                                    window.xgradPage.state.highlight.length === 2),
          "hovering an arms-table row highlights its 2 runs");

    // The arms table sorts by a clicked column.
    await page.evaluate(() => {
      const th = Array.from(document.querySelectorAll("#arms-table th")).find((h) => h.textContent === "final loss");
      th.click();
    });
    const sorted = await page.evaluate(() => {
      const col = Array.from(document.querySelectorAll("#arms-table th"))
                       .findIndex((h) => h.textContent.startsWith("final loss"));
      return Array.from(document.querySelectorAll("#arms-table tbody tr"))
                  .map((tr) => parseFloat(tr.children[col].textContent));
    });
    check(sorted.length === 4 && sorted.every((v, i) => i === 0 || sorted[i - 1] <= v),
          `a click on "final loss" sorts the arms table by it (${sorted})`);

    // The download buttons write the arms table and every run's final metrics as CSV.
    const downloads = path.join(workDir, "downloads");
    fs.rmSync(downloads, { recursive: true, force: true });
    fs.mkdirSync(downloads, { recursive: true });
    const cdp = await page.createCDPSession();
    await cdp.send("Browser.setDownloadBehavior", { behavior: "allow", downloadPath: downloads });
    await page.click("#download-arms");
    await page.click("#download-final");
    const waitFor = async (file) => {
      for (const deadline = Date.now() + 20000; Date.now() < deadline;) {
        if (fs.existsSync(file)) return fs.readFileSync(file, "utf8");
        await new Promise((r) => setTimeout(r, 100));
      }
      return "";
    };
    const armsCsv = (await waitFor(path.join(downloads, "arms.csv"))).trim().split("\n");
    const finalCsv = (await waitFor(path.join(downloads, "final_metrics.csv"))).trim().split("\n");
    check(armsCsv.length === 5 && armsCsv[0].startsWith("d_k,scale,optimizer,lr,seeds,final loss"),
          `arms.csv: a header and 4 arms (${armsCsv.length} lines)`);
    check(finalCsv.length === 9 && finalCsv[0].split(",").includes("final_loss") &&
          finalCsv[0].split(",").includes("last loss"),
          `final_metrics.csv: a header and 8 runs (${finalCsv.length} lines)`);
    check(!finalCsv.some((l) => l.includes("—")), "final_metrics.csv leaves cells without a value empty (no '—')");
    // Each summary figure's y label fits along its plot area (it was cut: "median ‖dLoss/d(score row)‖ (log sc").
    const yLabels = await page.evaluate(() => window.xgradPage.summaryCharts().map((u) => {
      const axis = u.axes[1];
      u.ctx.save();
      u.ctx.font = axis.labelFont ? axis.labelFont[0] : u.ctx.font;
      const width = u.ctx.measureText(axis.label).width;
      u.ctx.restore();
      return { label: axis.label, width: Math.round(width), height: Math.round(u.bbox.height) };
    }));
    check(yLabels.every((l) => l.width <= l.height), `summary y labels fit their axes (${JSON.stringify(yLabels)})`);
    // Not hovered, the summary figures' legends show no placeholder values ("—", "--").
    const placeholders = await page.evaluate(() => [...document.querySelectorAll("#summary-figures .u-value")]
        .map((e) => e.textContent).filter((t) => t === "—" || t === "--").length);
    check(placeholders === 0, `summary legends show no placeholder values when not hovered (${placeholders})`);
    // The mean ± sd band of a quantity that is never negative stops at the data's minimum, not below zero.
    const band = await page.evaluate(() => {
      const st = window.xgradPage.state, was = st.band;
      st.band = "sd";
      const out = window.xgradPage.groupStats([{ x: [0, 1], y: [1, 0] }, { x: [0, 1], y: [1, 10] }]);
      st.band = was;
      return out;
    });
    check(band.lo[1] === 0 && band.hi[1] > 5, `an sd band of non-negative values is clipped at their minimum ` +
          `(${JSON.stringify(band)})`);
    // A cell a spreadsheet would run as a formula (=, +, -, @ before text) is quoted with a leading '; numbers stay.
    const cells = await page.evaluate(() => ["=1+2", "@SUM(A1)", "+x", "-x", "-0.5", "+1", "a,b"].map(
        (s) => window.xgradPage.csvCell(s)));
    check(JSON.stringify(cells) === JSON.stringify(["'=1+2", "'@SUM(A1)", "'+x", "'-x", "-0.5", "+1", "\"a,b\""]),
          `CSV cells that would be formulas are quoted (${JSON.stringify(cells)})`);

    const variance = await pngVariance(page, shot);
    check(variance > 100, `the screenshot is not blank (pixel variance ${variance.toFixed(0)})`);
    check(errors.length === 0, "no console error or page exception" + (errors.length ? ": " + errors.join("; ") : ""));
    check(requests.length === 0, "no network request" + (requests.length ? ": " + requests.join(", ") : ""));
    await page.close();
    console.log(`     screenshot: ${shot}`);

    // Bad input.
    const bad = path.join(workDir, "bad_input");
    const readable = makeBadInput(bad, runs);
    run(["compare", bad, "--plots", "false"]);
    const badFile = path.join(bad, "report.html");
    const badData = checkFile(badFile);
    check(badData.runs.length === readable,
          `bad input: the JSON holds the ${readable} readable runs (${badData.runs.length})`);
    const badShot = path.join(workDir, "report_page_bad_input.png");
    const b = await openPage(browser, badFile, badShot);
    const notes = await b.page.evaluate(
        () => Array.from(document.querySelectorAll("#notes li")).map((li) => li.textContent));
    const has = (re) => notes.some((n) => re.test(n));
    check(has(/empty_file/) && has(/1 column only in 3 of 4 runs/) && has(/non-finite/) &&
          has(/header_only/), "bad input: the page says what it left out:\n       " + notes.join("\n       "));
    check(await b.page.evaluate(() => +document.getElementById("counts").dataset.runs) === readable,
          `bad input: ${readable} runs shown`);
    await b.page.click(".panel:first-child input.ylog");
    const labels = await b.page.evaluate(
        () => [].concat(...window.xgradPage.state.panels[0].facets.map((f) => f.chart.axes[1]._values)));
    check(labels.some((l) => /^1e-3\d$/.test(l)), `bad input: log y shows losses down to 1e-35 (${labels})`);
    check(b.errors.length === 0,
          "bad input: no console error or page exception" + (b.errors.length ? ": " + b.errors.join("; ") : ""));
    check((await pngVariance(b.page, badShot)) > 100, "bad input: the screenshot is not blank");
    await checkExplainLink(browser, runs);
    await checkDefaultExperiment(browser);
  } finally {
    await browser.close();
  }
}

runMain("report page browser test", main);
