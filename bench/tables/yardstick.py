#!/usr/bin/env python3
"""ember's drafted defaults on real tables against scikit-learn, on the same held-out quarter.

For each table: a seeded 75/25 split of the rows; `ember init` on the training part and
`ember train` of the job it drafts, unchanged; `ember predict` on the held-out rows. The
yardstick is scikit-learn's one-hot + median-impute + logistic regression (ridge for a
regression) on the columns ember's job file keeps, dates as the same parts; beside it,
HistGradientBoosting on the same inputs. Rows without a label are left out of the scoring.

    python3 bench/tables/yardstick.py [--ember target/release/ember] [--set KEY=VALUE ...] TABLE.csv:LABEL ...

`--set` passes overrides to `ember train` (the drafted job otherwise), to try other defaults.

Needs pandas and scikit-learn. Prints a Markdown table.
"""

import argparse
import pathlib
import subprocess
import sys
import tempfile
import tomllib

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import accuracy_score, r2_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

MISSING = ["", "NA", "NaN", "null", "?", "na", "nan", "NULL", "Null", "N/A"]


def run(cmd, **kw):
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if out.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed:\n{out.stderr}")
    return out.stdout


def date_parts(frame, columns):
    parts = {}
    for c in columns:
        d = pd.to_datetime(frame[c].str.slice(0, 10).str.replace("/", "-"), errors="coerce")
        for name, v in [
            ("year", d.dt.year),
            ("month", d.dt.month),
            ("day", d.dt.day),
            ("weekday", d.dt.day_of_week),
            ("yearday", d.dt.day_of_year),
        ]:
            parts[f"{c}.{name}"] = v.astype(float)
    return pd.DataFrame(parts, index=frame.index)


def features(frame, types):
    numeric = [c for c, t in types.items() if t == "numeric"]
    category = [c for c, t in types.items() if t == "category"]
    dates = [c for c, t in types.items() if t == "date"]
    x = pd.concat(
        [
            frame[numeric].apply(pd.to_numeric, errors="coerce"),
            frame[category].fillna("(missing)").astype(str),
            date_parts(frame, dates),
        ],
        axis=1,
    )
    return x, numeric + list(date_parts(frame.head(0), dates).columns), category


def linear_prep(numeric, category):
    """The linear pipeline's inputs: numbers imputed with the median and standardised,
    categories one-hot (levels unseen in training: all zeros)."""
    return ColumnTransformer(
        [
            ("num", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), numeric),
            ("cat", OneHotEncoder(handle_unknown="ignore"), category),
        ]
    )


def sklearn_scores(train, test, label, types, task):
    xtr, numeric, category = features(train, types)
    xte, _, _ = features(test, types)
    prep = linear_prep(numeric, category)
    if task == "regression":
        ytr, yte = train[label].astype(float), test[label].astype(float)
        models = [Ridge(), HistGradientBoostingRegressor(random_state=0)]
        score = r2_score
    else:
        ytr, yte = train[label].astype(str), test[label].astype(str)
        models = [LogisticRegression(max_iter=5000), HistGradientBoostingClassifier(random_state=0)]
        score = accuracy_score
    out = []
    for m in models:
        dense = m.__class__.__name__.startswith("Hist")
        prep_m = ColumnTransformer(prep.transformers, sparse_threshold=0 if dense else 0.3)
        pipe = make_pipeline(prep_m, m).fit(xtr, ytr)
        out.append(score(yte, pipe.predict(xte)))
    return out


def ember_score(ember, work, train, test, label, overrides):
    train_csv, test_csv = work / "train.csv", work / "test.csv"
    train.to_csv(train_csv, index=False)
    test.drop(columns=[label]).to_csv(test_csv, index=False)
    job = run([ember, "init", "--csv", train_csv, "--label", label])
    (work / "job.toml").write_text(job)
    spec = tomllib.loads(job)
    sets = [a for kv in overrides for a in ("--set", kv)]
    run([ember, "train", work / "job.toml", "--out", work / "run", "--quiet", *sets])
    pred = pd.read_csv(
        pd.io.common.StringIO(run([ember, "predict", work / "run", "--input", test_csv])),
        keep_default_na=False,
    )
    task = spec["task"]
    if task == "regression":
        return task, spec["data"]["columns"], r2_score(test[label].astype(float), pred[label])
    column = "class" if task == "classification" else pred.columns[1]
    return task, spec["data"]["columns"], accuracy_score(test[label].astype(str), pred[column].astype(str))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", default="target/release/ember")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE for ember train")
    ap.add_argument("tables", nargs="+", help="FILE.csv:LABEL")
    a = ap.parse_args()
    ember = pathlib.Path(a.ember).resolve()
    print("| table | label | task | rows | ember | linear yardstick | HistGradientBoosting |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for spec in a.tables:
        path, label = spec.rsplit(":", 1)
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        rng = np.random.default_rng(a.seed)
        order = rng.permutation(len(frame))
        cut = len(frame) * 3 // 4
        train, test = frame.iloc[order[:cut]], frame.iloc[order[cut:]]
        with tempfile.TemporaryDirectory() as tmp:
            task, types, ours = ember_score(ember, pathlib.Path(tmp), train, test[~test[label].isin(MISSING)], label, a.set)
        known = lambda f: f[~f[label].isin(MISSING)].replace(MISSING, np.nan)
        linear, hgb = sklearn_scores(known(train), known(test), label, types, task)
        fmt = (lambda v: f"R² {v:.3f}") if task == "regression" else (lambda v: f"{100 * v:.1f} %")
        name = pathlib.Path(path).name
        print(f"| {name} | {label} | {task} | {len(frame)} | {fmt(ours)} | {fmt(linear)} | {fmt(hgb)} |")


if __name__ == "__main__":
    main()
