#!/usr/bin/env bash
# ctest report_page_browser: report.html in Debian's chromium through puppeteer-core (report_page_test.js). Fails,
# saying what to install, when node, the browser or the node packages are missing: it never passes without a browser.
#   report_page_test.sh XGRAD_EXECUTABLE SOURCE_DIR WORK_DIR
set -euo pipefail
xgrad="$1" src="$2" work="$3"
missing=()
command -v node >/dev/null || missing+=("node (apt-get install nodejs npm)")
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || missing+=("a browser at ${CHROMIUM:-/usr/bin/chromium} (apt-get install chromium)")
[ -f "$src/node_modules/puppeteer-core/package.json" ] || missing+=("node packages (npm ci in $src)")
if [ ${#missing[@]} -gt 0 ]; then
  printf 'FAIL: the browser test needs %s.\n' "${missing[@]}" >&2
  echo "FAIL: ./run.sh test installs all of them." >&2
  exit 1
fi
exec node "$src/tests/browser/report_page_test.js" "$xgrad" "$work"
