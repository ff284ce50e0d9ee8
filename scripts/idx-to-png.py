#!/usr/bin/env python3
"""Writes IDX images (FashionMNIST, MNIST) as PNG files in one folder per class:
OUT/<label>/<index>.png. Standard library only.

    scripts/idx-to-png.py IMAGES LABELS OUT     (IMAGES and LABELS may be gzipped)
"""
import gzip
import os
import struct
import sys
import zlib


def read(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return f.read()


def png(width, height, pixels):
    """An 8-bit grayscale PNG of `pixels` (rows of bytes)."""
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
    raw = b"".join(b"\0" + pixels[r * width:(r + 1) * width] for r in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def main(images_path, labels_path, out):
    images, labels = read(images_path), read(labels_path)
    magic, count, rows, cols = struct.unpack(">IIII", images[:16])
    if magic != 0x803 or struct.unpack(">II", labels[:8]) != (0x801, count):
        sys.exit(f"{images_path} and {labels_path} are not a matching pair of IDX files")
    size = rows * cols
    for i in range(count):
        folder = os.path.join(out, str(labels[8 + i]))
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{i:05}.png"), "wb") as f:
            f.write(png(cols, rows, images[16 + i * size:16 + (i + 1) * size]))
    print(f"{count} images of {rows}x{cols} -> {out}/<class>/")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
