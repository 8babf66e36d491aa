#!/bin/sh
# docs/settings.md is what `xgrad settings` prints: the reference cannot drift from the declarations.
#   settings_reference_test.sh XGRAD SOURCE_DIR
set -eu
xgrad="$1"
doc="$2/docs/settings.md"
printed="$(mktemp)"
trap 'rm -f "$printed"' EXIT
"$xgrad" settings > "$printed"
if ! diff -u "$doc" "$printed"; then
  echo "FAIL: docs/settings.md is out of date; regenerate it: $xgrad settings > $doc"
  exit 1
fi
echo "docs/settings.md matches xgrad settings ($(wc -l < "$doc") lines)"
