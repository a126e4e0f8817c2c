#!/usr/bin/env bash
# tools/plot_metrics.py and tools/trace_to_png.py as a user runs them: each writes a PNG from
# a metrics file (two runs on one figure) and from a pipeline trace, and a damaged metrics
# file is refused naming its line. TRACE, a trace of a zb-h1 run of 4 ranks that ternion-train
# wrote, must hold every rank's spans, its input and weight gradients apart. Skipped (77)
# where no Python with matplotlib can be had.
#   plot_tools.sh SOURCE_DIR OUT_DIR TRACE
set -u
src=$1 out=$2 trace=$3
mkdir -p "$out"
py=$(TERNION_NO_INSTALL=1 "$src/tools/python-with-matplotlib") ||
  { echo "SKIP: no Python with matplotlib (tools/install-deps.sh installs one)"; exit 77; }
fail() { echo "FAILED: $*"; exit 1; }
is_png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }

metrics=$src/tests/cli/plot_fixture/run.jsonl
"$py" "$src/tools/plot_metrics.py" "$metrics" "$metrics" --labels a,b -o "$out/metrics.png" ||
  fail "plot_metrics.py"
is_png "$out/metrics.png" || fail "plot_metrics.py wrote no PNG"
"$py" "$src/tools/trace_to_png.py" "$src/docs/pipeline-zb-h1-4x8.json" "$out/trace.png" ||
  fail "trace_to_png.py"
is_png "$out/trace.png" || fail "trace_to_png.py wrote no PNG"
"$py" "$src/tools/trace_to_png.py" "$trace" "$out/zb.png" > /dev/null || fail "trace_to_png.py on $trace"
"$py" - "$trace" <<'PY' || fail "the zb-h1 trace lacks what it should hold"
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
spans = [e for e in events if e.get("ph") == "X"]
for rank in range(4):
    kinds = {e["cat"] for e in spans if e["tid"] == rank}
    missing = {"forward", "input gradient", "weight gradient"} - kinds
    if missing:
        sys.exit("rank %d has no %s spans" % (rank, ", ".join(sorted(missing))))
    names = [e["name"] for e in spans if e["tid"] == rank and e["cat"] == "weight gradient"]
    if sorted(names) != sorted("W%d" % m for m in range(4)):
        sys.exit("rank %d: weight gradients %s, not W0..W3" % (rank, names))
PY

printf '{"step": 1, "loss": 5.0}\n{"step": 2, "loss": \n' > "$out/damaged.jsonl"
message=$("$py" "$src/tools/plot_metrics.py" "$out/damaged.jsonl" -o "$out/damaged.png" 2>&1) &&
  fail "a damaged metrics file was drawn"
grep -q "damaged.jsonl:2: not a JSON object" <<< "$message" ||
  fail "the damaged line was not named: $message"
"$py" "$src/tools/plot_metrics.py" "$metrics" --labels a,b -o "$out/x.png" > /dev/null 2>&1 &&
  fail "two labels for one file were accepted"
echo "plot tools: metrics and trace drawn, bad input refused"
