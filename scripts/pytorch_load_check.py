#!/usr/bin/env python3
"""Loads a fashion-mlp run's model.safetensors into the PyTorch quickstart's own `NeuralNetwork`
class (written out below exactly as the PyTorch tutorial and the question that motivated ember
define it), with load_state_dict(strict=True), and measures its accuracy on the 10k FashionMNIST
test images the way the quickstart's test_loop does (torchvision's FashionMNIST + ToTensor,
batches of 64).

  python scripts/pytorch_load_check.py RUN_DIR [--root DIR]

Needs torch, torchvision and safetensors (bench/peers/requirements.txt has the first two).
--root is torchvision's data root holding FashionMNIST/raw/ with the four un-gzipped IDX files
(bench/peers/common.py make-data lays out /tmp/peers-data that way); it is filled when missing
from datasets/fashion-mnist/ or /usr/share/datasets/fashion-mnist (wherever `make data` found
the files, gzipped or not).
"""
import argparse
import gzip
import json
import os
import shutil

import torch
from safetensors.torch import load_file
from torch import nn
from torch.utils.data import DataLoader
from torchvision import datasets
from torchvision.transforms import ToTensor

HERE = os.path.dirname(os.path.abspath(__file__))
FASHION_DIRS = (os.path.join(HERE, "..", "datasets", "fashion-mnist"), "/usr/share/datasets/fashion-mnist")
FASHION_FILES = ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
                 "train-images-idx3-ubyte", "train-labels-idx1-ubyte")


# The PyTorch quickstart's model, as posted. ember's fashion-mlp exports its weights under this
# class's names (linear_relu_stack.0/.2/.4 .weight/.bias), so strict loading checks the layout too.
class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(28*28, 512),
            nn.ReLU(),
            nn.Linear(512, 512),
            nn.ReLU(),
            nn.Linear(512, 10),
        )

    def forward(self, x):
        x = self.flatten(x)
        logits = self.linear_relu_stack(x)
        return logits


def fashion_src():
    """The first of FASHION_DIRS holding all four IDX files, gzipped or not."""
    for d in FASHION_DIRS:
        if all(os.path.exists(os.path.join(d, n + ".gz")) or os.path.exists(os.path.join(d, n))
               for n in FASHION_FILES):
            return d
    raise SystemExit("FashionMNIST not found in " + " or ".join(FASHION_DIRS) + " (run `make data`)")


def torchvision_root(root):
    raw = os.path.join(root, "FashionMNIST", "raw")
    os.makedirs(raw, exist_ok=True)
    src = None
    for name in FASHION_FILES:
        dst = os.path.join(raw, name)
        if not os.path.exists(dst):
            src = src or fashion_src()
            gz = os.path.join(src, name + ".gz")
            with (gzip.open(gz, "rb") if os.path.exists(gz) else open(os.path.join(src, name), "rb")) as f, \
                    open(dst + ".tmp", "wb") as g:
                shutil.copyfileobj(f, g)
            os.replace(dst + ".tmp", dst)
    return root


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--root", default="/tmp/peers-data")
    a = ap.parse_args()

    model = NeuralNetwork()
    state = load_file(os.path.join(a.run_dir, "model.safetensors"))
    result = model.load_state_dict(state, strict=True)
    print(f"load_state_dict(strict=True): {result}")

    test_data = datasets.FashionMNIST(root=torchvision_root(a.root), train=False, download=False,
                                      transform=ToTensor())
    loader = DataLoader(test_data, batch_size=64)
    loss_fn = nn.CrossEntropyLoss()
    model.eval()
    size, batches, loss, correct = len(loader.dataset), len(loader), 0.0, 0
    with torch.no_grad():  # the quickstart's test_loop
        for X, y in loader:
            pred = model(X)
            loss += loss_fn(pred, y).item()
            correct += (pred.argmax(1) == y).type(torch.float).sum().item()
    summary = json.load(open(os.path.join(a.run_dir, "summary.json")))
    ember = summary["final_metrics"]
    print(f"PyTorch (quickstart's model):   accuracy {100 * correct / size:.2f} %, "
          f"avg loss {loss / batches:.4f}")
    print(f"ember's own report:            accuracy {100 * ember['valid_accuracy']:.2f} %, "
          f"loss {ember['valid_loss']:.4f}")


if __name__ == "__main__":
    main()
