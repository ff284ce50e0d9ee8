#!/usr/bin/env python3
"""`make bench-tables`: ember's drafted defaults against LightGBM's defaults, scikit-learn's
HistGradientBoosting and a linear pipeline, on the public tables of `public.py`.

For each table and split (a seeded 75/25 split of the rows; tables under 5,000 rows are scored
as the mean over 5 splits, larger ones on one): ember is `ember init` on the training part,
`ember train` of the job it drafts, unchanged, and `ember predict` on the held-out rows (the
yardstick's `ember_score`); its wall time is those three commands'. LightGBM gets the raw
columns (text as pandas categories, its own handling of missing cells) with its default
parameters and as many threads as ember uses; its wall time is reading the training file,
fitting and predicting; HistGradientBoosting the same columns (text of more than 255 levels as
its levels' codes). The linear pipeline takes the columns ember's job keeps (`yardstick.py`).
Every score is on the same held-out rows: accuracy, or R² for a regression. The tables are
reported in their two groups: the drafting rules were chosen on the first, the second is kept
apart to test them.

    python3 bench/tables/bench.py [--ember target/release/ember] [--work DIR] [--only NAME ...]

Needs pandas, scikit-learn and lightgbm (`make bench-tables` makes a Python environment with
them). Prints a Markdown table.
"""

import argparse
import functools
import os
import pathlib
import statistics
import sys
import tempfile
import time

import lightgbm
import numpy as np
import pandas as pd

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from public import TABLES, over_splits  # noqa: E402
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor  # noqa: E402
from sklearn.linear_model import LogisticRegression, Ridge  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from yardstick import MISSING, ember_score, features, linear_prep  # noqa: E402

def raw_columns(train_csv, test, label):
    """The training file's rows with a label and the held-out rows, each column typed as
    `typed` says (read as text, both alike)."""
    train = pd.read_csv(train_csv, dtype=str, keep_default_na=False)
    train = train[~train[label].isin(MISSING)].replace(MISSING, np.nan)
    x = typed(train.drop(columns=[label]))
    xt = typed(test.drop(columns=[label]).replace(MISSING, np.nan), like=x)
    return x, train[label], xt


def lightgbm_predictions(train_csv, test, label, task):
    """LightGBM's defaults on the raw columns (text as categories), and its wall time: reading
    the training file, fitting, predicting."""
    start = time.perf_counter()
    x, y, xt = raw_columns(train_csv, test, label)
    threads = os.cpu_count()
    if task == "regression":
        model = lightgbm.LGBMRegressor(n_jobs=threads, verbose=-1).fit(x, y.astype(float))
    else:
        model = lightgbm.LGBMClassifier(n_jobs=threads, verbose=-1).fit(x, y.astype(str))
    predicted = model.predict(xt)
    return predicted, time.perf_counter() - start


def hgb_predictions(train_csv, test, label, task):
    """HistGradientBoosting's defaults on the raw columns: text as its own categories where it
    has at most 255 levels (its limit), else as the levels' codes."""
    x, y, xt = raw_columns(train_csv, test, label)
    wide = [c for c in x.columns if isinstance(x[c].dtype, pd.CategoricalDtype) and len(x[c].cat.categories) > 255]
    for frame in (x, xt):
        for c in wide:
            frame[c] = frame[c].cat.codes.replace(-1, np.nan).astype(float)
    kind = HistGradientBoostingRegressor if task == "regression" else HistGradientBoostingClassifier
    model = kind(categorical_features="from_dtype", random_state=0)
    model.fit(x, y.astype(float) if task == "regression" else y.astype(str))
    return model.predict(xt)


def linear_score(train, test, label, types, task):
    """The yardstick's linear pipeline: one-hot (sparse) + median imputation + logistic
    regression, or ridge for a regression, on the columns ember's job keeps."""
    xtr, numeric, category = features(train, types)
    xte, _, _ = features(test, types)
    prep = linear_prep(numeric, category)
    if task == "regression":
        model = make_pipeline(prep, Ridge()).fit(xtr, train[label].astype(float))
    else:
        model = make_pipeline(prep, LogisticRegression(max_iter=5000)).fit(xtr, train[label].astype(str))
    return score_of(task, test[label], model.predict(xte))


def typed(frame, like=None):
    """Numbers as numbers, any other column as a pandas category (`like`'s levels, for the
    held-out rows)."""
    out = {}
    for c in frame.columns:
        numbers = pd.to_numeric(frame[c], errors="coerce")
        is_number = like is not None and pd.api.types.is_numeric_dtype(like[c])
        if is_number or (like is None and numbers.notna().sum() == frame[c].notna().sum()):
            out[c] = numbers
        else:
            # Plain objects with NaN for a missing cell: scikit-learn's encoders refuse
            # pandas' NA.
            text = frame[c].astype(object).where(frame[c].notna(), np.nan)
            if like is None:
                out[c] = pd.Categorical(text)
            else:
                # A level the training rows never had is missing to the model, as LightGBM
                # would treat an unseen category.
                levels = like[c].cat.categories
                out[c] = pd.Categorical(text.where(text.isin(levels)), categories=levels)
    return pd.DataFrame(out, index=frame.index)


def score_of(task, truth, predicted):
    from sklearn.metrics import accuracy_score, r2_score

    if task == "regression":
        return r2_score(truth.astype(float), np.asarray(predicted, dtype=float))
    return accuracy_score(truth.astype(str), pd.Series(predicted).astype(str))


def one_split(ember, work, train, test, label):
    """ember's, LightGBM's, the linear pipeline's and HistGradientBoosting's scores on one
    split, and ember's and LightGBM's wall times."""
    start = time.perf_counter()
    task, types, ours = ember_score(ember, work, train, test, label, [])
    ember_seconds = time.perf_counter() - start
    predicted, lgbm_seconds = lightgbm_predictions(work / "train.csv", test, label, task)
    lgbm = score_of(task, test[label], predicted)
    hgb = score_of(task, test[label], hgb_predictions(work / "train.csv", test, label, task))
    known = lambda f: f[~f[label].isin(MISSING)].replace(MISSING, np.nan)  # noqa: E731
    linear = linear_score(known(train), known(test), label, types, task)
    return task, [ours, lgbm, linear, hgb], [ember_seconds, lgbm_seconds]


def row(ember, work, table):
    rows, results = over_splits(table, work, MISSING, functools.partial(one_split, ember))
    task = results[0][0]
    scores = [statistics.mean(r[1][i] for r in results) for i in range(4)]
    seconds = [statistics.mean(r[2][i] for r in results) for i in range(2)]
    fmt = (lambda v: f"{v:.3f}") if task == "regression" else (lambda v: f"{100 * v:.1f} %")
    split_count = f"{len(results)} splits" if len(results) > 1 else "1 split"
    return (
        f"| {table.name} ({table.label}) | {task} | {rows:,} ({split_count}) | {table.traits} | "
        + " | ".join(fmt(s) for s in scores)
        + f" | {seconds[0]:.1f} s | {seconds[1]:.1f} s |"
    ), task, scores


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", default="target/release/ember")
    ap.add_argument("--work", help="where to keep the fetched tables (default: a temporary folder)")
    ap.add_argument("--only", nargs="*", help="these tables only (by name)")
    a = ap.parse_args()
    ember = pathlib.Path(a.ember).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(a.work or tmp).resolve()
        work.mkdir(parents=True, exist_ok=True)
        for group in ["rules", "held out"]:
            tables = [t for t in TABLES if t.group == group and (not a.only or t.name in a.only)]
            if not tables:
                continue
            print(f"\n**{group}**\n")
            print("| table (label) | task | rows | traits | ember | LightGBM | linear | HistGradientBoosting | ember's time | LightGBM's time |")
            print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
            gaps = {"classification": [], "regression": []}
            for table in tables:
                line, task, scores = row(ember, work, table)
                print(line, flush=True)
                kind = "regression" if task == "regression" else "classification"
                gaps[kind].append(scores[0] - scores[1])
            for kind, diffs in gaps.items():
                if diffs:
                    unit = 100 if kind == "classification" else 1
                    print(f"\nember - LightGBM, mean over the {kind} tables: {unit * statistics.mean(diffs):+.3f}"
                          + (" points" if unit == 100 else " R²"))


if __name__ == "__main__":
    main()
