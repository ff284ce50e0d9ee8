#!/usr/bin/env python3
"""ember's CSV reader against pandas.read_csv on one generated table, side by side in one run.

The table: ROWS rows (2,000,000 by default) of 20 columns: 14 numbers with 2 % empty cells, a
city (8 levels), a yes/no column, a grade with "NA" cells, an ISO date, an amount with "NA"
cells, and a binary label (about 300 MB). Seeded, so every run reads the same file.

For each of REPEATS rounds, in turn:
- pandas: `pandas.read_csv(FILE)` (C engine, its own type inference), in a fresh process;
- ember init: read the file and infer every column's type (`ember init --csv FILE --label label`);
- ember read: the data phase of `ember train` on init's job file: read, fit the encodings
  (medians, levels), encode every row into the f32 input matrix, split and standardise. Its
  time is the "read in" figure `ember train` prints; the training itself (one epoch on 64 rows)
  is not counted.

Each figure is the median over the rounds; peak memory is each process's maximum resident set
(pandas' includes the Python interpreter and the library, about 60 MB). The encoded matrix's
size is rows x inputs x 4 bytes.

    python3 bench/tables/read_bench.py [--ember target/release/ember] [--rows N] [--repeats 3]

Needs pandas (and numpy). Prints a Markdown table.
"""

import argparse
import datetime
import pathlib
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time

CITIES = ["Oslo", "Lima", "Pune", "Kobe", "Rome", "Cairo", "Quito", "Accra"]


def generate(path, rows):
    rng = random.Random(1)
    base = datetime.date(2015, 1, 1)
    with open(path, "w") as f:
        names = [f"x{i}" for i in range(14)] + ["city", "kind", "grade", "day", "amount", "label"]
        f.write(",".join(names) + "\n")
        for _ in range(rows):
            xs = [f"{rng.gauss(0, 1):.5f}" if rng.random() > 0.02 else "" for _ in range(14)]
            city = rng.choice(CITIES)
            kind = rng.choice(["yes", "no"])
            grade = rng.choice(["A", "B", "C", "D", "NA"])
            day = (base + datetime.timedelta(days=rng.randrange(3000))).isoformat()
            amount = f"{rng.expovariate(0.01):.2f}" if rng.random() > 0.05 else "NA"
            signal = float(xs[0] or 0) + (city in ("Oslo", "Rome"))
            label = "pos" if signal > 0.5 else "neg"
            f.write(",".join(xs + [city, kind, grade, day, amount, label]) + "\n")


def measured(cmd):
    """Runs `cmd` under GNU time: its wall seconds, its own peak RSS (MiB) and its stdout."""
    t = time.perf_counter()
    out = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if out.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed:\n{out.stderr}")
    return seconds, int(out.stderr.strip().splitlines()[-1]) / 1024, out.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", default="target/release/ember")
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    ember = str(pathlib.Path(args.ember).resolve())
    work = pathlib.Path(tempfile.mkdtemp(prefix="ember-read-"))
    data = work / "mixed.csv"
    generate(data, args.rows)
    size_mb = data.stat().st_size / 1e6
    job = work / "job.toml"
    pandas = [sys.executable, "-c", f"import pandas; pandas.read_csv({str(data)!r})"]
    init = [ember, "init", "--csv", str(data), "--label", "label"]
    train = [ember, "train", str(job), "--epochs", "1", "--max-train-rows", "64",
             "--device", "cpu", "--out", str(work / "run")]
    runs = {"pandas": [], "init": [], "read": []}
    peaks = {"pandas": [], "init": [], "read": []}
    inputs = None
    for _ in range(args.repeats):
        seconds, mb, _ = measured(pandas)
        runs["pandas"].append(seconds)
        peaks["pandas"].append(mb)
        seconds, mb, text = measured(init)
        runs["init"].append(seconds)
        peaks["init"].append(mb)
        job.write_text(text)
        subprocess.run(["rm", "-rf", str(work / "run")], check=True)
        _, mb, out = measured(train)
        runs["read"].append(float(re.search(r"read in ([0-9.]+) s", out).group(1)))
        inputs = int(re.search(r"= (\d+) inputs", out).group(1))
        peaks["read"].append(mb)
    matrix_mb = args.rows * inputs * 4 / 2**20
    print(f"{args.rows:,} rows, 20 columns, {size_mb:.0f} MB; ember's encoded matrix: "
          f"{inputs} inputs, {matrix_mb:.0f} MiB; medians of {args.repeats} rounds\n")
    print("| reader | seconds | peak memory (MiB) | peak / encoded matrix |")
    print("| --- | --- | --- | --- |")
    label = {
        "pandas": "`pandas.read_csv` (C engine)",
        "init": "`ember init` (read, infer types)",
        "read": "`ember train`'s data phase (read, fit, encode)",
    }
    for k in ["pandas", "init", "read"]:
        s, m = statistics.median(runs[k]), statistics.median(peaks[k])
        print(f"| {label[k]} | {s:.2f} | {m:.0f} | {m / matrix_mb:.2f} |")
    subprocess.run(["rm", "-rf", str(work)], check=True)


if __name__ == "__main__":
    main()
