// explain.html in a real browser: opens the page (ctest explain_page_html writes it with `xgrad explain`) in
// Debian's chromium (headless) through puppeteer-core, and checks what a person would see:
// no console error or page exception and no network request, the five sections each with its verdict, every figure a
// section names drawn, the d_k control redrawing the histogram, the sorted weights and the heatmaps, text from the
// data shown as text (never as HTML), a screenshot that is not blank. Prints the page's size and time to draw.
//   node tests/browser/explain_page_test.js EXPLAIN_HTML WORK_DIR
// Needs /usr/bin/chromium (or $CHROMIUM) and `npm ci` at the repository root; without them it fails and says what to
// install. The screenshot stays in WORK_DIR.
"use strict";

const fs = require("fs");
const path = require("path");

const { commandLine, requireBrowser, makeChecker, openFile, pngVariance } = require("./browser_support");
const [pageFile, workDir] = commandLine("node explain_page_test.js EXPLAIN_HTML WORK_DIR", 2);
const { chromium, puppeteer } = requireBrowser();
const { check, runMain } = makeChecker();

// The page's data block, parsed; and no http(s) reference anywhere in the file.
function checkFile(file) {
  const text = fs.readFileSync(file, "utf8");
  const urls = text.match(/https?:\/\/[^\s"'<>)]*/g) || [];
  check(urls.length === 0, "no http(s) reference in the file" + (urls.length ? `: ${urls.slice(0, 3)}` : ""));
  const m = text.match(/<script type="application\/json" id="xgrad-explain">([\s\S]*?)<\/script>/);
  check(m != null, "the page embeds its data block");
  return JSON.parse(m[1]);
}

// The five sections, in order, each with its number, title, verdict (coloured by its class) and figures.
async function checkSections(page, data) {
  const shown = await page.evaluate(() => Array.from(document.querySelectorAll("section.step")).map((s) => ({
    id: s.id, number: s.querySelector("h2 .number").textContent, verdict: s.querySelector(".verdict-label").textContent,
    text: s.querySelector(".verdict-text").textContent, cls: s.getAttribute("data-verdict-class"),
    colour: getComputedStyle(s.querySelector(".verdict")).borderLeftColor,
    figures: Array.from(s.querySelectorAll("figure")).map((f) => f.getAttribute("data-figure")) })));
  check(shown.length === 5 && data.sections.length === 5, `five sections shown (${shown.length})`);
  shown.forEach((s, i) => {
    const want = data.sections[i] || {};
    check(s.id === "section-" + want.id && s.number === String(i + 1) && s.verdict === want.verdict.verdict &&
          s.verdict.trim() !== "" && s.text.trim() !== "" && s.cls === want.verdict.verdict_class,
          `section ${i + 1} (${want.id}): verdict "${s.verdict}" (${s.cls}) with its text`);
    check(JSON.stringify(s.figures) === JSON.stringify(want.figures), `section ${i + 1} shows its figures in order ` +
          `(${s.figures})`);
  });
  const colours = new Set(shown.map((s) => s.cls + " " + s.colour));
  const classes = new Set(shown.map((s) => s.cls));
  check(colours.size === classes.size && classes.size > 1, `each verdict class has its own colour (${[...colours]})`);
}

// Every figure a section names is drawn (in each section that names it): a uPlot chart with data, or (the heatmap) a
// canvas per arm.
async function checkFigures(page, data) {
  const figs = await page.evaluate(() => window.xgradExplain.state.figures.map((f) => ({
    id: f.id, charts: f.charts.filter((c) => c && c.data[0].length > 1 && c.root.isConnected).length,
    canvases: f.canvases.filter((c) => c.isConnected && c.width > 0).length,
    empty: f.host.querySelectorAll(".empty").length })));
  const named = [].concat(...data.sections.map((s) => s.figures));
  check(JSON.stringify(figs.map((f) => f.id)) === JSON.stringify(named),
        `every figure a section names has a box, in order (${figs.length})`);
  for (const f of figs) {
    const drawn = f.id === "heatmap" ? f.canvases === data.scales.length : f.charts > 0;
    check(drawn && f.empty === 0, `figure ${f.id} is drawn (${f.charts} charts, ${f.canvases} canvases)`);
  }
}

// The slider figures' parts: per arm a histogram with the theory density over it and a heatmap labelled with its arm,
// a colour scale; log axes where the contract has them (log x: uPlot's log scale; log y: log10 with decade ticks).
async function checkParts(page, data) {
  const parts = await page.evaluate(() => {
    const figs = window.xgradExplain.state.figures, of = (id) => figs.find((f) => f.id === id);
    const heat = of("heatmap").host;
    return {
      hist: of("score_hist").charts.map((c) => c.series.slice(1).map((s) => s.label)),
      armTitles: Array.from(heat.querySelectorAll(".arm-title")).map((t) => t.textContent),
      colourScale: heat.querySelectorAll(".colour-scale canvas").length,
      logX: of("score_std_vs_dk").charts[0].scales.x.distr,
      logYTicks: of("score_grad_vs_dk").charts[0].axes[1]._values
    };
  });
  check(parts.hist.length === data.scales.length &&
        parts.hist.every((l) => l.length === 2 && /^N\(/.test(l[1])),
        `each arm's histogram has the theory density over it (${JSON.stringify(parts.hist)})`);
  const labels = data.scales.map((s) => data.scale_labels[s]);
  check(parts.armTitles.length === labels.length && parts.armTitles.every((t, i) => t.startsWith(labels[i])),
        `one heatmap per arm, labelled (${parts.armTitles})`);
  check(parts.colourScale === 1, "the heatmaps have a colour scale");
  const canvas = await page.$('figure[data-figure="heatmap"] canvas.heatmap');
  await canvas.evaluate((c) => c.scrollIntoView({ block: "center" }));  // below the sticky d_k control
  const box = await canvas.boundingBox();
  await page.mouse.move(box.x + box.width * 0.03, box.y + box.height * 0.97);  // query T-1, key 0: visible
  const visible = await page.$eval('figure[data-figure="heatmap"] .heat-readout', (e) => e.textContent);
  await page.mouse.move(box.x + box.width * 0.97, box.y + box.height * 0.03);  // query 0, key T-1: masked
  const masked = await page.$eval('figure[data-figure="heatmap"] .heat-readout', (e) => e.textContent);
  const T = data.per_dk[0].arms[0].heatmap.length;
  check(new RegExp(`^query ${T - 1}, key 0: [0-9.e-]+$`).test(visible) && masked === `query 0, key ${T - 1}: masked`,
        `hovering the heatmap reads out the weight ("${visible}", "${masked}")`);
  check(parts.logX === 3, "score std against d_k has a log x axis");
  check(parts.logYTicks.length >= 2 && parts.logYTicks.every((t) => /^(1e-?\d+|0\.0?1|1|10|100|1000)$/.test(t)),
        `the score gradient's log y axis is labelled in decades (${parts.logYTicks})`);
}

// What the d_k control redraws, as numbers that change with it.
function sliderState(page) {
  return page.evaluate(() => {
    const figs = window.xgradExplain.state.figures, of = (id) => figs.find((f) => f.id === id);
    const hash = (s) => { let h = 0; for (let k = 0; k < s.length; k++) h = (h * 31 + s.charCodeAt(k)) | 0; return h; };
    return {
      dk: document.querySelector(".dk-value").textContent,
      hist: JSON.stringify(of("score_hist").charts.map((c) => c.data)),
      weights: JSON.stringify(of("sorted_weights").charts.map((c) => c.data)),
      heat: of("heatmap").canvases.map((c) => hash(c.toDataURL())).join(","),
      draws: ["score_hist", "sorted_weights", "heatmap"].map((id) => of(id).drawCount)
    };
  });
}

async function checkSlider(page, data) {
  const before = await sliderState(page);
  check(before.dk === `d_k = ${data.d_ks[0]}`, `the d_k control starts at the first d_k (${before.dk})`);
  await page.evaluate((last) => {
    const s = document.getElementById("dk-slider");
    s.value = String(last);
    s.dispatchEvent(new Event("input"));
  }, data.d_ks.length - 1);
  const after = await sliderState(page);
  check(after.dk === `d_k = ${data.d_ks[data.d_ks.length - 1]}`,
        `moving the slider selects the last d_k (${after.dk})`);
  check(after.hist !== before.hist, "the score histograms' data change with d_k");
  check(after.weights !== before.weights, "the sorted weights' data change with d_k");
  check(after.heat !== before.heat, "the heatmap canvases' pixels change with d_k");
  check(after.draws.every((n, i) => n === before.draws[i] + 1), `each slider figure redrew once (${after.draws})`);
  await page.click(".dk-button:nth-child(2)");
  const second = await sliderState(page);
  check(second.dk === `d_k = ${data.d_ks[1]}` && second.hist !== after.hist,
        `a d_k button selects its d_k and redraws (${second.dk})`);
}

// Text from the data is shown as text: the caption naming "<canvas>" makes no element.
async function checkText(page, data) {
  const caption = data.figures.heatmap.caption;
  const shown = await page.evaluate(() => {
    const c = document.querySelector('figure[data-figure="heatmap"] figcaption');
    return { text: c.textContent, elements: c.children.length };
  });
  check(shown.text === caption && shown.elements === 0, `captions are plain text (${JSON.stringify(shown.text)})`);
  const title = await page.evaluate(() => [document.title, document.querySelector("h1").textContent,
                                           document.querySelector(".setup").textContent]);
  check(title[0] === data.title && title[1] === data.title && title[2] === data.setup,
        `title and setup shown (${title[1]}; ${title[2]})`);
  const notes = await page.evaluate(() => document.querySelectorAll("details.notes li").length);
  check(notes === data.notes.length, `the notes are listed (${notes})`);
}

async function main() {
  const file = path.resolve(pageFile);
  fs.mkdirSync(workDir, { recursive: true });
  const data = checkFile(file);
  const browser = await puppeteer.launch({ executablePath: chromium, headless: true,
                                           args: ["--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"] });
  try {
    const { page, errors, requests } =
        await openFile(browser, file, "window.xgradExplain && window.xgradExplain.drawMs != null");
    const t = await page.evaluate(() => ({ script: window.xgradExplain.drawMs,
                                           total: window.xgradExplain.sinceNavigationMs }));
    console.log(`     ${path.basename(file)}: ${(fs.statSync(file).size / 1e3).toFixed(0)} kB; drawn ` +
                `${t.total.toFixed(0)} ms after navigation start (${t.script.toFixed(0)} ms in the page's script)`);
    await checkSections(page, data);
    await checkFigures(page, data);
    await checkText(page, data);
    await checkParts(page, data);
    await checkSlider(page, data);
    const shot = path.join(workDir, "explain_page.png");
    await page.screenshot({ path: shot, fullPage: true });
    const variance = await pngVariance(page, shot);
    check(variance > 100, `the screenshot is not blank (pixel variance ${variance.toFixed(0)})`);
    check(errors.length === 0, "no console error or page exception" + (errors.length ? ": " + errors.join("; ") : ""));
    check(requests.length === 0, "no network request" + (requests.length ? ": " + requests.join(", ") : ""));
    console.log(`     screenshot: ${shot}`);
  } finally {
    await browser.close();
  }
}

runMain("explain page browser test", main);
