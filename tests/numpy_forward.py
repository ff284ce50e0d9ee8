"""Forward passes of ember's exported models in plain numpy, to check `ember predict`.

    numpy_forward.py make-input JOB OUT.csv
    numpy_forward.py check JOB MODEL.safetensors CONFIG.toml INPUT.csv PREDICTED.csv

`check` reads the PyTorch-layout weights with the safetensors package, computes what the seed's
own module would output, and fails unless every value is within 1e-5 of ember's prediction.
"""
import sys
import tomllib

import numpy as np
from safetensors.numpy import load_file


def make_input(job, out):
    rng = np.random.default_rng(0)
    if job == "fashion-mlp":
        x = rng.integers(0, 256, size=(40, 784))
        header = [f"px{i}" for i in range(784)]
    elif job == "tabular-mlp":
        x = rng.normal(size=(40, 61)).round(4)
        header = [f"x{i}" for i in range(61)]
    else:
        x = np.concatenate([rng.normal(size=(40, 40)) * 100, rng.normal(size=(40, 1)) * 100], axis=1).round(3)
        header = [f"x{i}" for i in range(40)] + ["f"]
    np.savetxt(out, x, delimiter=",", header=",".join(header), comments="", fmt="%.6g")


def linear(w, b, x):
    y = x @ w.T
    return y + b if b is not None else y


def check(job, model, config, inputs, predicted):
    w = load_file(model)
    cfg = tomllib.load(open(config, "rb"))
    data = np.genfromtxt(inputs, delimiter=",", names=True)
    x = np.array(data.tolist(), dtype=np.float64).reshape(len(data), -1)
    got = np.genfromtxt(predicted, delimiter=",", names=True)
    got = np.array(got.tolist(), dtype=np.float64).reshape(len(got), -1)
    if job == "fashion-mlp":
        if cfg["data"]["input_scale"] == "unit":
            x = x / 255.0
        h = np.maximum(linear(w["linear_relu_stack.0.weight"], w["linear_relu_stack.0.bias"], x), 0)
        h = np.maximum(linear(w["linear_relu_stack.2.weight"], w["linear_relu_stack.2.bias"], h), 0)
        z = linear(w["linear_relu_stack.4.weight"], w["linear_relu_stack.4.bias"], h)
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        expected, ours = p, got[:, 1:]
        assert (got[:, 0] == p.argmax(axis=1)).all(), "predicted classes differ"
    elif job == "tabular-mlp":
        h = np.tanh(linear(w["fc.0.weight"], w["fc.0.bias"], x))
        h = np.tanh(linear(w["fc.2.weight"], w["fc.2.bias"], h))
        z = linear(w["fc.4.weight"], w["fc.4.bias"], h)
        expected, ours = 1 / (1 + np.exp(-z)), got[:, :1]
    else:
        xs, f = x[:, :40], x[:, 40:41]
        expected, ours = linear(w["lin.weight"], None, xs) + w["par"] * f, got[:, :1]
    diff = np.abs(expected - ours).max()
    # Absolute 1e-5, or relative for values far from 1 (linear-scalar's outputs are large).
    scale = max(1.0, float(np.abs(expected).max()))
    print(f"{job}: {len(x)} rows, max abs diff {diff:.3g} (scale {scale:.3g})")
    assert diff <= 1e-5 * scale, f"{job}: numpy and ember differ by {diff}"


if __name__ == "__main__":
    if sys.argv[1] == "make-input":
        make_input(sys.argv[2], sys.argv[3])
    else:
        check(*sys.argv[2:7])
