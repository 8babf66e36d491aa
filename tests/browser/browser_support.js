// What the browser tests share (report_page_test.js, explain_page_test.js): their arguments, finding Debian's
// chromium and puppeteer-core (failing, saying what to install, without them), the ok/FAIL lines, opening a page from
// file:// with its errors and network requests recorded, and telling a blank screenshot from a drawn one.
"use strict";

const fs = require("fs");
const path = require("path");

const repo = path.resolve(__dirname, "..", "..");

// The test's `n` arguments; exits 2 printing `usage` when one is missing.
function commandLine(usage, n) {
  const args = process.argv.slice(2, 2 + n);
  if (args.length < n || args.some((a) => !a)) {
    console.error("usage: " + usage);
    process.exit(2);
  }
  return args;
}

// The browser's path and puppeteer-core; exits 1 naming what to install when either is missing.
function requireBrowser() {
  const chromium = process.env.CHROMIUM || "/usr/bin/chromium";
  if (!fs.existsSync(chromium)) {
    console.error(`FAIL: no browser at ${chromium}. Install Debian's chromium: apt-get install chromium ` +
                  `(./run.sh test does), or point $CHROMIUM at one.`);
    process.exit(1);
  }
  try {
    return { chromium, puppeteer: require("puppeteer-core") };
  } catch (e) {
    console.error(`FAIL: puppeteer-core is not installed (${e.code || e.message}). Run 'npm ci' in ${repo} ` +
                  `(./run.sh test does; Debian: apt-get install npm).`);
    process.exit(1);
  }
}

// check(ok, what) prints an ok/FAIL line; runMain(name, main) runs the async main, then says how many checks failed
// and exits 1 when any did (or main threw), else 0.
function makeChecker() {
  let failed = 0;
  return {
    check(ok, what) {
      console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
      if (!ok) failed++;
    },
    runMain(name, main) {
      main().then(() => {
        console.log(failed === 0 ? `${name}: all checks passed` : `${name}: ${failed} checks failed`);
        process.exit(failed === 0 ? 0 : 1);
      }, (e) => {
        console.error("FAIL: " + (e && e.stack || e));
        process.exit(1);
      });
    },
  };
}

// A new 1400x1000 tab on `file`, once `ready` (a page expression) is true; errors collects console errors, page
// exceptions and failed requests, requests every request that is not file:, blob: or data:.
async function openFile(browser, file, ready) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1400, height: 1000 });
  const errors = [], requests = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push("console: " + m.text()); });
  page.on("pageerror", (e) => errors.push("page exception: " + e.message));
  page.on("requestfailed", (r) => errors.push("request failed: " + r.url()));
  page.on("request", (r) => { if (!/^(file|blob|data):/.test(r.url())) requests.push(r.url()); });
  await page.goto("file://" + file, { waitUntil: "load" });
  await page.waitForFunction(ready, { timeout: 20000 });
  return { page, errors, requests };
}

// Pixel variance of a PNG, decoded by the browser itself (no image library needed).
async function pngVariance(page, file) {
  const b64 = fs.readFileSync(file).toString("base64");
  return page.evaluate(async (src) => {
    const img = new Image();
    img.src = "data:image/png;base64," + src;
    await img.decode();
    const c = document.createElement("canvas");
    c.width = img.width; c.height = img.height;
    const ctx = c.getContext("2d");
    ctx.drawImage(img, 0, 0);
    const d = ctx.getImageData(0, 0, c.width, c.height).data;
    let s = 0, ss = 0, n = 0;
    for (let i = 0; i < d.length; i += 4) {
      const v = (d[i] + d[i + 1] + d[i + 2]) / 3;
      s += v; ss += v * v; n++;
    }
    const m = s / n;
    return ss / n - m * m;
  }, b64);
}

module.exports = { commandLine, requireBrowser, makeChecker, openFile, pngVariance };
