#!/usr/bin/env python3
"""The plot of a `crescent experiment` result: what the command writes as NAME.png.

  tools/plot_experiment.py NAME.json NAME.png [--wall NAME.wall.json]

NAME.json is the experiment's JSON (its "experiment" field says which plot); NAME.wall.json, where
the experiment has one, holds its wall-clock figures (scale). Axes carry their units, as the
paper draws them. Needs python3-matplotlib (tools/setup.sh installs it); Debian's python3 is
/usr/bin/python3.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")  # no display
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

DPI = 100


def finish(fig, title, path):
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def bar_labels(ax, bars, fmt):
    for b in bars:
        ax.annotate(fmt(b.get_height()), (b.get_x() + b.get_width() / 2, b.get_height()),
                    ha="center", va="bottom", fontsize=7)


def plot_capacity(r, wall, path):
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    caps = r["capacity_tokens"]
    ax.plot(caps, r["sequence_only"], marker="o", label="sequence-only (analysis)")
    ax.plot(caps, r["replayed"], marker="x", linestyle="--", label="replayed (actors, one pool node)")
    ax.axhline(r["max_sequence_only"], color="grey", linewidth=0.8, linestyle=":",
               label="maximum (unbounded cache)")
    for mark, name in ((3e6, "3M: a node's cache"), (5e7, "50M")):
        ax.axvline(mark, color="grey", linewidth=0.6, linestyle="--")
        ax.text(mark, 0.02, " " + name, rotation=90, fontsize=7, color="grey", va="bottom")
    ax.set_xscale("log")
    ax.set_xlabel("cache capacity (tokens)")
    ax.set_ylabel("hit rate (share of prompt tokens)")
    ax.set_ylim(0, 1)
    ax.grid(True, linewidth=0.3)
    ax.legend(fontsize=8, loc="upper left")
    finish(fig, "Prefix hit rate vs cache capacity (Fig. 9)", path)


def plot_local_vs_global(r, wall, path):
    fig, (a, b) = plt.subplots(1, 2, figsize=(8.4, 3.8))
    names = ["local,\nby load", "local,\ncache-aware", "global\npool"]
    sides = [r["local_by_load"], r["local"], r["global"]]
    colors = ["tab:olive", "tab:grey", "tab:blue"]
    bars = a.bar(names, [s["hit_rate"] for s in sides], color=colors)
    bar_labels(a, bars, lambda v: f"{v:.3f}")
    a.set_ylabel("hit rate (share of prompt tokens)")
    a.set_ylim(0, 1)
    bars = b.bar(names, [s["prefill_gpu_s_mean"] for s in sides], color=colors)
    bar_labels(b, bars, lambda v: f"{v:.3f}")
    b.set_ylabel("prefill GPU time per request (s)")
    for ax in (a, b):
        ax.grid(True, axis="y", linewidth=0.3)
    finish(fig, "Local caches vs the global pool, 10 prefill nodes (Fig. 10)", path)


def plot_policies(r, wall, path):
    fig, ax = plt.subplots(figsize=(7.2, 4.0))
    ps = r["policies"]
    xs = range(len(ps))
    mean = [p["ttft_ms_mean"] / 1000 for p in ps]
    p90 = [p["ttft_ms_p90"] / 1000 for p in ps]
    w = 0.38
    bars = ax.bar([x - w / 2 for x in xs], mean, w, label="mean TTFT")
    bar_labels(ax, bars, lambda v: f"{v:.2f}")
    bars = ax.bar([x + w / 2 for x in xs], p90, w, label="p90 TTFT")
    bar_labels(ax, bars, lambda v: f"{v:.2f}")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([p["policy"] for p in ps], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("TTFT (s, log scale)")
    ax.grid(True, axis="y", linewidth=0.3)
    ax.legend(fontsize=8)
    finish(fig, "TTFT by scheduling policy (Fig. 5)", path)


def plot_replicas(r, wall, path):
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for b in r["blocks"]:
        ax.step(r["time_s"], b["replicas"], where="post",
                label=f"rank {b['rank']} ({b['uses']} uses)")
    ax.set_xlabel("virtual time (s)")
    ax.set_ylabel("replicas in DRAM")
    ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.grid(True, linewidth=0.3)
    ax.legend(fontsize=8)
    finish(fig, "Replicas of blocks by use rank over time (Fig. 11)", path)


def plot_bandwidth(r, wall, path):
    fig, (a, b) = plt.subplots(1, 2, figsize=(8.0, 3.6))
    pts = r["points"]
    gbps = [p["nic_gbps"] for p in pts]
    a.plot(gbps, [p["ttft_ms_mean"] / 1000 for p in pts], marker="o", label="mean")
    a.plot(gbps, [p["ttft_ms_p90"] / 1000 for p in pts], marker="x", label="p90")
    a.set_ylabel("TTFT (s)")
    a.legend(fontsize=8)
    b.plot(gbps, [p["effective"] for p in pts], marker="o", color="tab:green")
    b.set_ylabel(f"effective requests (TBT <= {r['tbt_slo_ms']} ms)")
    b.set_ylim(bottom=0)
    for ax in (a, b):
        ax.set_xscale("log")
        ax.set_xticks(gbps)
        ax.set_xticklabels([f"{g:g}" for g in gbps])
        ax.set_xlabel("NIC bandwidth per node (Gbps)")
        ax.grid(True, linewidth=0.3)
    finish(fig, "The paper cluster with slower NICs", path)


def plot_pd_ratio(r, wall, path):
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for x in r["speedups"]:
        pts = [p for p in r["points"] if p["speedup"] == x]
        ax.plot([p["prefill_nodes"] for p in pts], [p["effective"] for p in pts], marker="o",
                label=f"arrivals x{x:g}")
    pts = [p for p in r["points"] if p["speedup"] == r["speedups"][0]]
    ax.set_xticks([p["prefill_nodes"] for p in pts])
    ax.set_xticklabels([f"{p['prefill_nodes']}:{p['decode_nodes']}" for p in pts])
    ax.set_xlabel("prefill : decode nodes")
    ax.set_ylabel(f"effective requests (TBT <= {r['tbt_slo_ms']:g} ms)")
    ax.set_ylim(bottom=0)
    ax.grid(True, linewidth=0.3)
    ax.legend(fontsize=8)
    finish(fig, f"Effective requests by P/D split of {r['nodes']} nodes", path)


def plot_overload(r, wall, path):
    fig, (a, b) = plt.subplots(1, 2, figsize=(8.4, 3.6))
    pts = r["points"]
    modes = []
    for p in pts:
        if p["admission"] not in modes:
            modes.append(p["admission"])
    multiples = sorted({p["load_multiple"] for p in pts})
    w = 0.8 / len(modes)
    top_effective = max(p["effective"] for p in pts)
    for k, mode in enumerate(modes):
        xs = [i + (k - (len(modes) - 1) / 2) * w for i in range(len(multiples))]
        ys = [next(p["effective"] for p in pts
                   if p["admission"] == mode and p["load_multiple"] == m) for m in multiples]
        a.bar(xs, ys, w, label=mode)
    a.set_xticks(range(len(multiples)))
    a.set_xticklabels([f"{m:g}x" for m in multiples])
    a.set_xlabel(f"load (x the sustained rate, arrivals x{r['sustained_speedup']:g})")
    a.set_ylabel("effective requests")
    a.grid(True, axis="y", linewidth=0.3)
    a.set_ylim(0, max(1, top_effective) * 1.3)  # room for the legend above the bars
    a.legend(fontsize=7, ncol=3, loc="upper center")
    top = max(multiples)
    for p in pts:
        if p["load_multiple"] == top:
            load = p["decode_load"]
            b.plot(load["time_s"], [t / 1e6 for t in load["kv_tokens"]], label=p["admission"],
                   linewidth=0.7)
    b.set_xlabel("virtual time (s)")
    b.set_ylabel("KV in decode (M tokens)")
    b.set_title(f"decode load at {top:g}x", fontsize=9)
    b.grid(True, linewidth=0.3)
    b.legend(fontsize=7)
    finish(fig, "Admission under overload", path)


def plot_scale(r, wall, path):
    fig, (a, b) = plt.subplots(1, 2, figsize=(8.0, 3.6))
    pts = r["points"]
    nodes = [p["nodes"] for p in pts]
    a.plot(nodes, [p["summary"]["ttft_ms"]["mean"] / 1000 for p in pts], marker="o", label="mean")
    a.plot(nodes, [p["summary"]["ttft_ms"]["p90"] / 1000 for p in pts], marker="x", label="p90")
    a.set_ylabel("TTFT (s, simulated)")
    a.legend(fontsize=8)
    if wall:
        ws = wall["wall"]["points"]
        b.plot([w["nodes"] for w in ws], [w["wall_s"] for w in ws], marker="o",
               label="simulation wall time (s)")
        b2 = b.twinx()
        b2.plot([w["nodes"] for w in ws], [w["decision_us_p50"] for w in ws], marker="x",
                color="tab:red", label="decision p50 (us)")
        b2.set_ylabel("conductor decision, p50 (us, wall)", color="tab:red")
        b.set_ylabel("simulation wall time (s)")
    for ax in (a, b):
        ax.set_xlabel("nodes")
        ax.set_xticks(nodes)
        ax.grid(True, linewidth=0.3)
    finish(fig, "Scaling the cluster and the arrival rate together", path)


def plot_effective_capacity(r, wall, path):
    rates = r["rates"]
    fig, axes = plt.subplots(1, len(rates), figsize=(4.2 * len(rates), 4.0), sharey=True)
    xs = r["thresholds_ms"]
    for ax, rate in zip(axes, rates):
        for s in rate["systems"]:
            ax.plot(xs, [100 * v for v in s["shares"]], marker="o", markersize=3,
                    label=s["label"])
        for x in (100, 200, 300):
            ax.axvline(x, color="grey", linewidth=0.4, linestyle=":")
        ax.set_xscale("log")
        ax.set_xticks(xs)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%d"))
        ax.tick_params(axis="x", labelsize=7)
        ax.set_xlabel("TBT threshold (ms, log scale)")
        ax.set_title(f"arrivals at {rate['speedup']}x the trace's", fontsize=9)
        ax.set_ylim(0, 100)
        ax.grid(True, linewidth=0.3)
    axes[0].set_ylabel("requests meeting TTFT 30 s and TBT (%)")
    axes[0].legend(fontsize=7)
    finish(fig, "Effective requests vs TBT threshold (Figs. 1, 6, 7)", path)


def plot_prefill_time(r, wall, path):
    fig, ax = plt.subplots(figsize=(7.0, 4.0))
    ss = r["systems"]
    xs = range(len(ss))
    bars = ax.bar(list(xs), [s["prefill_gpu_s_mean"] for s in ss])
    bar_labels(ax, bars, lambda v: f"{v:.2f} s")
    base = ss[0]["prefill_gpu_s_mean"]
    for x, s in zip(xs, ss):
        ax.annotate(f"paper {s['paper_ratio_to_mooncake']:.2f}x", (x, 0), xytext=(0, 3),
                    textcoords="offset points", ha="center", fontsize=7, color="white")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([s["label"] for s in ss], fontsize=8)
    ax.set_ylabel("prefill GPU time per request (s)")
    ax.grid(True, axis="y", linewidth=0.3)
    if base > 0:
        ax.set_title("vs Crescent: " + ", ".join(f"{s['prefill_gpu_s_mean'] / base:.2f}x" for s in ss),
                     fontsize=8)
    finish(fig, "Prefill GPU time per request (Fig. 8)", path)


def plot_compression(r, wall, path):
    runs = r["runs"]
    pools = []
    for run in runs:
        if run["pool_tokens_per_node"] not in pools and run["codec"] != "none x3.5":
            pools.append(run["pool_tokens_per_node"])
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.8))
    for ax, pool in zip(axes, pools):
        mine = [x for x in runs if x["pool_tokens_per_node"] == pool and x["codec"] != "none x3.5"]
        larger = [x for x in runs if x["codec"] == "none x3.5"][pools.index(pool)]
        names = [x["codec"] for x in mine]
        bars = ax.bar(names, [x["summary"]["hit_rate"] for x in mine], color="tab:blue")
        bar_labels(ax, bars, lambda v: f"{v:.3f}")
        ax.axhline(larger["summary"]["hit_rate"], color="tab:orange", linewidth=1, linestyle="--",
                   label="none, pool x3.5")
        ax.set_title(f"{pool:,} tokens of pool a node", fontsize=9)
        ax.set_ylabel("hit rate (share of prompt tokens)")
        ax.set_ylim(0, 1)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(True, axis="y", linewidth=0.3)
        ax.legend(fontsize=7, loc="upper left")
    finish(fig, "KV block codecs in the pool: hit rate by codec", path)


PLOTS = {
    "capacity": plot_capacity,
    "local-vs-global": plot_local_vs_global,
    "policies": plot_policies,
    "replicas": plot_replicas,
    "bandwidth": plot_bandwidth,
    "pd-ratio": plot_pd_ratio,
    "overload": plot_overload,
    "effective-capacity": plot_effective_capacity,
    "prefill-time": plot_prefill_time,
    "scale": plot_scale,
    "compression": plot_compression,
}


def main(argv):
    if len(argv) not in (3, 5) or (len(argv) == 5 and argv[3] != "--wall"):
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        doc = json.load(f)
    wall = None
    if len(argv) == 5:
        with open(argv[4]) as f:
            wall = json.load(f)
    name = doc.get("experiment")
    if name not in PLOTS:
        print(f"plot_experiment.py: no plot for experiment {name!r}", file=sys.stderr)
        return 2
    PLOTS[name](doc["results"], wall, argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
