#!/usr/bin/env python3
"""Loads a fashion-mlp run's model.safetensors into the seed question's own PyTorch class, with
load_state_dict(strict=True), and measures its accuracy on the 10k FashionMNIST test images the
way the seed's test_loop does (torchvision's FashionMNIST + ToTensor, batches of 64).

  python scripts/pytorch_load_check.py RUN_DIR [--seed-file F] [--root DIR]

Needs torch, torchvision and safetensors (../shared/peers/requirements.txt has the first two).
--root is torchvision's data root holding FashionMNIST/raw/ with the four un-gzipped IDX files
(../shared/peers/common.py make-data lays out /tmp/peers-data that way); it is filled from
/usr/share/datasets/fashion-mnist when missing.
"""
import argparse
import gzip
import json
import os
import re
import shutil

import torch
from safetensors.torch import load_file
from torch import nn  # noqa: F401  (the seed's class refers to nn)
from torch.utils.data import DataLoader
from torchvision import datasets
from torchvision.transforms import ToTensor

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = os.path.join(HERE, "..", "..", "shared", "seeds", "000_e3a9d15622adc089.txt")


def seed_class(path):
    """The seed's `class NeuralNetwork` source, taken from the question's text as posted."""
    text = open(path).read()
    m = re.search(r"^class NeuralNetwork\(nn\.Module\):\n(?:(?:    .*)?\n)+", text, re.M)
    if not m:
        raise SystemExit(f"{path}: no `class NeuralNetwork` found")
    scope = {"nn": nn}
    exec(m.group(0), scope)
    return scope["NeuralNetwork"]


def torchvision_root(root):
    raw = os.path.join(root, "FashionMNIST", "raw")
    os.makedirs(raw, exist_ok=True)
    src = "/usr/share/datasets/fashion-mnist"
    for name in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
                 "train-images-idx3-ubyte", "train-labels-idx1-ubyte"):
        dst = os.path.join(raw, name)
        if not os.path.exists(dst):
            with gzip.open(os.path.join(src, name + ".gz"), "rb") as f, open(dst + ".tmp", "wb") as g:
                shutil.copyfileobj(f, g)
            os.replace(dst + ".tmp", dst)
    return root


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--seed-file", default=SEED)
    ap.add_argument("--root", default="/tmp/peers-data")
    a = ap.parse_args()

    model = seed_class(a.seed_file)()
    state = load_file(os.path.join(a.run_dir, "model.safetensors"))
    result = model.load_state_dict(state, strict=True)
    print(f"load_state_dict(strict=True): {result}")

    test_data = datasets.FashionMNIST(root=torchvision_root(a.root), train=False, download=False,
                                      transform=ToTensor())
    loader = DataLoader(test_data, batch_size=64)
    loss_fn = nn.CrossEntropyLoss()
    model.eval()
    size, batches, loss, correct = len(loader.dataset), len(loader), 0.0, 0
    with torch.no_grad():  # the seed's test_loop
        for X, y in loader:
            pred = model(X)
            loss += loss_fn(pred, y).item()
            correct += (pred.argmax(1) == y).type(torch.float).sum().item()
    summary = json.load(open(os.path.join(a.run_dir, "summary.json")))
    ember = summary["final_metrics"]
    print(f"PyTorch (seed's NeuralNetwork): accuracy {100 * correct / size:.2f} %, "
          f"avg loss {loss / batches:.4f}")
    print(f"ember's own report:            accuracy {100 * ember['valid_accuracy']:.2f} %, "
          f"loss {ember['valid_loss']:.4f}")


if __name__ == "__main__":
    main()
