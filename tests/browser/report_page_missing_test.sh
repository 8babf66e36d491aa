#!/usr/bin/env bash
# ctest report_page_browser_missing: without a browser, report_page_test.sh fails (exit != 0) and names what to
# install; it must never pass silently.
#   report_page_missing_test.sh REPORT_PAGE_TEST_SH XGRAD_EXECUTABLE SOURCE_DIR WORK_DIR
set -uo pipefail
out="$(CHROMIUM=/nonexistent/chromium "$1" "$2" "$3" "$4" 2>&1)"
rc=$?
echo "$out"
[ "$rc" -ne 0 ] || { echo "FAIL: exit 0 without a browser"; exit 1; }
grep -q "apt-get install chromium" <<<"$out" || { echo "FAIL: the message does not say what to install"; exit 1; }
echo "ok: exit $rc, naming what to install"
