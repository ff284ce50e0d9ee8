#!/usr/bin/env python3
"""No function in src/ or a workspace crate's src/ outside tests is longer than 80 lines (CI runs
this).

A function's length counts from its `fn` line to its closing brace. `#[cfg(test)]` modules are
skipped. The exceptions below are allowed, each with the reason it stays long.
"""
import pathlib
import re
import sys

LIMIT = 80
# "file::function": why it stays long.
EXCEPTIONS = {}

FN = re.compile(r"^\s*(pub(\([a-z]+\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+([A-Za-z_0-9]+)")


def functions(path):
    lines = path.read_text().splitlines()
    i, skip_depth, depth = 0, None, 0
    while i < len(lines):
        line = lines[i]
        if skip_depth is None and line.strip() == "#[cfg(test)]":
            skip_depth = depth
        m = FN.match(line)
        if m and skip_depth is None and not line.rstrip().endswith(";"):
            start, d, j, opened = i, 0, i, False
            while j < len(lines):
                code = re.sub(r'"(\\.|[^"\\])*"|//.*', "", lines[j])
                d += code.count("{") - code.count("}")
                opened = opened or "{" in code
                if opened and d <= 0:
                    break
                if not opened and code.rstrip().endswith(";"):
                    break
                j += 1
            yield m.group(6), start + 1, j - start + 1
        code = re.sub(r'"(\\.|[^"\\])*"|//.*', "", line)
        depth += code.count("{") - code.count("}")
        if skip_depth is not None and depth <= skip_depth and "}" in code:
            skip_depth = None
        i += 1


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    long = []
    sources = [root / "src", *sorted((root / "crates").glob("*/src"))]
    for path in sorted(p for src in sources for p in src.rglob("*.rs")):
        rel = path.relative_to(root).as_posix()
        for name, line, n in functions(path):
            key = f"{rel}::{name}"
            if n > LIMIT and key not in EXCEPTIONS:
                long.append(f"{rel}:{line}: fn {name} is {n} lines (limit {LIMIT})")
    for key in EXCEPTIONS:
        path, name = key.split("::")
        found = [n for f, _, n in functions(root / path) if f == name] if (root / path).exists() else []
        if not found or max(found) <= LIMIT:
            long.append(f"{key}: listed as an exception but no longer over {LIMIT} lines: remove it")
    print("\n".join(long) if long else f"every function in src/ and crates/*/src/ is at most {LIMIT} lines")
    return 1 if long else 0


if __name__ == "__main__":
    sys.exit(main())
