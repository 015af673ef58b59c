#!/usr/bin/env python3
"""Alternates variants of `crescent bench transfer` in a random order, round after round, and
prints per row the median GB/s and the median and lowest ratio of each variant. On a noisy
machine one run of each proves nothing; rounds in turns put the drift on all variants alike.

  tools/bench_transfer_ab.py --rounds 6 \\
      --variant 'auto=build/apps/crescent --cpus auto' \\
      --variant 'none=build/apps/crescent --cpus none' \\
      -- --only tcp --block-kib 64 --batch 16

A variant is NAME=BINARY [FLAGS...]; what follows `--` is passed to every run.
"""
import argparse
import collections
import random
import shlex
import statistics
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--variant", action="append", required=True, help="NAME=BINARY [FLAGS...]")
    ap.add_argument("rest", nargs=argparse.REMAINDER, help="-- flags for every run")
    args = ap.parse_args()
    if args.rounds < 1:
        sys.exit("--rounds must be at least 1")
    variants = {}
    for v in args.variant:
        name, sep, command = v.partition("=")
        if not sep or not name or not command.strip():
            sys.exit(f"--variant {v!r}: expected NAME=BINARY [FLAGS...]")
        variants[name] = shlex.split(command)
    common = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    results = collections.defaultdict(list)  # (row, variant) -> [(gbps, ratio)]
    for _ in range(args.rounds):
        order = list(variants)
        random.shuffle(order)
        for name in order:
            command = variants[name][:1] + ["bench", "transfer"] + variants[name][1:] + common
            run = subprocess.run(command, capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit(f"{name}: {shlex.join(command)} failed ({run.returncode}):\n{run.stderr}")
            for line in run.stdout.splitlines():
                f = line.split()
                if len(f) == 10 and f[9].endswith("x"):  # path local op N unit batch threads ...
                    row = f"{f[0]} {f[1]} {f[2]} {f[3]} {f[4]} b{f[5]} t{f[6]}"
                    results[(row, name)].append((float(f[7]), float(f[9][:-1])))
    rows = list(dict.fromkeys(row for row, _ in results))
    for row in rows:
        cells = []
        for name in variants:
            got = results[(row, name)]
            if not got:  # this variant printed no such row
                cells.append(f"{name}: no row")
                continue
            ratios = [r for _, r in got]
            cells.append(f"{name}: {statistics.median(g for g, _ in got):.2f} GB/s, ratio "
                         f"{statistics.median(ratios):.2f}x (min {min(ratios):.2f}x)")
        print(f"{row:32} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
