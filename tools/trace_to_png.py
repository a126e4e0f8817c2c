#!/usr/bin/env python3
"""Draws a ternion pipeline trace (logging.trace_file, Chrome-trace JSON) as a PNG timeline.

    python3 tools/trace_to_png.py TRACE.json OUT.png [--width 1200]

One row per rank; forward spans blue, backward green (a split backward's input gradient
teal, its weight gradient purple), sends orange, receives yellow, idle light grey; each micro-batch's spans are shaded by its number so they can be followed from
stage to stage. Standard library only (zlib for the PNG), so it runs wherever Python does.
"""
import json
import struct
import sys
import zlib

COLOURS = {
    "forward": (52, 101, 164),
    "backward": (78, 154, 6),
    "input gradient": (6, 152, 154),
    "weight gradient": (117, 80, 123),
    "send": (245, 121, 0),
    "recv": (237, 212, 0),
    "idle": (225, 225, 225),
}
ROW, GAP, MARGIN, LEGEND = 36, 8, 10, 28


def write_png(path, width, height, pixels):
    raw = b"".join(b"\x00" + bytes(row) for row in pixels)

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    with open(path, "wb") as out:
        out.write(b"\x89PNG\r\n\x1a\n")
        out.write(chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)))
        out.write(chunk(b"IDAT", zlib.compress(raw, 9)))
        out.write(chunk(b"IEND", b""))


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    width = int(argv[argv.index("--width") + 1]) if "--width" in argv else 1200
    with open(argv[1]) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    if not events:
        print("trace_to_png: no spans in " + argv[1], file=sys.stderr)
        return 1
    ranks = sorted({e["tid"] for e in events})
    start = min(e["ts"] for e in events)
    end = max(e["ts"] + e["dur"] for e in events)
    height = 2 * MARGIN + len(ranks) * (ROW + GAP) + LEGEND
    pixels = [bytearray([255, 255, 255] * width) for _ in range(height)]
    scale = (width - 2 * MARGIN) / (end - start)

    def fill(x0, x1, y0, y1, colour):
        for y in range(max(0, y0), min(height, y1)):
            row = pixels[y]
            for x in range(max(0, x0), min(width, x1)):
                row[3 * x:3 * x + 3] = bytes(colour)

    for e in events:
        row = ranks.index(e["tid"])
        y0 = MARGIN + row * (ROW + GAP)
        x0 = MARGIN + int((e["ts"] - start) * scale)
        x1 = max(x0 + 1, MARGIN + int((e["ts"] + e["dur"] - start) * scale))
        colour = COLOURS.get(e.get("cat"), (0, 0, 0))
        if e.get("cat") in ("forward", "backward", "input gradient", "weight gradient"):
            digits = "".join(ch for ch in e["name"].split(".")[0] if ch.isdigit())
            shade = 0.55 + 0.45 * ((int(digits or 0) % 4) / 3.0)  # micro-batch m, m+4, ... alike
            colour = tuple(min(255, int(c * shade + 60 * (1 - shade))) for c in colour)
            fill(x0, x1, y0, y0 + ROW, colour)
            fill(x1 - 1, x1, y0, y0 + ROW, (255, 255, 255))  # a thin edge between spans
        else:
            fill(x0, x1, y0 + ROW // 3, y0 + 2 * ROW // 3, colour)
    y = height - MARGIN - LEGEND + 8
    shown = [c for c in COLOURS if c in {e.get("cat") for e in events} or c == "idle"]
    for i, name in enumerate(shown):
        fill(MARGIN + i * 120, MARGIN + i * 120 + 40, y, y + 14, COLOURS[name])
    write_png(argv[2], width, height, pixels)
    print("wrote %s: %d ranks, %.1f ms" % (argv[2], len(ranks), (end - start) / 1000.0))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
