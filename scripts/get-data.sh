#!/usr/bin/env bash
# Makes FashionMNIST available to ember: the four IDX files in datasets/fashion-mnist/ or in
# /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist package), installing the
# package when we are root. ember looks in both places.
set -euo pipefail
cd "$(dirname "$0")/.."

files=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
complete() {
  local dir=$1 f
  for f in "${files[@]}"; do
    [[ -f $dir/$f.gz || -f $dir/$f ]] || return 1
  done
}

for dir in datasets/fashion-mnist /usr/share/datasets/fashion-mnist; do
  if complete "$dir"; then
    echo "FashionMNIST: $dir"
    exit 0
  fi
done

if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  echo "FashionMNIST: installing Debian's dataset-fashion-mnist"
  apt-get install -y dataset-fashion-mnist >/dev/null || { apt-get update >/dev/null && apt-get install -y dataset-fashion-mnist >/dev/null; }
  complete /usr/share/datasets/fashion-mnist && { echo "FashionMNIST: /usr/share/datasets/fashion-mnist"; exit 0; }
fi

cat >&2 <<MSG
FashionMNIST was not found. Either
  - install Debian's package:  sudo apt-get install dataset-fashion-mnist
  - or put the four files ${files[*]/%/.gz}
    (from https://github.com/zalandoresearch/fashion-mnist) in datasets/fashion-mnist/
MSG
exit 1
