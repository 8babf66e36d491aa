#!/usr/bin/env bash
# ctest report_page_browser: report.html in Debian's chromium through puppeteer-core (report_page_test.js). Fails,
# saying what to install, when node, the browser or the node packages are missing: it never passes without a browser.
#   report_page_test.sh XGRAD_EXECUTABLE SOURCE_DIR WORK_DIR
set -euo pipefail
xgrad="$1" src="$2" work="$3"
. "$(dirname "$0")/browser_deps.sh"
require_browser_deps "$src"
exec node "$src/tests/browser/report_page_test.js" "$xgrad" "$work"
