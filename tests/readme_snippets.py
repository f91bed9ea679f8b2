#!/usr/bin/env python3
"""Builds every ```cpp snippet of README.md as written inside a main().

    tests/readme_snippets.py [--cxx COMPILER] [--readme README.md] [FLAG...]

Each snippet's #include lines go first; every other line goes, unchanged,
into `int main() { ... }`. The snippet is compiled (C++20, -Wall -Wextra
-Wpedantic -Werror plus any FLAG given) against include/. Unused variables
are allowed: a snippet shows a result without printing it. Exits non-zero
and prints the snippet, its line in README.md and the compiler's message
when one does not build; exits non-zero too when README.md has no snippet.
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def snippets(text):
    """(first line number, lines) of every ```cpp block."""
    out, lines, start = [], None, 0
    for n, line in enumerate(text.splitlines(), 1):
        if lines is None and re.match(r"^```cpp\s*$", line):
            lines, start = [], n + 1
        elif lines is not None and line.startswith("```"):
            out.append((start, lines))
            lines = None
        elif lines is not None:
            lines.append(line)
    return out


def program(lines):
    head = [l for l in lines if l.lstrip().startswith("#include")]
    body = [l for l in lines if not l.lstrip().startswith("#include")]
    return "\n".join(head) + "\n\nint main() {\n" + "\n".join("    " + l if l else l for l in body) + "\n}\n"


def main(argv):
    cxx = os.environ.get("CXX", "c++")
    readme = os.path.join(ROOT, "README.md")
    flags = []
    i = 0
    while i < len(argv):
        if argv[i] == "--cxx":
            cxx, i = argv[i + 1], i + 2
        elif argv[i] == "--readme":
            readme, i = argv[i + 1], i + 2
        else:
            flags.append(argv[i])
            i += 1
    with open(readme) as f:
        found = snippets(f.read())
    if not found:
        print(f"readme_snippets: no ```cpp snippet in {readme}")
        return 1
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for k, (line, lines) in enumerate(found, 1):
            src = os.path.join(tmp, f"snippet{k}.cpp")
            with open(src, "w") as f:
                f.write(program(lines))
            cmd = [cxx, "-std=c++20", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-Wno-unused-variable",
                   "-Wno-unused-but-set-variable", "-I", os.path.join(ROOT, "include"), *flags,
                   "-c", src, "-o", os.path.join(tmp, f"snippet{k}.o")]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                failed += 1
                print(f"README.md:{line}: snippet {k} does not build as written inside main():")
                print(program(lines))
                print(r.stderr[-4000:])
            else:
                print(f"README.md:{line}: snippet {k} builds")
    print(f"readme_snippets: {len(found) - failed} of {len(found)} snippets build")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
