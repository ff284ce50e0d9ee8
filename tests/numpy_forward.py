"""Forward passes of ember's exported models in plain numpy, to check `ember predict`.

    numpy_forward.py make-input JOB OUT.csv
    numpy_forward.py check JOB MODEL.safetensors CONFIG.toml INPUT.csv PREDICTED.csv

`check` reads the PyTorch-layout weights with the safetensors package, computes what the seed's
own module would output, and fails unless every value is within 1e-5 of ember's prediction.

JOB `cnn` is a convolutional network of the run's config.toml. Its file must also hold exactly
the state_dict of the `nn.Sequential` docs/images.md prints (what `load_state_dict(strict=True)`
checks: the same names, shapes and dtypes, batch norm's int64 `num_batches_tracked` included),
here spelled out from PyTorch's rules, since CI has no PyTorch.
"""
import math
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


def sequential_modules(cfg):
    """The run's nn.Sequential as (kind, spec) per module, in order: per block Conv2d (a bias
    only without batch norm), [BatchNorm2d], the activation, [MaxPool2d]; Flatten (or
    AdaptiveAvgPool2d(1) and Flatten); per hidden layer Linear, the activation, [Dropout]; the
    output Linear. A conv's and a linear's spec hold their shapes."""
    m, modules = cfg["model"], []
    channels, h, w = m["image"]
    for b in m["conv"]:
        k, out = b["kernel"], b["channels"]
        modules.append(("conv", dict(b, inputs=channels)))
        if b["batch_norm"]:
            modules.append(("norm", out))
        modules.append(("activation", None))
        if b["pool"] > 1:
            modules.append(("pool", b["pool"]))
        h = ((h + 2 * b["padding"] - k) // b["stride"] + 1) // b["pool"]
        w = ((w + 2 * b["padding"] - k) // b["stride"] + 1) // b["pool"]
        channels = out
    if m["pooling"] == "flatten":
        modules.append(("flatten", None))
        width = channels * h * w
    else:
        modules += [("average", None), ("flatten", None)]
        width = channels
    for out in m["hidden"]:
        modules += [("linear", (width, out)), ("activation", None)]
        if m["dropout"] > 0:
            modules.append(("dropout", None))
        width = out
    return modules + [("linear", (width, m["outputs"]))]


def sequential_state(cfg):
    """{name: (shape, dtype)} of the state_dict of the run's nn.Sequential."""
    state = {}
    for i, (kind, spec) in enumerate(sequential_modules(cfg)):
        if kind == "conv":
            k = spec["kernel"]
            state[f"net.{i}.weight"] = ((spec["channels"], spec["inputs"], k, k), "float32")
            if not spec["batch_norm"]:
                state[f"net.{i}.bias"] = ((spec["channels"],), "float32")
        elif kind == "norm":
            for name in ("weight", "bias", "running_mean", "running_var"):
                state[f"net.{i}.{name}"] = ((spec,), "float32")
            state[f"net.{i}.num_batches_tracked"] = ((), "int64")
        elif kind == "linear":
            state[f"net.{i}.weight"] = ((spec[1], spec[0]), "float32")
            state[f"net.{i}.bias"] = ((spec[1],), "float32")
    return state


def activate(x, name):
    if name == "relu":
        return np.maximum(x, 0)
    if name == "tanh":
        return np.tanh(x)
    if name == "sigmoid":
        return 1 / (1 + np.exp(-x))
    if name == "gelu":  # the exact, erf form
        return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    return x


def conv2d(x, weight, bias, stride, padding):
    """PyTorch's Conv2d on [n, c, h, w] maps, as one product over im2col patches."""
    n, c, h, w = x.shape
    out, _, k, _ = weight.shape
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh, ow = (h + 2 * padding - k) // stride + 1, (w + 2 * padding - k) // stride + 1
    patches = np.empty((n, c, k, k, oh, ow))
    for i in range(k):
        for j in range(k):
            patches[:, :, i, j] = x[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
    y = np.einsum("ockl,nckluv->nouv", weight, patches)
    return y if bias is None else y + bias[None, :, None, None]


def max_pool(x, p):
    n, c, h, w = x.shape
    h, w = h // p, w // p
    return x[:, :, :h * p, :w * p].reshape(n, c, h, p, w, p).max(axis=(3, 5))


def cnn_forward(w, cfg, x):
    """The logits of the run's nn.Sequential in eval mode, from PyTorch-layout weights `w`."""
    m = cfg["model"]
    c, h, wd = m["image"]
    if cfg["data"]["input_scale"] == "unit":
        x = x / 255.0
    x = x.reshape(len(x), h, wd, c).transpose(0, 3, 1, 2)
    for i, (kind, spec) in enumerate(sequential_modules(cfg)):
        g = lambda name: w.get(f"net.{i}.{name}")  # noqa: E731
        if kind == "conv":
            x = conv2d(x, g("weight"), g("bias"), spec["stride"], spec["padding"])
        elif kind == "norm":
            mean, var = (g(n)[None, :, None, None] for n in ("running_mean", "running_var"))
            scale, shift = (g(n)[None, :, None, None] for n in ("weight", "bias"))
            x = (x - mean) / np.sqrt(var + 1e-5) * scale + shift
        elif kind == "activation":
            x = activate(x, m["activation"])
        elif kind == "pool":
            x = max_pool(x, spec)
        elif kind == "average":
            x = x.mean(axis=(2, 3), keepdims=True)
        elif kind == "flatten":
            x = x.reshape(len(x), -1)
        elif kind == "linear":
            x = linear(g("weight"), g("bias"), x)
    return x


def check_strict_state(w, cfg):
    """What load_state_dict(strict=True) checks: no key missing or unexpected, shapes equal
    (and here the dtypes too)."""
    want = sequential_state(cfg)
    missing, unexpected = sorted(set(want) - set(w)), sorted(set(w) - set(want))
    assert not missing and not unexpected, f"missing {missing}, unexpected {unexpected}"
    for name, (shape, dtype) in want.items():
        got = (tuple(w[name].shape), str(w[name].dtype))
        assert got == (shape, dtype), f"{name}: {got}, PyTorch's is {(shape, dtype)}"


def softmax(z):
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def check(job, model, config, inputs, predicted):
    w = load_file(model)
    cfg = tomllib.load(open(config, "rb"))
    data = np.genfromtxt(inputs, delimiter=",", names=True)
    x = np.array(data.tolist(), dtype=np.float64).reshape(len(data), -1)
    got = np.genfromtxt(predicted, delimiter=",", names=True)
    got = np.array(got.tolist(), dtype=np.float64).reshape(len(got), -1)
    if job == "cnn":
        check_strict_state(w, cfg)
        p = softmax(cnn_forward({k: v.astype(np.float64) for k, v in w.items()}, cfg, x))
        expected, ours = p, got[:, 1:]
        assert (got[:, 0] == p.argmax(axis=1)).all(), "predicted classes differ"
    elif job == "fashion-mlp":
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
