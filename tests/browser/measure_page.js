// Opens a report.html (or an explain.html) in Debian's chromium (headless) and prints its size and how long it took to
// draw: from navigation start to the second frame after the page's script built every chart (window.xgradPage.drawMs,
// or window.xgradExplain.drawMs, counts from the script's start). Not a test: a measurement, for a page of any size
// (e.g. the experiment's 54 runs).
//   node tests/browser/measure_page.js REPORT_OR_EXPLAIN_HTML [SCREENSHOT_PNG]
"use strict";
const fs = require("fs");
const path = require("path");
const puppeteer = require("puppeteer-core");

const [file, shot] = process.argv.slice(2);
(async () => {
  const browser = await puppeteer.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
                                           headless: true, args: ["--no-sandbox", "--disable-gpu"] });
  const page = await browser.newPage();
  await page.setViewport({ width: 1400, height: 1000 });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  await page.goto("file://" + path.resolve(file), { waitUntil: "load" });
  await page.waitForFunction("(window.xgradPage && window.xgradPage.drawMs != null) || " +
                             "(window.xgradExplain && window.xgradExplain.drawMs != null)", { timeout: 60000 });
  const t = await page.evaluate(() => {
    const x = window.xgradExplain, p = window.xgradPage;
    if (x) return { script: x.drawMs, total: x.sinceNavigationMs, what: `${x.state.figures.length} figures` };
    return { script: p.drawMs, total: p.sinceNavigationMs, what: `${p.runs.length} runs in ${p.groups().length} ` +
             `groups, ${p.state.panels.length} panels` };
  });
  if (shot) await page.screenshot({ path: shot, fullPage: true });
  console.log(`${file}: ${(fs.statSync(file).size / 1e6).toFixed(2)} MB, ${t.what}; ` +
              `drawn ${t.total.toFixed(0)} ms after navigation start ` +
              `(${t.script.toFixed(0)} ms in the page's script)` +
              (errors.length ? `; errors: ${errors.join("; ")}` : ""));
  await browser.close();
})().catch((e) => { console.error(e); process.exit(1); });
