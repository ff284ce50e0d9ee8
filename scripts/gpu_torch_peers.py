#!/usr/bin/env python3
"""PyTorch on the GPU for ember's four jobs, as the reference ember is measured against there
(run by scripts/gpu-check.sh; the peer scripts in bench/peers are CPU-only and need their own
large environment, so this is their `torch-best` variant moved to CUDA, plus CUDA graphs).

  gpu_torch_peers.py JOB --variant best|graphs [--epochs N] [--fashion DIR] [--json FILE]

- best:   data on the GPU once, one randperm gather per epoch, batches by slicing,
          fused SGD/Adam, zero_grad(set_to_none=True), no .item() in the loop.
- graphs: the same whole step (forward, backward, optimizer step) captured once in a CUDA
          graph (torch.cuda.graphs) and replayed for every full batch; the partial last
          batch runs eagerly.

Prints one JSON record (steps/s = steps per epoch / median epoch after the first).
"""
import argparse
import gzip
import json
import math
import os
import statistics
import time

import numpy as np
import torch
from torch import nn

BATCH = {"fashion-mlp": 64, "tabular-mlp": 2048, "linear-scalar": 128, "fashion-cnn": 64}


def fashion(dirname):
    def idx(name, offset):
        path = os.path.join(dirname, name)
        with gzip.open(path, "rb") as f:
            return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)

    x = idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32) / 255.0
    y = idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64)
    xt = idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32) / 255.0
    yt = idx("t10k-labels-idx1-ubyte.gz", 8).astype(np.int64)
    return (x, y), (xt, yt)


def tabular_table():
    """The deterministic table of bench/peers/README.md ("W2": numpy's RandomState(0) rule)."""
    n, d = 200_000, 61
    rs = np.random.RandomState(0)
    u = rs.random_sample((n, d))
    w = rs.random_sample(d) * 2.0 - 1.0
    e = rs.random_sample(n)
    x = ((u * 2.0 - 1.0) * np.sqrt(3.0)).astype(np.float32)
    xf = x.astype(np.float64)
    z = np.zeros(n)
    for j in range(d):
        z = z + xf[:, j] * w[j]
    z = z + 2.0 * xf[:, 0] * xf[:, 1] + 2.0 * (xf[:, 2] * xf[:, 2] - 1.0) + 3.0 * (e - 0.5)
    return x, (z > 0).astype(np.float32).reshape(-1, 1)


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(40, 1, bias=False)
        self.p = nn.Parameter(torch.randn(1))

    def forward(self, x, f):
        return self.linear(x) + self.p * f


class FashionCnn(nn.Module):
    """configs/fashion-cnn.toml's network (docs/images.md prints it) on rows of 784 pixels,
    each training image mirrored left to right with probability 1/2, on the device."""

    def __init__(self):
        super().__init__()
        block = lambda i, o: [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o),  # noqa: E731
                              nn.ReLU(), nn.MaxPool2d(2)]
        self.net = nn.Sequential(*block(1, 32), *block(32, 64), nn.Flatten(),
                                 nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.3), nn.Linear(128, 10))

    def forward(self, x):
        x = x.view(-1, 1, 28, 28)
        if self.training:
            flip = torch.rand(x.shape[0], 1, 1, 1, device=x.device) < 0.5
            x = torch.where(flip, x.flip(3), x)
        return self.net(x)


def setup(job, fashion_dir, dev, graphs):
    """(model, loss, optimizer, training tensors on the GPU, test tensors or None)."""
    if job in ("fashion-mlp", "fashion-cnn"):
        (x, y), (xt, yt) = fashion(fashion_dir)
        if job == "fashion-cnn":
            m = FashionCnn().to(dev)
            opt = torch.optim.Adam(m.parameters(), lr=1e-3, fused=True, capturable=graphs)
        else:
            m = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                              nn.Linear(512, 10)).to(dev)
            opt = torch.optim.SGD(m.parameters(), lr=1e-3, fused=True)
        test = (torch.from_numpy(xt).to(dev), torch.from_numpy(yt).to(dev))
        return m, nn.CrossEntropyLoss(), opt, [torch.from_numpy(a).to(dev) for a in (x, y)], test
    if job == "tabular-mlp":
        x, y = tabular_table()
        m = nn.Sequential(nn.Linear(61, 20), nn.Tanh(), nn.Linear(20, 10), nn.Tanh(),
                          nn.Linear(10, 1)).to(dev)
        opt = torch.optim.Adam(m.parameters(), lr=1e-3, fused=True, capturable=graphs)
        return m, nn.BCEWithLogitsLoss(), opt, [torch.from_numpy(a).to(dev) for a in (x, y)], None
    xx = torch.arange(40 * 38400, dtype=torch.float32).view(38400, 40)
    ff = torch.arange(38400, dtype=torch.float32).view(38400, 1)
    m = Regressor().to(dev)
    opt = torch.optim.Adam(m.parameters(), lr=5e-4, fused=True, capturable=graphs)
    return m, nn.MSELoss(), opt, [a.to(dev) for a in (xx, ff, ff.clone())], None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("job", choices=list(BATCH))
    ap.add_argument("--variant", choices=["best", "graphs"], default="best")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--fashion", default="datasets/fashion-mnist")
    ap.add_argument("--json", default=None, help="append the record to this file")
    ap.add_argument("--device", default="cuda", help="cuda (the point), or cpu for a dry run")
    ap.add_argument("--max-rows", type=int, default=None, help="train on the first N rows only")
    a = ap.parse_args()

    dev = torch.device(a.device)
    if a.variant == "graphs" and dev.type != "cuda":
        ap.error("--variant graphs needs --device cuda")

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    torch.manual_seed(0)
    graphs = a.variant == "graphs"
    model, loss_fn, opt, train, test = setup(a.job, a.fashion, dev, graphs)
    if a.max_rows:
        train = [t[: a.max_rows] for t in train]
    n, b = len(train[0]), BATCH[a.job]
    full = n // b
    steps = math.ceil(n / b)

    def step(batch):
        *inputs, y = batch
        loss = loss_fn(model(*inputs), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=not graphs)  # a graph needs its .grad buffers to stay put
        return loss

    graph = None
    if graphs:
        static = [t[:b].clone() for t in train]
        # Warm up on a side stream (as torch.cuda.graphs requires), then capture one step.
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step(static)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_loss = step(static)
        # The warm-up steps trained on the first batch: start from fresh weights again.
        with torch.no_grad():
            torch.manual_seed(0)
            fresh = setup(a.job, a.fashion, dev, graphs)[0]
            for p, q in zip(model.state_dict().values(), fresh.state_dict().values()):
                p.copy_(q)  # parameters and buffers (batch norm's statistics)
        for st in opt.state.values():
            for k, v in st.items():
                if torch.is_tensor(v):
                    v.zero_()

    epoch_s = []
    for _ in range(a.epochs):
        sync()
        t0 = time.perf_counter()
        perm = torch.randperm(n, device=dev)
        data = [t[perm] for t in train]
        for i in range(steps):
            batch = [t[i * b:(i + 1) * b] for t in data]
            if graph is not None and i < full:
                for dst, src in zip(static, batch):
                    dst.copy_(src)
                graph.replay()
                loss = static_loss
            else:
                loss = step(batch)
        sync()
        epoch_s.append(time.perf_counter() - t0)
    rec = dict(job=a.job, framework="torch", variant="torch-" + a.variant, version=torch.__version__,
               device=torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu", batch=b, steps_per_epoch=steps,
               epochs=a.epochs, first_epoch_s=round(epoch_s[0], 4),
               steps_per_s=round(steps / statistics.median(epoch_s[1:] or epoch_s), 1),
               epoch_s=[round(t, 4) for t in epoch_s], final_batch_loss=float(loss.detach()))
    if test is not None:
        model.eval()  # batch norm's running statistics, no dropout
        with torch.inference_mode():
            correct = sum(int((model(test[0][i:i + 1000]).argmax(1) == test[1][i:i + 1000]).sum())
                          for i in range(0, len(test[0]), 1000))
        rec["test_accuracy"] = correct / len(test[0])
    print(json.dumps(rec), flush=True)
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
