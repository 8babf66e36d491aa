# Sourced by the browser tests' shell wrappers (report_page_test.sh, explain_page_test.sh):
# require_browser_deps SOURCE_DIR fails (exit 1), saying what to install, when node, the browser or the node packages
# are missing, so that a browser test never passes without a browser.
require_browser_deps() {
  local src="$1" missing=()
  command -v node >/dev/null || missing+=("node (apt-get install nodejs npm)")
  local browser="${CHROMIUM:-/usr/bin/chromium}"
  [ -x "$browser" ] || missing+=("a browser at $browser (apt-get install chromium)")
  [ -f "$src/node_modules/puppeteer-core/package.json" ] || missing+=("node packages (npm ci in $src)")
  if [ ${#missing[@]} -gt 0 ]; then
    printf 'FAIL: the browser test needs %s.\n' "${missing[@]}" >&2
    echo "FAIL: ./run.sh test installs all of them." >&2
    exit 1
  fi
}
