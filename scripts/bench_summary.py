#!/usr/bin/env python3
"""Summarise Google Benchmark JSON files as tables.

    scripts/bench_summary.py FILE.json...              one table per file
    scripts/bench_summary.py --headline FILE.json...   the one-screen table

Every ratio is "the baseline's ns per item / this row's ns per item" (above 1:
this row is faster), and every table names, per row, the baseline it is
divided by. The pairing is one function of the row's name and its file, used
by every table, so a row has the same ratio in every table of a run.

The pairing rule, first match wins:

1. PAIRS[file]: (regular expression, replacement) applied to the row's name
   (run options such as min_time:0.050 removed); the row pairs with the
   baseline of that name if the file has it. HEADLINE entries written as
   (row, baseline) are pairs of this kind too.
2. A baseline named after the row: its name before '/' starts with the row's
   name before '/' and '_' (BM_count_min_add/2048 ->
   BM_count_min_add_textbook_baseline/2048), with the same arguments.
3. DEFAULT_BASELINE[file]: that baseline with the same arguments, else the
   family's only instance.
4. Otherwise none: the row shows no ratio.

A baseline is a row whose name contains "baseline"; a row whose name
contains "floor" is a lower bound (what the hardware allows) and takes no
ratio. A ratio outside [1/20, 1000] is not printed: such a pair measures
different work, whatever its names say.

Counters: a fraction listed in PERCENT prints as a percentage
(rel_err=0.81% is 0.81% relative error), every other counter as measured.

A new bench file adds its HEADLINE entry (row prefixes; a tuple (row,
baseline) pins the baseline) and, where rule 2 or 3 would not find the
meaningful baseline, a PAIRS entry.
"""
import json
import os
import re
import sys

SKIP = {"name", "run_name", "run_type", "repetitions", "repetition_index", "threads", "iterations",
        "real_time", "cpu_time", "time_unit", "family_index", "per_family_instance_index",
        "aggregate_name", "aggregate_unit", "items_per_second", "bytes_per_second", "label", "error_occurred",
        "error_message"}
UNIT = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
# Counters that are fractions, printed as percentages.
PERCENT = {"rel_err", "rank_err", "fpp", "err_per_N", "recall10", "recall100"}
MIN_RATIO, MAX_RATIO = 1 / 20, 1000

# The one-screen table `scripts/bench` prints last: per bench file, the rows
# (name prefixes, run options removed) that stand for the component.
HEADLINE = {
    "sliding_counter": ["BM_allow<u32,total,pow2>/2", "BM_allow<u32,total,pow2>/8", "BM_allow<u32,total,pow2>/61"],
    "limiters": ["BM_gcra_allow", "BM_gcra", "BM_token_bucket", "BM_atomic_gcra/real_time/threads:2"],
    "keyed": ["BM_keyed_batch/uniform/1048576", "BM_keyed_single/uniform/1048576"],
    "hash": ["BM_hash64/8", "BM_hash64/64"],
    "hyperloglog": ["BM_add_u64/14", "BM_hll_distinct/1000000"],
    "ultraloglog": ["BM_add_u64/14", "BM_merge_estimate/12"],
    "theta": ["BM_theta_add/12", "BM_theta_distinct/1000000"],
    "count_min": ["BM_count_min_add/2048"],
    "top_k": ["BM_top_k_add/100"],
    "bloom_filter": ["BM_bloom/contains_hit/100K", "BM_bloom_batch/contains_hit/100K", "BM_bloom_batch/contains_hit/10M"],
    "reservoir": ["BM_algorithm_l_add/1024", "BM_algorithm_l_add_range/1024"],
    "tdigest": ["BM_add/100", "BM_quantile/100"],
    "kll": [("BM_kll_add/200", "BM_sort_baseline_add"), ("BM_kll_rank/200", "BM_sort_baseline_rank")],
    "windowed": ["BM_View<Hll, tally::Windowed<tally::HyperLogLog, 61>, 1000>/manual_time"],
}

# Rule 1: explicit pairs, (pattern, replacement) on the row's name.
PAIRS = {
    "sliding_counter": [(r"^BM_allow(_overload)?<([^>]*)>/(\d+)$", r"BM_ring_baseline/\3")],
    "limiters": [(r"^BM_atomic_(gcra|token_bucket)/real_time/threads:(\d+)$",
                  r"BM_mutex_token_bucket_baseline/real_time/threads:\2"),
                 (r"^BM_(fixed_window|sliding_window_\d+|sliding_log|token_bucket|gcra|dry_run_gcra)(_allow)?$",
                  r"BM_mutex_token_bucket_baseline/real_time/threads:1")],
    "hyperloglog": [(r"^BM_hll_distinct/(\d+)$", r"BM_unordered_set_baseline/\1")],
    "kll": [(r"^BM_kll_(add|quantile|rank|merge16)/\d+$", r"BM_sort_baseline_\1")],
    "theta": [(r"^BM_theta_distinct/(\d+)$", r"BM_unordered_set_baseline/\1"),
              (r"^BM_theta_(union16|intersection|a_not_b)/(\d+)$", r"BM_\1_unordered_set_baseline/\2")],
    "reservoir": [(r"^BM_weighted_a_expj_add/(\d+)$", r"BM_weighted_a_res_baseline/\1")],
    "windowed": [(r"^BM_View<(\w+), tally::Windowed<(.*)>, (\d+)>/manual_time$",
                  r"BM_View<\1, NaiveWinBaseline<\2>, \3>/manual_time")],
}

# Rule 3: a file's baseline for the rows no baseline is named after.
DEFAULT_BASELINE = {
    "limiters": "BM_mutex_token_bucket_baseline",
    "tdigest": "BM_sort_baseline",
    "kll": "BM_sort_baseline_add",
    "count_min": "BM_count_min_add_textbook_baseline",
    "top_k": "BM_unordered_map_baseline",
    "bloom_filter": "BM_classic_bloom_baseline",
    "reservoir": "BM_algorithm_r_baseline",
    "hash": "BM_fnv1a_baseline",
    "keyed": "BM_unordered_map_baseline",
}


def clean(name):
    """A row's name without the run options every row of a file may carry."""
    return "/".join(p for p in name.split("/") if not p.startswith("min_time:"))


def family(name):
    return clean(name).split("/")[0]


def args(name):
    return "/".join(clean(name).split("/")[1:])


def is_baseline(name):
    return "baseline" in name.lower()


def ns_per_item(b):
    ips = b.get("items_per_second")
    if ips:
        return 1e9 / ips
    # UseManualTime rows time only their timed part, reported as real_time.
    t = b["real_time"] if "manual_time" in b["name"] else b["cpu_time"]
    return t * UNIT.get(b.get("time_unit", "ns"), 1.0)


def load(path):
    with open(path) as f:
        data = json.load(f)
    return [b for b in data.get("benchmarks", []) if b.get("run_type", "iteration") == "iteration"
            and not b.get("error_occurred")]


def stem_of(path):
    return os.path.basename(path)[: -len(".json")] if path.endswith(".json") else os.path.basename(path)


def baseline_for(b, rows, stem):
    """The baseline row `b` is divided by (the rule in the module comment), or None."""
    name = clean(b["name"])
    if is_baseline(name) or "floor" in name.lower():
        return None
    by_name = {clean(r["name"]): r for r in rows}
    for pattern, repl in PAIRS.get(stem, []):
        if re.search(pattern, name):
            return by_name.get(re.sub(pattern, repl, name))
    for entry in HEADLINE.get(stem, []):
        if isinstance(entry, tuple) and name.startswith(entry[0]):
            return next((r for n, r in by_name.items() if n.startswith(entry[1])), None)
    baselines = [r for r in rows if is_baseline(r["name"])]
    named = [r for r in baselines if family(r["name"]).startswith(family(name) + "_") and args(r["name"]) == args(name)]
    if named:
        return min(named, key=lambda r: len(family(r["name"])))
    default = DEFAULT_BASELINE.get(stem)
    if default:
        fam = [r for r in baselines if family(r["name"]) == default]
        same = [r for r in fam if args(r["name"]) == args(name)]
        if same:
            return same[0]
        if len(fam) == 1:
            return fam[0]
    return None


def ratio(b, rows, stem):
    """(text, baseline name) for row b; ("", "") where no ratio is shown."""
    base = baseline_for(b, rows, stem)
    if base is None:
        return "", ""
    ns, bns = ns_per_item(b), ns_per_item(base)
    if ns <= 0 or bns <= 0:
        return "", ""
    r = bns / ns
    if not MIN_RATIO <= r <= MAX_RATIO:
        return "", f"(not comparable with {clean(base['name'])})"
    text = f"{r:.0f}x" if r >= 100 else f"{r:.1f}x" if r >= 1 else f"{r:.2f}x"
    return text, clean(base["name"])


def counters(b):
    out = []
    for k, v in b.items():
        if k in SKIP or not isinstance(v, (int, float)) or isinstance(v, bool):
            continue
        if k in PERCENT:
            out.append(f"{k}={100 * v:.3g}%")
        elif isinstance(v, float) and v != int(v):
            out.append(f"{k}={v:.4g}")
        else:
            out.append(f"{k}={int(v)}")
    return ", ".join(out)


def table(path):
    rows = load(path)
    if not rows:
        print("  (no results)")
        return
    stem = stem_of(path)
    width = min(max(max(len(clean(b["name"])) for b in rows), 20), 72)
    print(f"  {'benchmark':<{width}} {'ns/item':>10} {'Mitems/s':>9} {'ratio':>7}  {'baseline':<{width}}  counters")
    for b in rows:
        ns = ns_per_item(b)
        ips = b.get("items_per_second")
        text, base = ratio(b, rows, stem)
        name = clean(b["name"])
        name = name if len(name) <= width else name[: width - 1] + "~"
        mips = f"{ips / 1e6:.1f}" if ips else "-"
        print(f"  {name:<{width}} {ns:>10.2f} {mips:>9} {text:>7}  {base:<{width}}  {counters(b)}")


def headline(paths):
    print(f"  {'headline (scripts/bench --all for everything)':<64} {'per item':>12} {'ratio':>7}  baseline")
    for path in paths:
        rows = load(path)
        stem = stem_of(path)
        for entry in HEADLINE.get(stem, []):
            prefix = entry[0] if isinstance(entry, tuple) else entry
            b = next((r for r in rows if clean(r["name"]) == prefix), None) or \
                next((r for r in rows if clean(r["name"]).startswith(prefix)), None)
            if b is None:
                print(f"  {stem + ': ' + prefix:<64} {'(not run)':>12}")
                continue
            text, base = ratio(b, rows, stem)
            print(f"  {stem + ': ' + clean(b['name']):<64} {ns_per_item(b):>9.2f} ns {text:>7}  {base}")


if __name__ == "__main__":
    argv = sys.argv[1:]
    if argv and argv[0] == "--headline":
        headline(argv[1:])
    else:
        for p in argv:
            table(p)
