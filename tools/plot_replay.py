#!/usr/bin/env python3
"""Plots of a `crescent replay --sim` report (its --report JSON): what --plots writes.

  tools/plot_replay.py REPORT.json DIR

writes into DIR:
  ttft_cdf.png   the CDF of time to first token over completed requests, the TTFT SLO marked
  tbt_cdf.png    the CDF of time between tokens (a request's mean of its longest 10% of token
                 intervals, the paper's definition), the three TBT thresholds marked
  hit_rate.png   the prefix hit rate over virtual time: reused / prompt tokens of the requests
                 arriving in each window, and cumulative

Needs python3-matplotlib (tools/setup.sh installs it); Debian's python3 is /usr/bin/python3.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # no display
import matplotlib.pyplot as plt  # noqa: E402


def cdf(values):
    xs = sorted(values)
    n = len(xs)
    return xs, [(i + 1) / n for i in range(n)]


def plot_cdf(values, xlabel, title, marks, path):
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    if values:
        xs, ys = cdf(values)
        ax.plot(xs, ys, drawstyle="steps-post")
    for value, label in marks:
        ax.axvline(value, linestyle="--", linewidth=0.8, color="grey")
        ax.text(value, 0.02, " " + label, rotation=90, va="bottom", fontsize=8, color="grey")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("share of requests")
    ax.set_ylim(0, 1.01)
    ax.set_title(title)
    ax.grid(True, linewidth=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_hit_rate(records, path, windows=50):
    done = [r for r in records if r["status"] == "completed"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    if done:
        start = min(r["arrival_ns"] for r in done)
        end = max(r["arrival_ns"] for r in done)
        width = max(1, (end - start) // windows)
        buckets = {}
        for r in done:
            b = (r["arrival_ns"] - start) // width
            reused, prompt = buckets.get(b, (0, 0))
            buckets[b] = (reused + r["reused_tokens"], prompt + r["prompt_tokens"])
        xs, ys, cum, total_reused, total_prompt = [], [], [], 0, 0
        for b in sorted(buckets):
            reused, prompt = buckets[b]
            total_reused += reused
            total_prompt += prompt
            xs.append((b + 0.5) * width / 1e9)
            ys.append(reused / prompt if prompt else 0)
            cum.append(total_reused / total_prompt if total_prompt else 0)
        ax.plot(xs, ys, label="requests arriving in the window")
        ax.plot(xs, cum, label="cumulative")
        ax.legend(fontsize=8)
    ax.set_xlabel("virtual time (s)")
    ax.set_ylabel("prefix hit rate (reused / prompt tokens)")
    ax.set_ylim(0, 1)
    ax.set_title("Prefix hit rate over time")
    ax.grid(True, linewidth=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        report = json.load(f)
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    records = report["per_request"]
    done = [r for r in records if r["status"] == "completed"]
    slo = report["slo"]
    plot_cdf([r["ttft_ns"] / 1e9 for r in done], "time to first token (s)",
             "TTFT, %d completed requests" % len(done),
             [(slo["ttft_ms"] / 1000, "SLO %g s" % (slo["ttft_ms"] / 1000))],
             os.path.join(out, "ttft_cdf.png"))
    plot_cdf([r["tbt_ms"] for r in done if r["tbt_ms"] >= 0], "time between tokens (ms)",
             "TBT (mean of the longest 10% of intervals)",
             [(t, "%g ms" % t) for t in slo["tbt_ms"]], os.path.join(out, "tbt_cdf.png"))
    plot_hit_rate(records, os.path.join(out, "hit_rate.png"))
    print("plots: %s/{ttft_cdf,tbt_cdf,hit_rate}.png" % out)


if __name__ == "__main__":
    main()
