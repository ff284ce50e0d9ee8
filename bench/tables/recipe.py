#!/usr/bin/env python3
"""What each step of `ember init`'s drafted recipe buys, on the public tables of `public.py`.

For each table and split (as `bench.py` cuts them: a seeded 75/25 split, the mean over 5 splits
under 5,000 rows), `ember init` drafts a job on the training part, and `ember train` runs it
three ways, `ember predict` scoring the held-out rows (accuracy, or R² for a regression):
- "20 epochs": the recipe before early stopping and bins: 20 epochs, no early stop (`--set
  epochs=20 --set early_stopping.patience=1000 --set early_stopping.restore_best=false`), the
  binned columns as they are (`--set data.scaling."COLUMN"="standard"` for each);
- "+ early stopping": the drafted 60 epochs, stopping after 5 without a better validation loss
  and keeping the best epoch's model, the binned columns still as they are;
- "+ bins (drafted)": the drafted job unchanged, whole numbers of many values piecewise-linear.

    python3 bench/tables/recipe.py [--ember target/release/ember] [--work DIR] [--group rules]
                                   [--only NAME ...]

Needs pandas and scikit-learn (`make bench-tables` makes a Python environment with them).
Prints a Markdown table, with each way's wall time (init + train + predict).
"""

import argparse
import functools
import pathlib
import statistics
import sys
import tempfile
import time
import tomllib

import pandas as pd

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from public import TABLES, over_splits, run  # noqa: E402
from yardstick import MISSING  # noqa: E402
from sklearn.metrics import accuracy_score, r2_score  # noqa: E402

WAYS = ["20 epochs", "+ early stopping", "+ bins (drafted)"]


def overrides(way, job):
    """The `--set` arguments that make the drafted `job` train `way`."""
    binned = [c for c, s in job["data"].get("scaling", {}).items() if s == "piecewise-linear"]
    unbinned = [f'data.scaling."{c}"="standard"' for c in binned]
    if way == WAYS[0]:
        stop = ["epochs=20", "early_stopping.patience=1000", "early_stopping.restore_best=false"]
        return stop + unbinned
    return unbinned if way == WAYS[1] else []


def scores(ember, work, train, test, label):
    """Each way's score and wall time on one split."""
    train_csv, test_csv = work / "train.csv", work / "test.csv"
    train.to_csv(train_csv, index=False)
    test.drop(columns=[label]).to_csv(test_csv, index=False)
    out = []
    for way in WAYS:
        start = time.perf_counter()
        text = run([ember, "init", "--csv", train_csv, "--label", label]).stdout
        job = tomllib.loads(text)
        (work / "job.toml").write_text(text)
        sets = [a for kv in overrides(way, job) for a in ("--set", kv)]
        run_dir = work / f"run-{len(out)}"
        run([ember, "train", work / "job.toml", "--out", run_dir, "--quiet", *sets])
        predicted = pd.read_csv(
            pd.io.common.StringIO(run([ember, "predict", run_dir, "--input", test_csv]).stdout),
            keep_default_na=False,
        )
        seconds = time.perf_counter() - start
        task = job["task"]
        if task == "regression":
            score = r2_score(test[label].astype(float), predicted[label])
        else:
            column = "class" if task == "classification" else predicted.columns[1]
            score = accuracy_score(test[label].astype(str), predicted[column].astype(str))
        out.append((task, score, seconds))
    return out


def row(ember, work, table):
    rows, results = over_splits(table, work, MISSING, functools.partial(scores, ember))
    task = results[0][0][0]
    fmt = (lambda v: f"{v:.3f}") if task == "regression" else (lambda v: f"{100 * v:.1f} %")
    cells = []
    for i in range(len(WAYS)):
        score = statistics.mean(r[i][1] for r in results)
        seconds = statistics.mean(r[i][2] for r in results)
        cells.append(f"{fmt(score)} ({seconds:.1f} s)")
    split_count = f"{len(results)} splits" if len(results) > 1 else "1 split"
    return f"| {table.name} ({table.label}) | {task} | {rows:,} ({split_count}) | " + " | ".join(cells) + " |"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", default="target/release/ember")
    ap.add_argument("--work", help="where to keep the fetched tables (default: a temporary folder)")
    ap.add_argument("--group", default="rules", help='"rules", "held out" or "all"')
    ap.add_argument("--only", nargs="*", help="these tables only (by name)")
    a = ap.parse_args()
    ember = pathlib.Path(a.ember).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(a.work or tmp).resolve()
        work.mkdir(parents=True, exist_ok=True)
        print("| table (label) | task | rows | " + " | ".join(WAYS) + " |")
        print("| --- | --- | --- | " + " | ".join("---" for _ in WAYS) + " |")
        for table in TABLES:
            if (a.group != "all" and table.group != a.group) or (a.only and table.name not in a.only):
                continue
            print(row(ember, work, table), flush=True)


if __name__ == "__main__":
    main()
