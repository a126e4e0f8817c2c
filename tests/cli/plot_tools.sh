#!/usr/bin/env bash
# tools/plot_metrics.py and tools/trace_to_png.py as a user runs them: each writes a PNG from
# a metrics file (two runs on one figure) and from a pipeline trace, and a damaged metrics
# file is refused naming its line. Skipped (77) where no Python with matplotlib can be had.
#   plot_tools.sh SOURCE_DIR OUT_DIR
set -u
src=$1 out=$2
mkdir -p "$out"
py=$("$src/tools/python-with-matplotlib") || { echo "SKIP: no Python with matplotlib"; exit 77; }
fail() { echo "FAILED: $*"; exit 1; }
is_png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }

metrics=$src/tests/cli/plot_fixture/run.jsonl
"$py" "$src/tools/plot_metrics.py" "$metrics" "$metrics" --labels a,b -o "$out/metrics.png" ||
  fail "plot_metrics.py"
is_png "$out/metrics.png" || fail "plot_metrics.py wrote no PNG"
"$py" "$src/tools/trace_to_png.py" "$src/docs/pipeline-zb-h1-4x8.json" "$out/trace.png" ||
  fail "trace_to_png.py"
is_png "$out/trace.png" || fail "trace_to_png.py wrote no PNG"

printf '{"step": 1, "loss": 5.0}\n{"step": 2, "loss": \n' > "$out/damaged.jsonl"
message=$("$py" "$src/tools/plot_metrics.py" "$out/damaged.jsonl" -o "$out/damaged.png" 2>&1) &&
  fail "a damaged metrics file was drawn"
grep -q "damaged.jsonl:2: not a JSON object" <<< "$message" ||
  fail "the damaged line was not named: $message"
"$py" "$src/tools/plot_metrics.py" "$metrics" --labels a,b -o "$out/x.png" > /dev/null 2>&1 &&
  fail "two labels for one file were accepted"
echo "plot tools: metrics and trace drawn, bad input refused"
