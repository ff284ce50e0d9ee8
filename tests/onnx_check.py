"""The onnxruntime half of tests/onnx_export.rs: for each case (an exported model, the inputs a
caller passes, and `ember predict`'s answers on the same rows), check the model with
onnx.checker (full_check) and compare onnxruntime's outputs with ember's, within 1e-5 (relative
where the value is above 1). Prints the largest difference per case.

Usage: python onnx_check.py CASES.json
"""
import csv
import json
import sys

import numpy as np
import onnx
import onnxruntime as ort

TOLERANCE = 1e-5


def feed(f):
    if f["type"] == "string":
        return np.array(f["values"], dtype=object).reshape(f["shape"])
    values = [np.nan if v is None else v for v in f["values"]]
    return np.array(values, dtype=np.float32).reshape(f["shape"])


def predicted(path):
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    header, rows = rows[0], rows[1:]
    skip = 1 if header[0] == "file" else 0
    return header[skip:], [r[skip:] for r in rows]


def check(case):
    model = onnx.load(case["onnx"])
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(case["onnx"], providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    outputs = dict(zip(names, session.run(None, {f["name"]: feed(f) for f in case["feeds"]})))
    header, rows = predicted(case["predicted"])
    layout = {
        "class": [("class", 0, True), ("probabilities", 1, False)],
        "probability": [("probability", 0, False), ("label", 1, True)],
    }.get(header[0], [("values", 0, False)])
    worst = 0.0
    for name, first, text in layout:
        got = outputs[name].reshape(len(rows), -1)
        for r, row in enumerate(rows):
            for k in range(got.shape[1]):
                ours, theirs = got[r, k], row[first + k]
                if text:
                    assert str(ours) == theirs, f"{case['name']}: {name} of row {r}: {ours} vs {theirs}"
                    continue
                diff = abs(float(ours) - float(theirs)) / max(1.0, abs(float(theirs)))
                assert diff <= TOLERANCE, f"{case['name']}: {name}[{r}][{k}] = {ours}, ember {theirs}"
                worst = max(worst, diff)
    print(f"{case['name']}: onnx.checker passed; onnxruntime within {worst:.2e} of ember predict")


def main():
    with open(sys.argv[1]) as fh:
        cases = json.load(fh)
    print(f"onnx {onnx.__version__}, onnxruntime {ort.__version__}")
    for case in cases:
        check(case)


if __name__ == "__main__":
    main()
