#!/usr/bin/env python3
"""Summarise one Google Benchmark JSON file as a table.

A benchmark whose name contains "baseline" is a baseline. The speedup column
compares each other benchmark with a baseline in the same file: one whose
argument suffix (the part after the first '/') matches if any, and among
those the one whose name shares the longest prefix. Ratios from one run are what count on a noisy machine.
"""
import json
import os
import sys

SKIP = {"name", "run_name", "run_type", "repetitions", "repetition_index", "threads", "iterations",
        "real_time", "cpu_time", "time_unit", "family_index", "per_family_instance_index",
        "aggregate_name", "aggregate_unit", "items_per_second", "bytes_per_second", "label", "error_occurred",
        "error_message"}
UNIT = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def ns_per_item(b):
    t = b["cpu_time"] * UNIT.get(b.get("time_unit", "ns"), 1.0)
    ips = b.get("items_per_second")
    if ips:
        return 1e9 / ips
    return t


# The one-screen table `scripts/bench` prints last: per bench file, the
# benchmarks (name prefixes) that stand for the component.
HEADLINE = {
    "sliding_counter": ["BM_allow<u32,total,pow2>/2", "BM_allow<u32,total,pow2>/8", "BM_allow<u32,total,pow2>/61"],
    "limiters": ["BM_gcra_allow", "BM_gcra/", "BM_token_bucket/", "BM_atomic_gcra/min_time:0.050/real_time/threads:2"],
    "keyed": ["BM_keyed_batch/uniform/1048576", "BM_keyed_single/uniform/1048576"],
    "hash": ["BM_hash64/8", "BM_hash64/64"],
    "hyperloglog": ["BM_add_u64/14"],
    "count_min": ["BM_count_min_add/2048"],
    "top_k": ["BM_top_k_add/100"],
    "bloom_filter": ["BM_bloom/contains_hit/100K", "BM_bloom_batch/contains_hit/100K", "BM_bloom_batch/contains_hit/10M"],
    "reservoir": ["BM_algorithm_l_add/1024", "BM_algorithm_l_add_range/1024"],
    "tdigest": ["BM_add/100"],
}


def load(path):
    with open(path) as f:
        data = json.load(f)
    return [b for b in data.get("benchmarks", []) if b.get("run_type", "iteration") == "iteration"
            and not b.get("error_occurred")]


def main(path, headline=False):
    rows = load(path)
    if not rows:
        print("  (no results)")
        return
    baselines = [b for b in rows if "baseline" in b["name"].lower()]

    def suffix(name):
        return name.split("/", 1)[1] if "/" in name else ""

    def common_prefix(x, y):
        n = 0
        while n < min(len(x), len(y)) and x[n] == y[n]:
            n += 1
        return n

    def baseline_for(b):
        # Same argument suffix first, then the baseline whose name shares the
        # longest prefix (BM_weighted_a_expj_add -> BM_weighted_a_res_baseline).
        same = [c for c in baselines if suffix(b["name"]) and suffix(c["name"]) == suffix(b["name"])]
        pool = same or baselines
        if not pool:
            return None
        return max(pool, key=lambda c: common_prefix(c["name"].split("/")[0], b["name"].split("/")[0]))

    if headline:
        stem = os.path.basename(path)[: -len(".json")]
        wanted = HEADLINE.get(stem, [])
        for prefix in wanted:
            b = next((r for r in rows if r["name"].startswith(prefix)), None)
            if b is None:
                continue
            base = baseline_for(b)
            ns = ns_per_item(b)
            speed = f"{ns_per_item(base) / ns:.1f}x" if base is not None and ns > 0 else "-"
            name = stem + ": " + b["name"].replace("/min_time:0.050", "").replace("/min_time:0.100", "")
            print(f"  {name:<58} {ns:>9.2f} ns {speed:>7}")
        return

    width = max(len(b["name"]) for b in rows)
    width = min(max(width, 20), 70)
    print(f"  {'benchmark':<{width}} {'ns/item':>10} {'Mitems/s':>10} {'vs base':>8}  counters")
    for b in rows:
        ns = ns_per_item(b)
        ips = b.get("items_per_second")
        base = baseline_for(b)
        speed = ""
        if base is not None and base is not b and "baseline" not in b["name"].lower():
            speed = f"{ns_per_item(base) / ns:.1f}x" if ns > 0 else ""
        extra = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in b.items() if k not in SKIP and isinstance(v, (int, float)))
        name = b["name"] if len(b["name"]) <= width else b["name"][: width - 1] + "~"
        mips = f"{ips / 1e6:.1f}" if ips else "-"
        print(f"  {name:<{width}} {ns:>10.2f} {mips:>10} {speed:>8}  {extra}")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--headline":
        print(f"  {'headline (scripts/bench --all for everything)':<58} {'per item':>12} {'vs base':>7}")
        for p in args[1:]:
            main(p, headline=True)
    else:
        for p in args:
            main(p)
