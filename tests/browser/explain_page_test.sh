#!/usr/bin/env bash
# ctest explain_page_browser: an explain.html in Debian's chromium through puppeteer-core (explain_page_test.js).
# The page comes from anywhere (ctest explain_page_html writes it with `xgrad explain` at its defaults). Fails, saying what to install, when node, the browser or the node packages are missing:
# it never passes without a browser.
#   explain_page_test.sh EXPLAIN_HTML SOURCE_DIR WORK_DIR
set -euo pipefail
page="$1" src="$2" work="$3"
. "$(dirname "$0")/browser_deps.sh"
require_browser_deps "$src"
[ -f "$page" ] || { echo "FAIL: no page at $page (ctest explain_page_html writes it)" >&2; exit 1; }
exec node "$src/tests/browser/explain_page_test.js" "$page" "$work"
