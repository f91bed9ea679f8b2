#!/usr/bin/env python3
"""Summarise one Google Benchmark JSON file as a table.

A benchmark whose name contains "baseline" is a baseline. The speedup column
compares each other benchmark with a baseline in the same file: one whose
argument suffix (the part after the first '/') matches if any, and among
those the one whose name shares the longest prefix. Ratios from one run are what count on a noisy machine.
"""
import json
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


def main(path):
    with open(path) as f:
        data = json.load(f)
    rows = [b for b in data.get("benchmarks", []) if b.get("run_type", "iteration") == "iteration"
            and not b.get("error_occurred")]
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
    for p in sys.argv[1:]:
        main(p)
