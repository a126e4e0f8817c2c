#!/usr/bin/env python3
"""Every loop of the CPU kernels that carries an OpenMP simd pragma vectorises, for AVX2 and
for AVX-512.

    check_vectorization.py BUILD_DIR [ARCH ...]     (default: x86-64-v3 x86-64-v4)

A kernel loop that stays scalar runs 5-10x slower and still passes every test, which is how
the CPU kernels once ran on AVX2 machines while AVX-512 ones were fast. So each loop over a
tensor's elements in kernels/cpu carries `#pragma omp simd` (or `parallel for simd`), and
this check recompiles each kernel source with the build's own command (from
compile_commands.json), for each ARCH in place of the build's -march, asks GCC which loops it
vectorised (-fopt-info-vec-optimized) and names every pragma'd loop it did not. GCC names a loop
by its `for` line or its body's; the float instantiation is the one that must vectorise
(double's std::exp never does, and shares the lines). A loop the preprocessor leaves out for
an ARCH (an #if for one instruction set) is checked only for the others; one it leaves out
for every ARCH is a failure.
Exit status: 0 all vectorised, 1 some not (listed), 2 the check could not run.
"""
import json
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor


def pragma_loops(path):
    """(first, last) lines of each loop statement that follows an `omp ... simd` pragma."""
    lines = open(path).read().splitlines()
    indent = lambda text: len(text) - len(text.lstrip())
    loops = []
    for i, line in enumerate(lines):
        if re.match(r"\s*#pragma omp\b.*\bsimd\b", line):
            j = i
            while lines[j].rstrip().endswith("\\"):  # the pragma's continuation lines
                j += 1
            j += 1
            while j < len(lines) and not lines[j].lstrip().startswith("for"):
                j += 1
            # The statement runs until a line indented no deeper than `for` (its brace kept).
            end = j + 1
            while end < len(lines) and (not lines[end].strip() or
                                        indent(lines[end]) > indent(lines[j])):
                end += 1
            if end < len(lines) and lines[end].strip() == "}":
                end += 1
            loops.append((j + 1, end))
    return loops


def compile_args(command):
    args = [a for a in shlex.split(command) if not a.startswith("-march=")]
    # Drop the output and the -c source: they are replaced.
    cleaned, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-c"):
            skip = True
            continue
        cleaned.append(a)
    return cleaned


def vectorised_lines(command, source, arch):
    run = compile_args(command) + [f"-march={arch}", "-fopt-info-vec-optimized", "-c", source,
                                   "-o", os.devnull]
    result = subprocess.run(run, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"check_vectorization: compiling {source} for {arch} failed:\n{result.stderr}")
    name = re.escape(source)
    return {int(m.group(1)) for m in
            re.finditer(name + r":(\d+):\d+: optimized: loop vectorized", result.stderr)}


def preprocessed_lines(command, source, arch):
    """The source's lines that survive the preprocessor for ARCH: a loop under an #if that
    ARCH does not take (an instruction set's own path) is not compiled there."""
    run = compile_args(command) + [f"-march={arch}", "-E", source, "-o", "-"]
    result = subprocess.run(run, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"check_vectorization: preprocessing {source} for {arch} failed:\n"
                 f"{result.stderr}")
    lines, line, current = set(), 0, None
    for text in result.stdout.splitlines():
        marker = re.match(r'# (\d+) "([^"]*)"', text)
        if marker:
            line, current = int(marker.group(1)), marker.group(2)
            continue
        if current == source:
            lines.add(line)
        line += 1
    return lines


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    arches = sys.argv[2:] or ["x86-64-v3", "x86-64-v4"]
    try:
        entries = json.load(open(os.path.join(build, "compile_commands.json")))
    except OSError as error:
        print(f"check_vectorization: {error}", file=sys.stderr)
        sys.exit(2)
    kernels = [e for e in entries if re.search(r"/kernels/cpu/[^/]+\.cpp$", e["file"])]
    if not kernels:
        print("check_vectorization: no kernels/cpu sources in compile_commands.json",
              file=sys.stderr)
        sys.exit(2)
    jobs = [(e, arch) for e in kernels for arch in arches]
    def report(job):
        entry, arch = job
        return (vectorised_lines(entry["command"], entry["file"], arch),
                preprocessed_lines(entry["command"], entry["file"], arch))

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        reports = list(pool.map(report, jobs))
    failures, checked, compiled_somewhere = [], 0, set()
    for (entry, arch), (vectorised, compiled) in zip(jobs, reports):
        if not compiled:
            failures.append(f"{os.path.relpath(entry['file'])}: no lines after preprocessing "
                            f"for {arch} (the line markers were not read)")
        for first, last in pragma_loops(entry["file"]):
            if first not in compiled:
                continue
            compiled_somewhere.add((entry["file"], first))
            checked += 1
            # GCC names the loop by its `for` line or by its body's first statement.
            if not any(first <= line <= last for line in vectorised):
                failures.append(f"{os.path.relpath(entry['file'])}:{first}: not vectorised "
                                f"for {arch}")
    for entry in kernels:
        for first, _ in pragma_loops(entry["file"]):
            if (entry["file"], first) not in compiled_somewhere:
                failures.append(f"{os.path.relpath(entry['file'])}:{first}: compiled for none of "
                                f"{', '.join(arches)}")
    for failure in failures:
        print(failure)
    print(f"check_vectorization: {checked - len(failures)} of {checked} simd loops vectorised "
          f"({len(kernels)} sources x {', '.join(arches)})")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
