#!/usr/bin/env python3
"""Draws a ternion pipeline trace (logging.trace_file, Chrome-trace JSON) as a PNG timeline.

    python3 tools/trace_to_png.py TRACE.json OUT.png [--width INCHES]

One row per rank, labelled with its pipeline and tensor rank; time in milliseconds from the
step's start. Forward spans blue, backward green (a split backward's input gradient teal and
its weight gradient purple), each shaded by its micro-batch and labelled with it where there is
room; sends orange ticks, receives (their waits included) yellow, idle left blank. Needs
matplotlib (tools/python-with-matplotlib finds or installs one).
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

COLOURS = {
    "forward": "#3465a4",
    "backward": "#4e9a06",
    "input gradient": "#06989a",
    "weight gradient": "#75507b",
    "send": "#f57900",
    "recv": "#edd400",
}
COMPUTE = ("forward", "backward", "input gradient", "weight gradient")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("output")
    parser.add_argument("--width", type=float, default=12.0, help="figure width in inches")
    args = parser.parse_args()
    with open(args.trace) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X" and e.get("cat") != "idle"]
    if not spans:
        sys.exit("trace_to_png: no spans in " + args.trace)
    names = {e["tid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    ranks = sorted({e["tid"] for e in spans})
    start = min(e["ts"] for e in spans)
    end = max(e["ts"] + e["dur"] for e in spans)

    fig, ax = plt.subplots(figsize=(args.width, 0.55 * len(ranks) + 1.6))
    for row, rank in enumerate(ranks):
        for e in (e for e in spans if e["tid"] == rank):
            x = (e["ts"] - start) / 1000.0
            width = max(e["dur"] / 1000.0, (end - start) / 1000.0 / 2000)
            category = e.get("cat")
            if category in COMPUTE:
                digits = "".join(c for c in e["name"].split(".")[0] if c.isdigit())
                alpha = 0.55 + 0.45 * ((int(digits or 0) % 4) / 3.0)  # m, m+4, ... alike
                ax.broken_barh([(x, width)], (row - 0.4, 0.8), facecolors=COLOURS[category],
                               alpha=alpha, edgecolor="white", linewidth=0.5)
                if width > (end - start) / 1000.0 / 60:
                    ax.text(x + width / 2, row, e["name"], ha="center", va="center",
                            fontsize=6, color="white")
            elif category in COLOURS:
                ax.broken_barh([(x, width)], (row - 0.12, 0.24), facecolors=COLOURS[category])
    ax.set_yticks(range(len(ranks)))
    ax.set_yticklabels([names.get(r, "rank %d" % r) for r in ranks])
    ax.invert_yaxis()  # rank 0 on top
    ax.set_xlim(0, (end - start) / 1000.0)
    ax.set_xlabel("ms since the step started")
    step = trace.get("otherData", {}).get("step")
    ax.set_title("pipeline timeline" + (" of step %s" % step if step is not None else ""))
    shown = {e.get("cat") for e in spans}
    ax.legend(handles=[Patch(color=COLOURS[c], label=c) for c in COLOURS if c in shown],
              loc="upper center", bbox_to_anchor=(0.5, -0.3 if len(ranks) < 4 else -0.15),
              ncol=6, fontsize="small", frameon=False)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print("wrote %s: %d ranks, %.1f ms" % (args.output, len(ranks), (end - start) / 1000.0))


if __name__ == "__main__":
    main()
