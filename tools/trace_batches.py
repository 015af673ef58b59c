#!/usr/bin/env python3
"""Where the time of the transfer benchmark's batches goes, from trace point files.

Build with -DCRESCENT_TRACE_POINTS=ON, run the benchmark with CRESCENT_TRACE_DIR=DIR (both of
its processes write DIR/trace.<pid>.txt when they exit; see transport/trace_points.hpp), then:

    tools/trace_batches.py DIR [--skip 0.33]

Prints the distribution of each batch's duration (submit to wait's return) and, for batches
of one submitting thread that one TCP connection carried alone, of its steps: the sender
starting, the server's first request header, the stream, and the tail from the last payload
to the submitter's return. Batches whose sender and server ran on the same CPU are counted
apart: on a kernel without preemption the server then waits for the sender's whole write.
"""
import argparse
import glob
import os
import statistics
import sys


def load(directory):
    events = []
    for path in glob.glob(os.path.join(directory, "trace.*.txt")):
        with open(path) as f:
            for number, line in enumerate(f, 1):
                fields = line.split()
                if len(fields) != 4:
                    sys.exit(f"{path}:{number}: not 'nanoseconds tag value cpu': {line!r}")
                events.append((int(fields[0]), fields[1], int(fields[2]), int(fields[3])))
    if not events:
        sys.exit(f"no events in {directory}/trace.*.txt")
    events.sort()
    return events


def batches(events):
    """(start index, end index, thread) of each batch: a submit, to its thread's wait."""
    open_at = {}
    for i, (_, tag, value, _) in enumerate(events):
        if tag == "S":
            open_at[value] = i
        elif tag == "W" and value in open_at:
            yield open_at.pop(value), i, value


def steps(events, start, end):
    """The steps of one batch, in microseconds, or None where its events are not all there."""
    seg = events[start:end + 1]
    first = lambda tag: next((e for e in seg if e[1] == tag), None)
    last = lambda tag: next((e for e in reversed(seg) if e[1] == tag), None)
    s, w, a, b = seg[0], seg[-1], first("a"), last("b")
    h_first, h_last = first("h"), last("h")
    if None in (a, b, h_first, h_last) or h_first[0] < a[0]:
        return None
    us = lambda x, y: (y - x) / 1000
    return {
        "submit -> sender": us(s[0], a[0]),
        "sender -> server's first header": us(a[0], h_first[0]),
        "first header -> last": us(h_first[0], h_last[0]),
        "last payload -> submitter back": us(max(b[0], h_last[0]), w[0]),
        "same CPU": a[3] == h_first[3],
    }


def describe(name, values):
    values = sorted(values)
    n = len(values)
    return (f"  {name:34} p10 {values[n // 10]:8.1f}  p50 {values[n // 2]:8.1f}  "
            f"p90 {values[9 * n // 10]:8.1f}  mean {statistics.mean(values):8.1f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory")
    parser.add_argument("--skip", type=float, default=0.33,
                        help="fraction of the batches to leave out first (the warm-up)")
    args = parser.parse_args()
    if not 0 <= args.skip < 1:
        sys.exit("--skip: a fraction in [0, 1)")
    events = load(args.directory)
    found = list(batches(events))
    found = found[int(len(found) * args.skip):]
    if not found:
        sys.exit("no whole batch (a submit and its wait) in the trace")
    threads = {t for _, _, t in found}
    print(f"{len(found)} batches, {len(threads)} submitting thread(s), microseconds")
    print(describe("batch", [(events[j][0] - events[i][0]) / 1000 for i, j, _ in found]))
    if len(threads) > 1:
        print("(steps only for one submitting thread: the bursts of several interleave)")
        return
    rows = [r for r in (steps(events, i, j) for i, j, _ in found) if r]
    for label, chosen in (("all", rows), ("sender and server on the same CPU",
                                          [r for r in rows if r["same CPU"]]),
                          ("on different CPUs", [r for r in rows if not r["same CPU"]])):
        if not chosen:
            continue
        print(f"{label}: {len(chosen)} batches")
        for key in chosen[0]:
            if key != "same CPU":
                print(describe(key, [r[key] for r in chosen]))


if __name__ == "__main__":
    main()
