#!/usr/bin/env bash
# Copies uPlot from node_modules (after `npm ci` at the repository root) into vendor/, the copy the build embeds in
# report.html and explain.html, and records its version and licence in VENDORED.md. Run it after changing uplot's
# version in package.json (`npm install uplot@X.Y.Z`); never edit vendor/ by hand. The one change it makes: the
# banner comment's project address is replaced by the version, so the page holds no http(s) reference (tests/browser
# checks).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
src="$root/node_modules/uplot"
[ -f "$src/package.json" ] || { echo "refresh-vendor.sh: $src missing; run 'npm ci' in $root first" >&2; exit 1; }
version="$(node -p "require('$src/package.json').version")"
license="$(node -p "require('$src/package.json').license")"
mkdir -p "$here/vendor"
sed -E "1s|^/\\*! https?://[^ ]+ \\((v[0-9.]+)\\) \\*/|/*! uPlot \\1, $license licence: vendor/LICENSE */|" \
  "$src/dist/uPlot.iife.min.js" >"$here/vendor/uPlot.iife.min.js"
cp "$src/dist/uPlot.min.css" "$here/vendor/uPlot.min.css"
cp "$src/LICENSE" "$here/vendor/LICENSE"
if grep -Eq 'https?://' "$here/vendor/uPlot.iife.min.js" "$here/vendor/uPlot.min.css"; then
  echo "refresh-vendor.sh: the vendored uPlot still holds an http(s) reference:" >&2
  grep -Eo '.{20}https?://.{30}' "$here/vendor/uPlot.iife.min.js" "$here/vendor/uPlot.min.css" >&2
  exit 1
fi
cat >"$here/VENDORED.md" <<MD
# Vendored into report.html and explain.html

| package | version | licence | files (in vendor/) | from |
| --- | --- | --- | --- | --- |
| uplot (npm) | $version | $license (vendor/LICENSE) | uPlot.iife.min.js, uPlot.min.css | node_modules/uplot/dist after \`npm ci\` |

Written by refresh-vendor.sh, which also wrote vendor/; do not edit either by hand. To move to another version:
\`npm install --save-exact uplot@X.Y.Z\` at the repository root, then \`report/web/refresh-vendor.sh\`, rebuild, and run
the browser tests (\`ctest -R 'report_page_browser|explain_page_browser'\`). The build embeds vendor/ and this
directory's page.js, page.css (report.html) and explain.js, explain.css (explain.html) into xgrad
(report/web/embed.cmake), so \`xgrad compare\` and \`xgrad explain\` need no node at run time.
MD
echo "refresh-vendor.sh: uplot $version ($license) -> $here/vendor"
