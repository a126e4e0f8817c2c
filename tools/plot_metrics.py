#!/usr/bin/env python3
"""Draws ternion-train metrics files (logging.metrics_file, one JSON object per step) as a PNG.

    python3 tools/plot_metrics.py METRICS.jsonl [METRICS.jsonl ...] -o OUT.png [--labels A,B]

Four panels against the step: training loss (validation loss as points where the run
evaluated), learning rate, gradient norm (log scale) and tokens/s. Several files share the
figure, one colour each, to compare runs (layouts, settings); a run is labelled by --labels or
by its file's folder and name. Needs matplotlib (tools/python-with-matplotlib finds or
installs one).
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402


def read_run(path):
    steps = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit("plot_metrics: %s:%d: not a JSON object: %s" % (path, number, e))
            if not isinstance(record, dict) or "step" not in record:
                sys.exit("plot_metrics: %s:%d: a record without \"step\"" % (path, number))
            steps.append(record)
    if not steps:
        sys.exit("plot_metrics: %s holds no steps" % path)
    return steps


def series(steps, key):
    points = [(s["step"], s[key]) for s in steps if isinstance(s.get(key), (int, float))]
    return [p[0] for p in points], [p[1] for p in points]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("metrics", nargs="+", help="metrics files (JSON lines)")
    parser.add_argument("-o", "--output", required=True, help="the PNG to write")
    parser.add_argument("--labels", help="comma-separated run names, one per file")
    args = parser.parse_args()
    labels = args.labels.split(",") if args.labels else [
        os.path.join(os.path.basename(os.path.dirname(os.path.abspath(p))), os.path.basename(p))
        for p in args.metrics]
    if len(labels) != len(args.metrics):
        sys.exit("plot_metrics: %d labels for %d files" % (len(labels), len(args.metrics)))

    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    (loss_ax, lr_ax), (norm_ax, speed_ax) = axes
    for path, label in zip(args.metrics, labels):
        steps = read_run(path)
        line, = loss_ax.plot(*series(steps, "loss"), label=label + " train", linewidth=1.2)
        x, y = series(steps, "val_loss")
        if x:
            loss_ax.plot(x, y, "o--", color=line.get_color(), label=label + " validation",
                         markersize=4, linewidth=0.8)
        lr_ax.plot(*series(steps, "lr"), color=line.get_color(), label=label)
        norm_ax.plot(*series(steps, "grad_norm"), color=line.get_color(), label=label,
                     linewidth=0.8)
        speed_ax.plot(*series(steps, "tokens_per_s"), color=line.get_color(), label=label,
                      linewidth=0.8)
    loss_ax.set_title("loss")
    loss_ax.set_ylabel("cross-entropy (nats/token)")
    lr_ax.set_title("learning rate")
    norm_ax.set_title("gradient norm (before clipping)")
    norm_ax.set_yscale("log")
    speed_ax.set_title("throughput")
    speed_ax.set_ylabel("tokens/s")
    for ax in axes.flat:
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    loss_ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print("wrote %s: %d run%s" % (args.output, len(args.metrics), "" if len(args.metrics) == 1 else "s"))


if __name__ == "__main__":
    main()
