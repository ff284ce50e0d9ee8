#!/usr/bin/env python3
"""Loads a fashion-mlp run's model.safetensors into the PyTorch quickstart's own `NeuralNetwork`
class (written out below exactly as the PyTorch tutorial and the question that motivated ember
define it), with load_state_dict(strict=True), and measures its accuracy on the 10k FashionMNIST
test images the way the quickstart's test_loop does (torchvision's FashionMNIST + ToTensor,
batches of 64).

A run of a convolutional network on FashionMNIST (fashion-cnn, or any job with [[model.conv]]
blocks on idx images scaled to 0..1) loads instead into the `nn.Sequential` that its
config.toml describes, built and printed by `cnn_sequential` below (docs/images.md shows
fashion-cnn's).

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
import tomllib

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


ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "gelu": nn.GELU, "sigmoid": nn.Sigmoid,
               "identity": nn.Identity}


def cnn_sequential(model):
    """The nn.Sequential of a run's [model] table: per block Conv2d (no bias before a batch
    norm), [BatchNorm2d], the activation, [MaxPool2d]; Flatten (or AdaptiveAvgPool2d(1) and
    Flatten); per hidden layer Linear, the activation, [Dropout]; the output Linear."""
    act = ACTIVATIONS[model["activation"]]
    layers, channels, h, w = [], *model["image"]
    for b in model["conv"]:
        k, out = b["kernel"], b["channels"]
        layers.append(nn.Conv2d(channels, out, k, b["stride"], b["padding"], bias=not b["batch_norm"]))
        if b["batch_norm"]:
            layers.append(nn.BatchNorm2d(out))
        layers.append(act())
        if b["pool"] > 1:
            layers.append(nn.MaxPool2d(b["pool"]))
        h = ((h + 2 * b["padding"] - k) // b["stride"] + 1) // b["pool"]
        w = ((w + 2 * b["padding"] - k) // b["stride"] + 1) // b["pool"]
        channels = out
    if model["pooling"] == "flatten":
        layers.append(nn.Flatten())
        width = channels * h * w
    else:
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        width = channels
    for hidden in model["hidden"]:
        layers += [nn.Linear(width, hidden), act()]
        if model["dropout"] > 0:
            layers.append(nn.Dropout(model["dropout"]))
        width = hidden
    layers.append(nn.Linear(width, model["outputs"]))
    return nn.Sequential(*layers)


class Cnn(nn.Module):
    """ember's convolutional network: `net`, the Sequential above, named as in model.safetensors."""

    def __init__(self, model):
        super().__init__()
        self.net = cnn_sequential(model)

    def forward(self, x):
        return self.net(x)


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

    config = tomllib.load(open(os.path.join(a.run_dir, "config.toml"), "rb"))
    cnn = "conv" in config["model"]
    model = Cnn(config["model"]) if cnn else NeuralNetwork()
    if cnn:
        print(model)
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
    who = "ember's nn.Sequential" if cnn else "quickstart's model"
    print(f"PyTorch ({who}), test images: accuracy {100 * correct / size:.2f} %, "
          f"avg loss {loss / batches:.4f}")
    if config["data"].get("valid_fraction", 0) > 0:
        # The validation images are held out of the training images: compare with
        # `ember eval RUN_DIR --split test` instead.
        print("ember's own figure for these images: ember eval RUN_DIR --split test")
    else:
        print(f"ember's own report:            accuracy {100 * ember['valid_accuracy']:.2f} %, "
              f"loss {ember['valid_loss']:.4f}")


if __name__ == "__main__":
    main()
