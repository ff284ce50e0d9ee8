#!/usr/bin/env bash
# The CUDA checks and benchmarks, for a GPU machine that has the CUDA driver and PyTorch but no
# network, and gets only this working tree plus what --pack prepares (well under 64 MiB).
#
#   scripts/gpu-check.sh --pack     # here (the build machine): gpu-bundle/ember.xz (the release
#                                   # binary with CUDA, stripped and compressed) and the four
#                                   # FashionMNIST .gz files in datasets/fashion-mnist/
#   scripts/gpu-check.sh            # there: writes everything to $OUT (default gpu-out/)
#   scripts/gpu-check.sh --dry-run  # anywhere: the same steps on the CPU, tiny sizes (CI runs it)
#
# With the device tool: run `scripts/gpu-check.sh` carrying gpu-bundle and datasets/fashion-mnist.
# On the GPU it (1) trains each job a few epochs on CUDA and on the CPU and checks that the final
# valid loss and accuracy agree within the tolerances below, (2) trains fashion-mlp's 20 epochs on
# CUDA (goal: 3 s of train time or less on an H200), (3) runs `ember bench` on CUDA and (4) the
# PyTorch peers on CUDA, eager and with CUDA graphs (scripts/gpu_torch_peers.py), then writes
# $OUT/gpu-check.md. Whole script: about 8 minutes at most. Exit 1 when a check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=gpu
case "${1:-}" in
  --pack) mode=pack ;;
  --dry-run) mode=dry ;;
  "") ;;
  *) echo "usage: scripts/gpu-check.sh [--pack | --dry-run]" >&2; exit 2 ;;
esac
FASHION_FILES="train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz"

if [[ $mode == pack ]]; then
  cargo build --release -q
  mkdir -p gpu-bundle datasets/fashion-mnist
  strip -o gpu-bundle/ember target/release/ember
  xz -T0 -9 -f gpu-bundle/ember
  make -s data
  for f in $FASHION_FILES; do
    [[ -f datasets/fashion-mnist/$f ]] || cp /usr/share/datasets/fashion-mnist/$f datasets/fashion-mnist/
  done
  du -ch gpu-bundle datasets/fashion-mnist | tail -1
  echo "carry: gpu-bundle datasets/fashion-mnist; command: scripts/gpu-check.sh"
  exit 0
fi

OUT=${OUT:-gpu-out}
mkdir -p "$OUT/runs"
log() { echo "== $*" | tee -a "$OUT/steps.log"; }

# The ember binary: the packed one, else a local build.
if [[ -f gpu-bundle/ember.xz ]]; then
  EMBER=${TMPDIR:-/tmp}/ember-gpu-check
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
    gpu-bundle/ember.xz "$EMBER"
  chmod +x "$EMBER"
elif [[ -x target/release/ember ]]; then
  EMBER=$PWD/target/release/ember
else
  echo "gpu-check: no ember binary (run scripts/gpu-check.sh --pack on the build machine)" >&2
  exit 2
fi
FASHION_DIR=datasets/fashion-mnist
[[ -f $FASHION_DIR/train-images-idx3-ubyte.gz ]] || FASHION_DIR=/usr/share/datasets/fashion-mnist

# A Python with torch for the peers: the system one on the GPU machine, PEERS_PYTHON to choose.
PY=${PEERS_PYTHON:-python3}
have_torch=0
"$PY" -c "import torch, numpy" 2>/dev/null && have_torch=1

if [[ $mode == gpu ]]; then
  DEV=cuda
  # Burn's CUDA backend compiles kernels with NVRTC at run time; PyTorch's wheels carry one.
  if ((have_torch)); then
    nvrtc=$("$PY" - <<'EOF' 2>/dev/null || true
import glob, os, site
dirs = site.getsitepackages() + [site.getusersitepackages()]
hits = [p for d in dirs for p in glob.glob(os.path.join(d, "nvidia", "**", "libnvrtc*.so*"), recursive=True)]
print(":".join(sorted({os.path.dirname(p) for p in hits})))
EOF
)
    [[ -n "$nvrtc" ]] && export LD_LIBRARY_PATH="$nvrtc${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  declare -A EPOCHS=([fashion-mlp]=3 [tabular-mlp]=10 [linear-scalar]=2)
  declare -A BENCH_EPOCHS=([fashion-mlp]=4 [tabular-mlp]=20 [linear-scalar]=20)
  LIMIT=()
  FULL_EPOCHS=20
else
  # Dry run: the CPU plays the GPU's part, on a slice, so every step and the report run.
  DEV=cpu
  declare -A EPOCHS=([fashion-mlp]=1 [tabular-mlp]=2 [linear-scalar]=2)
  declare -A BENCH_EPOCHS=([fashion-mlp]=2 [tabular-mlp]=2 [linear-scalar]=2)
  LIMIT=(--max-train-rows 4096)
  FULL_EPOCHS=1
fi

"$EMBER" info | tee "$OUT/info.txt"
if [[ $mode == gpu ]] && ! grep -q "cuda:0" "$OUT/info.txt"; then
  echo "gpu-check: ember sees no CUDA device (see $OUT/info.txt)" >&2
fi

for job in fashion-mlp tabular-mlp linear-scalar; do
  for dev in cpu "$DEV"; do
    [[ $dev == cpu && -d $OUT/runs/$job-cpu ]] && continue  # dry run: one CPU run serves both
    log "train $job on $dev, ${EPOCHS[$job]} epochs"
    "$EMBER" train "configs/$job.toml" --device "$dev" --epochs "${EPOCHS[$job]}" "${LIMIT[@]}" \
      --out "$OUT/runs/$job-$dev" --quiet 2>&1 | tee -a "$OUT/steps.log" || true
  done
done

log "fashion-mlp, $FULL_EPOCHS epochs on $DEV"
"$EMBER" train configs/fashion-mlp.toml --device "$DEV" --epochs "$FULL_EPOCHS" "${LIMIT[@]}" \
  --out "$OUT/runs/fashion-mlp-full-$DEV" --quiet 2>&1 | tee -a "$OUT/steps.log" || true

: > "$OUT/bench.jsonl"
for job in fashion-mlp tabular-mlp linear-scalar; do
  log "ember bench $job on $DEV"
  "$EMBER" bench "configs/$job.toml" --device "$DEV" --epochs "${BENCH_EPOCHS[$job]}" "${LIMIT[@]}" \
    --json 2>>"$OUT/steps.log" | grep '^{' >> "$OUT/bench.jsonl" || true
done

: > "$OUT/torch.jsonl"
if ((have_torch)); then
  variants="best graphs"
  [[ $DEV == cpu ]] && variants=best
  rows=()
  [[ $mode == dry ]] && rows=(--max-rows 4096)
  for job in fashion-mlp tabular-mlp linear-scalar; do
    for v in $variants; do
      log "torch $v $job on $DEV"
      "$PY" scripts/gpu_torch_peers.py "$job" --variant "$v" --device "$DEV" \
        --epochs "${BENCH_EPOCHS[$job]}" --fashion "$FASHION_DIR" "${rows[@]}" \
        --json "$OUT/torch.jsonl" >> "$OUT/steps.log" 2>&1 || echo "torch $v $job failed" | tee -a "$OUT/steps.log"
    done
  done
else
  log "no Python with torch ($PY): PyTorch peers skipped"
fi

python3 scripts/bench_report.py gpu --out "$OUT" --device "$DEV" --full-epochs "$FULL_EPOCHS" \
  | tee "$OUT/gpu-check.md"
