#!/bin/sh
# Updates the dashboard's vendored uPlot (https://github.com/leeoniya/uPlot,
# MIT) from the npm registry, the same way as the loadtest report's copy
# (loadtest/internal/report/vendor/uplot/update.sh). Usage, from anywhere:
#
#	cmd/internal/dashboard/vendor/uplot/update.sh [VERSION]
#
# Without VERSION it takes the latest. Update both copies to the same
# version (TestVendoredUPlotMatchesLoadtest fails while they differ), review
# the diff, run `go test ./cmd/internal/dashboard ./cmd/ingest
# ./loadtest/...` (the browser test draws the charts with it) and commit the
# files with the new VERSION.
set -eu
dir=$(cd "$(dirname "$0")" && pwd)
version=${1:-latest}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "uplot@$version" >/dev/null && tar xzf uplot-*.tgz)
cp "$tmp/package/dist/uPlot.iife.min.js" "$tmp/package/dist/uPlot.min.css" "$tmp/package/LICENSE" "$dir/"
node -p "require('$tmp/package/package.json').version" >"$dir/VERSION"
echo "uPlot $(cat "$dir/VERSION") vendored in $dir"
