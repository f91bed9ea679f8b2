#!/usr/bin/env python3
"""The agreement checks fail on a changed number (CTest bench_report_detects_change).

On a temporary copy of README.md, docs/ and the two scripts: `scripts/bench-report
--check` passes on the copy as committed, then fails (naming the file and region)
after one published number in README.md is changed, after one benchmark time
in docs/results/bench.json is changed without regenerating, and after a generated
region (markers and all) is replaced by hand-written text; `scripts/plots --check`
fails after one point of docs/results/accuracy.json is changed.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def copy_tree(dst):
    shutil.copy(os.path.join(ROOT, "README.md"), dst)
    shutil.copytree(os.path.join(ROOT, "docs"), os.path.join(dst, "docs"))
    os.makedirs(os.path.join(dst, "scripts"))
    for s in ("bench-report", "plots"):
        shutil.copy(os.path.join(ROOT, "scripts", s), os.path.join(dst, "scripts", s))


def run(dst, script, *args):
    p = subprocess.run([sys.executable, os.path.join(dst, "scripts", script), *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        copy_tree(tmp)
        rc, out = run(tmp, "bench-report", "--check")
        if rc != 0:
            print(out)
            print("FAIL: the unchanged copy does not pass bench-report --check")
            return 1

        # 1. A published number changed by hand in README.md.
        readme = os.path.join(tmp, "README.md")
        with open(readme, encoding="utf-8") as f:
            text = f.read()
        m = re.search(r"(<!-- bench-report:readme-ns:[\w-]+ -->)(\d+(?:\.\d+)?)", text)
        assert m, "no readme-ns region with a number"
        changed = text[:m.start(2)] + str(float(m.group(2)) + 1.0) + text[m.end(2):]
        with open(readme, "w", encoding="utf-8") as f:
            f.write(changed)
        rc, out = run(tmp, "bench-report", "--check")
        if rc == 0 or "README.md" not in out:
            failures.append("a changed README number passed bench-report --check:\n" + out)
        with open(readme, "w", encoding="utf-8") as f:
            f.write(text)

        # 2. The results file changed without regenerating the tables.
        path = os.path.join(tmp, "docs", "results", "bench.json")
        with open(path) as f:
            committed = f.read()
        doc = json.loads(committed)
        b = doc["benchmarks"]["sliding_counter"]["benchmarks"]
        row = next(r for r in b if r["name"].startswith("BM_allow<u32,total,pow2>/61"))
        for k in ("items_per_second",):
            if k in row:
                row[k] *= 0.5
        row["cpu_time"] *= 2
        row["real_time"] *= 2
        with open(path, "w") as f:
            json.dump(doc, f)
        rc, out = run(tmp, "bench-report", "--check")
        if rc == 0:
            failures.append("a changed results file passed bench-report --check:\n" + out)
        with open(path, "w") as f:
            f.write(committed)

        # 3. A generated region deleted, markers and all, and replaced by hand-written numbers.
        for rel, name in (("docs/tdigest.md", "speed:tdigest"), ("README.md", "readme-ns:limiters")):
            path = os.path.join(tmp, *rel.split("/"))
            with open(path, encoding="utf-8") as f:
                text = f.read()
            stripped, n = re.subn(r"<!-- bench-report:%s -->.*?<!-- /bench-report:%s -->" % (name, name),
                                  "1.23 ns (measured by hand)", text, flags=re.S)
            assert n == 1, f"no region {name} in {rel}"
            with open(path, "w", encoding="utf-8") as f:
                f.write(stripped)
            rc, out = run(tmp, "bench-report", "--check")
            if rc == 0 or name not in out:
                failures.append(f"{rel} without its region {name} passed bench-report --check:\n" + out)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)

        # 4. The data behind a picture changed without redrawing it.
        path = os.path.join(tmp, "docs", "results", "accuracy.json")
        with open(path) as f:
            acc = json.load(f)
        acc["limiters"]["series"][0]["admitted"][-1] += 1
        with open(path, "w") as f:
            json.dump(acc, f)
        rc, out = run(tmp, "plots", "--check")
        if rc != 1 or "limiters.svg" not in out:
            failures.append(f"changed picture data passed (or broke) scripts/plots --check (rc {rc}):\n" + out)
    for f in failures:
        print("FAIL: " + f)
    if not failures:
        print("ok: a changed README number, a changed results file, a region replaced by hand text and changed "
              "picture data each fail the checks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
