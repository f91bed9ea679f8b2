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
# benchmarks (name prefixes) that stand for the component. An entry may be a
# pair (row, baseline) where the automatic pairing would pick a baseline that
# answers another question (a cost breakdown rather than the classic
# alternative).
HEADLINE = {
    "sliding_counter": ["BM_allow<u32,total,pow2>/2", "BM_allow<u32,total,pow2>/8", "BM_allow<u32,total,pow2>/61"],
    "limiters": ["BM_gcra_allow", "BM_gcra/", "BM_token_bucket/",
                 ("BM_atomic_gcra/min_time:0.050/real_time/threads:2",
                  "BM_mutex_token_bucket_baseline/min_time:0.050/real_time/threads:2")],
    "keyed": ["BM_keyed_batch/uniform/1048576", "BM_keyed_single/uniform/1048576"],
    "hash": ["BM_hash64/8", "BM_hash64/64"],
    "hyperloglog": [("BM_add_u64/14", "BM_unordered_set_baseline/10000"),
                    ("BM_hll_distinct/10000", "BM_unordered_set_baseline/10000")],
    "count_min": ["BM_count_min_add/2048"],
    "top_k": ["BM_top_k_add/100"],
    "bloom_filter": ["BM_bloom/contains_hit/100K", "BM_bloom_batch/contains_hit/100K", "BM_bloom_batch/contains_hit/10M"],
    "reservoir": ["BM_algorithm_l_add/1024", "BM_algorithm_l_add_range/1024"],
    "tdigest": ["BM_add/100"],
}

# A file's baseline for the rows no baseline is named after.
DEFAULT_BASELINE = {
    "limiters": "BM_mutex_token_bucket_baseline",
    "tdigest": "BM_sort_baseline",
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
        # The arguments after the first '/', without the run options
        # (min_time:...) that every row of a file may carry.
        parts = name.split("/")[1:]
        return "/".join(p for p in parts if not p.startswith("min_time:"))

    def tokens(name):
        return name.split("/")[0].split("_")

    def shared(x, y):
        n = 0
        while n < min(len(x), len(y)) and x[n] == y[n]:
            n += 1
        return n

    default = DEFAULT_BASELINE.get(os.path.basename(path)[: -len(".json")])

    def baseline_for(b):
        # 1. A baseline named after the row (BM_count_min_add/2048 ->
        #    BM_count_min_add_textbook_baseline/2048), the same arguments first.
        # 2. Else the file's default baseline, the same arguments first.
        # 3. Else the baseline with the same arguments, then the longest
        #    shared name prefix (BM_allow<...>/61 -> BM_ring_baseline/61).
        if not baselines:
            return None
        t = tokens(b["name"])
        same_args = lambda c: bool(suffix(b["name"])) and suffix(c["name"]) == suffix(b["name"])
        named = [c for c in baselines if shared(tokens(c["name"]), t) > 1]
        if named:
            return max(named, key=lambda c: (shared(tokens(c["name"]), t), same_args(c)))
        if default:
            family = [c for c in baselines if c["name"].split("/")[0] == default]
            if family:
                return next((c for c in family if same_args(c)), family[0])
        pool = [c for c in baselines if same_args(c)] or baselines
        return max(pool, key=lambda c: shared(c["name"].split("/")[0], b["name"].split("/")[0]))

    if headline:
        stem = os.path.basename(path)[: -len(".json")]
        wanted = HEADLINE.get(stem, [])
        for entry in wanted:
            prefix, base_prefix = entry if isinstance(entry, tuple) else (entry, None)
            b = next((r for r in rows if r["name"].startswith(prefix)), None)
            if b is None:
                continue
            if base_prefix is None:
                base = baseline_for(b)
            else:
                base = next((r for r in rows if r["name"].startswith(base_prefix)), None)
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
