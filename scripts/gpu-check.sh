#!/usr/bin/env bash
# The GPU checks and benchmarks, for a GPU machine that has the CUDA driver and a python3 with
# PyTorch but no network and no cargo, and gets only this working tree plus what --pack prepares.
#
#   scripts/gpu-check.sh --pack     # here (the build machine): `cargo build --release` and
#                                   # `cargo test --release --no-run`, then gpu-bundle/ember.xz and
#                                   # gpu-bundle/gpu_path.xz (the release binary with CUDA and wgpu,
#                                   # and the tests/gpu_path.rs test binary, stripped, xz -9),
#                                   # gpu-bundle/lib/libvulkan.so.1 (the Vulkan loader, for a
#                                   # machine without one) and the four FashionMNIST .gz files in
#                                   # datasets/fashion-mnist/; prints the size (well under 64 MiB)
#   scripts/gpu-check.sh            # there: writes everything to $OUT (default gpu-out/)
#   scripts/gpu-check.sh --dry-run  # anywhere, CPU only: the same steps on the CPU at tiny sizes,
#                                   # the suite only listed (CI runs it; about a minute)
#
# With the device tool: run `scripts/gpu-check.sh` carrying gpu-bundle and datasets/fashion-mnist,
# with a timeout of 540 s or more. On the GPU it (1) runs the GPU-path test suite
# (tests/gpu_path.rs: parity of each job's losses with the CPU, the device loader, kill and
# resume, export, the NaN guard, host reads per epoch) against the packed ember on CUDA, and
# again on the GPU's Vulkan through wgpu when `ember info` lists a wgpu:0 adapter that is not a
# software one (else the report says why it did not run), (2) trains fashion-mlp's 20 epochs on
# CUDA (goal: 3 s of train time or less on an H200) and configs/fashion-cnn.toml's 15 epochs
# (with its test accuracy), (3) runs `ember bench` of each job on CUDA, fashion-cnn included,
# (4) `ember bench fashion-mlp --replicas 16` for one epoch (16 seeds as replicas against 16
# processes; goal: replicas in at most 2x one run) and (5) the PyTorch peers on CUDA, eager and
# with CUDA graphs (scripts/gpu_torch_peers.py), then writes $OUT/gpu-check.md
# (scripts/bench_report.py gpu). Exit 1 when a check fails: a failed CUDA or wgpu suite, an
# incomplete full run, a missing bench.
#
# Time on an H200 (measured 2026-12-04, docs/benchmarks/cuda-on-h200.md): each suite run takes
# 15 to 40 s with SUITE_THREADS=6 tests at once (it is cut off after SUITE_TIMEOUT s, 120),
# fashion-mlp's 20 epochs 35 s, the CNN's 15 about 2 minutes, each bench and PyTorch run 15 to
# 100 s, the replicas step (one run, replicas, 16 processes twice) about 4 minutes: an
# estimated 11 minutes in all, more than one call of the device tool may run (10 minutes).
# PARTS chooses the steps, so that two calls share them:
#   PARTS="suite train" SUITE_THREADS=6 scripts/gpu-check.sh     # (1) and (2): about 4 minutes
#   PARTS="bench peers" scripts/gpu-check.sh                     # (3), (4) and (5): over 7
# The report covers the parts that ran. For wgpu, bring Debian's libvulkan1, libglvnd0, libegl1,
# libgl1, libglx0, libgles2 and libopengl0 (`apt-get download` here) and unpack them there first
# (dpkg -x into /, then ldconfig): on the H200 the packed loader alone found no adapter, and
# these did (docs/devices.md, "On a GPU machine").
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/sbin:/sbin  # ldconfig, for a user whose PATH lacks them
mode=gpu
case "${1:-}" in
  --pack) mode=pack ;;
  --dry-run) mode=dry ;;
  "") ;;
  *) echo "usage: scripts/gpu-check.sh [--pack | --dry-run]" >&2; exit 2 ;;
esac
FASHION_FILES="train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz"

# The newest gpu_path test binary cargo built (target/release/deps/gpu_path-<hash>), or nothing.
local_suite() {
  local f newest=""
  for f in target/release/deps/gpu_path-*; do
    [[ -f $f && -x $f && $f != *.d ]] || continue
    [[ -z $newest || $f -nt $newest ]] && newest=$f
  done
  [[ -n $newest ]] && echo "$PWD/$newest"
  return 0
}

if [[ $mode == pack ]]; then
  cargo build --release -q
  cargo test --release --no-run -q
  suite=$(local_suite)
  [[ -n $suite ]] || { echo "gpu-check --pack: no target/release/deps/gpu_path-* after cargo test --no-run" >&2; exit 1; }
  vulkan=$(ldconfig -p | awk '$1 == "libvulkan.so.1" { print $NF; exit }')
  [[ -n $vulkan ]] || { echo "gpu-check --pack: no libvulkan.so.1 here (apt-get install libvulkan1)" >&2; exit 1; }
  rm -rf gpu-bundle
  mkdir -p gpu-bundle/lib datasets/fashion-mnist
  strip -o gpu-bundle/ember target/release/ember
  strip -o gpu-bundle/gpu_path "$suite"
  xz -T0 -9 -f gpu-bundle/ember gpu-bundle/gpu_path
  cp "$(readlink -f "$vulkan")" gpu-bundle/lib/libvulkan.so.1
  make -s data
  for f in $FASHION_FILES; do
    [[ -f datasets/fashion-mnist/$f ]] || cp /usr/share/datasets/fashion-mnist/$f datasets/fashion-mnist/
  done
  echo "suite: $suite; Vulkan loader: $(readlink -f "$vulkan")"
  du -b gpu-bundle/*.xz gpu-bundle/lib/libvulkan.so.1
  bytes=$(du -cb gpu-bundle datasets/fashion-mnist | tail -1 | cut -f1)
  echo "bundle: $((bytes / 1048576)) MiB (gpu-bundle + datasets/fashion-mnist; the device tool carries 64 MiB in all)"
  if ((bytes > 60 * 1048576)); then
    echo "gpu-check --pack: the bundle is over 60 MiB, too close to the 64 MiB limit" >&2
    exit 1
  fi
  echo "carry: gpu-bundle datasets/fashion-mnist; command: scripts/gpu-check.sh"
  exit 0
fi

OUT=${OUT:-gpu-out}
mkdir -p "$OUT/runs"
OUT=$(cd "$OUT" && pwd)
: > "$OUT/steps.log"
log() { echo "== $*" | tee -a "$OUT/steps.log"; }

unxz_to() {  # unxz_to FILE.xz DEST: no xz on the GPU machine, Python's lzma instead
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2"
  chmod +x "$2"
}

# The binaries: on the GPU the packed ones, else local builds; in a dry run the local builds
# (what CI just built), else the packed ones.
packed_ember() {
  [[ -f gpu-bundle/ember.xz ]] || return 1
  EMBER=${TMPDIR:-/tmp}/ember-gpu-check
  unxz_to gpu-bundle/ember.xz "$EMBER"
}
local_ember() {
  [[ -x target/release/ember ]] || return 1
  EMBER=$PWD/target/release/ember
}
packed_suite() {
  [[ -f gpu-bundle/gpu_path.xz ]] || return 1
  SUITE=${TMPDIR:-/tmp}/gpu_path-gpu-check
  unxz_to gpu-bundle/gpu_path.xz "$SUITE"
}
local_suite_bin() {
  SUITE=$(local_suite)
  [[ -n $SUITE ]]
}
if [[ $mode == gpu ]]; then
  packed_ember || local_ember || {
    echo "gpu-check: no ember binary (run scripts/gpu-check.sh --pack on the build machine)" >&2; exit 2; }
  packed_suite || local_suite_bin || {
    echo "gpu-check: no gpu_path test binary (run scripts/gpu-check.sh --pack on the build machine)" >&2; exit 2; }
else
  local_ember || packed_ember || {
    echo "gpu-check --dry-run: no ember binary (cargo build --release, or scripts/gpu-check.sh --pack)" >&2; exit 2; }
  local_suite_bin || packed_suite || {
    echo "gpu-check --dry-run: no gpu_path test binary in target/release/deps (cargo test --release --no-run builds it)" >&2; exit 2; }
fi
echo "ember: $EMBER; GPU-path suite: $SUITE" | tee -a "$OUT/steps.log"
FASHION_DIR=datasets/fashion-mnist
[[ -f $FASHION_DIR/train-images-idx3-ubyte.gz ]] || FASHION_DIR=/usr/share/datasets/fashion-mnist

# A Python with torch for the peers: the system one on the GPU machine, PEERS_PYTHON to choose.
PY=${PEERS_PYTHON:-python3}
have_torch=0
"$PY" -c "import torch, numpy" 2>/dev/null && have_torch=1

vulkan_note=""
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
  # wgpu needs the Vulkan loader (libvulkan.so.1); --pack brings one for a machine without it.
  if ldconfig -p | awk '$1 == "libvulkan.so.1" { found = 1 } END { exit !found }'; then
    vulkan_note="system Vulkan loader"
  else
    export LD_LIBRARY_PATH="$PWD/gpu-bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    vulkan_note="bundled Vulkan loader (no libvulkan.so.1 on the system)"
  fi
  # The driver's own libraries (its Vulkan driver among them), where the machine mounts them
  # outside the linker's path.
  nvidia_libs=(/usr/local/nvidia/lib64 /usr/local/nvidia/lib)
  for d in "${nvidia_libs[@]}"; do
    [[ -d $d ]] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
  done
  # The loader finds the NVIDIA driver through an ICD file; take only that one, so that wgpu:0 is
  # the GPU even where Mesa's software driver is installed too. A driver whose ICD file was not
  # mounted still has its Vulkan driver in libGLX_nvidia.so.0: point a file of our own at it.
  if [[ -z ${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-} ]]; then
    icd=""
    for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia*.json /etc/vulkan/icd.d/nvidia*.json \
      /usr/share/vulkan/icd.d/nvidia*.json /usr/local/share/vulkan/icd.d/nvidia*.json; do
      [[ -f $f ]] && { icd=$f; break; }
    done
    glx=$(ldconfig -p | awk '$1 == "libGLX_nvidia.so.0" { print $NF; exit }')
    for d in "${nvidia_libs[@]}"; do
      [[ -z $glx && -e $d/libGLX_nvidia.so.0 ]] && glx=$d/libGLX_nvidia.so.0
    done
    if [[ -z $icd && -n $glx ]]; then
      icd=$OUT/nvidia_icd.json
      echo '{"file_format_version": "1.0.0", "ICD": {"library_path": "libGLX_nvidia.so.0", "api_version": "1.3.0"}}' > "$icd"
    fi
    if [[ -n $icd ]]; then
      export VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd
      vulkan_note+=", NVIDIA Vulkan driver only ($icd)"
    else
      vulkan_note+=", no NVIDIA Vulkan ICD file and no libGLX_nvidia.so.0"
    fi
  else
    vulkan_note+=", VK_DRIVER_FILES/VK_ICD_FILENAMES as set: ${VK_DRIVER_FILES:-$VK_ICD_FILENAMES}"
  fi
  declare -A BENCH_EPOCHS=([fashion-mlp]=4 [tabular-mlp]=20 [linear-scalar]=20 [fashion-cnn]=3)
  LIMIT=()
  REPLICAS=16
  FULL_EPOCHS=20
  CNN_EPOCHS=15  # the preset's own
else
  # Dry run: the CPU plays the GPU's part, on a slice, so every step and the report run.
  DEV=cpu
  declare -A BENCH_EPOCHS=([fashion-mlp]=2 [tabular-mlp]=2 [linear-scalar]=2 [fashion-cnn]=2)
  LIMIT=(--max-train-rows 4096)
  REPLICAS=4
  FULL_EPOCHS=1
  CNN_EPOCHS=1
fi
SUITE_TIMEOUT=${SUITE_TIMEOUT:-120}
# Tests at once: each runs ember on the GPU, and the parity tests on the CPU too (2 threads each).
SUITE_THREADS=${SUITE_THREADS:-2}
# The parts, in the order they run; each is a function NAME_part below.
ALL_PARTS="suite train bench peers"
PARTS=${PARTS:-$ALL_PARTS}
[[ -n ${PARTS// /} ]] || { echo "gpu-check: PARTS is empty; the parts are $ALL_PARTS" >&2; exit 2; }
for p in $PARTS; do
  [[ " $ALL_PARTS " == *" $p "* ]] || { echo "gpu-check: PARTS has '$p'; the parts are $ALL_PARTS" >&2; exit 2; }
done

"$EMBER" info | tee "$OUT/info.txt"
[[ -n $vulkan_note ]] && log "wgpu: $vulkan_note"
if [[ $mode == gpu ]] && ! grep -q "^cuda:0: " "$OUT/info.txt"; then
  echo "gpu-check: ember sees no CUDA device (see $OUT/info.txt)" | tee -a "$OUT/steps.log" >&2
fi

# suite_state DEV STATE RC MILLISECONDS REASON: $OUT/suite-DEV.json, which the report reads.
suite_state() {
  python3 -c 'import json, sys
f, dev, state, rc, ms, reason = sys.argv[1:]
json.dump(dict(device=dev, state=state, rc=int(rc) if rc else None,
               seconds=round(int(ms) / 1000, 1) if ms else None, reason=reason or None), open(f, "w"))' \
    "$OUT/suite-$1.json" "$@"
}

# run_suite DEV: the GPU-path suite on DEV (on the GPU), or its list of tests (dry run).
run_suite() {
  local dev=$1 rc t0 scratch=$OUT/suite-$1
  rm -rf "$scratch"
  mkdir -p "$scratch"
  t0=$(date +%s%3N)
  set +e
  if [[ $mode == gpu ]]; then
    log "GPU-path suite on $dev (cut off after ${SUITE_TIMEOUT} s)"
    EMBER_BIN=$EMBER EMBER_ROOT=$PWD EMBER_SCRATCH=$scratch EMBER_GPU_DEVICES=$dev \
      timeout -k 10 "$SUITE_TIMEOUT" "$SUITE" --test-threads "$SUITE_THREADS" 2>&1 | tee "$OUT/suite-$dev.log" | tee -a "$OUT/steps.log"
  else
    log "GPU-path suite for $dev: --list only (CI runs the suite through make test)"
    EMBER_BIN=$EMBER EMBER_ROOT=$PWD EMBER_SCRATCH=$scratch EMBER_GPU_DEVICES=$dev \
      "$SUITE" --list 2>&1 | tee "$OUT/suite-$dev.log" | tee -a "$OUT/steps.log"
  fi
  rc=${PIPESTATUS[0]}
  set -e
  local ms=$(($(date +%s%3N) - t0))
  if ((rc == 124)); then
    log "GPU-path suite on $dev: cut off after ${SUITE_TIMEOUT} s"
    # timeout ends the test binary, not the ember runs it started: they would go on training
    # beside the next steps (seen on the H200: a CNN run still in its first epoch minutes later).
    pkill -KILL -f "^$EMBER " 2>/dev/null || true
  fi
  ((rc != 0)) && log "GPU-path suite on $dev: exit status $rc"
  # What comes back from the device machine is limited: keep the runs' summaries and logs,
  # drop their weights and checkpoints.
  find "$scratch" -type f -size +512k -delete 2>/dev/null || true
  suite_state "$dev" "$([[ $mode == gpu ]] && echo ran || echo listed)" "$rc" "$ms" ""
}

suite_part() {
  run_suite cuda
  if [[ $mode == dry ]]; then
    run_suite wgpu
  else
    wgpu0=$(grep -m1 "^wgpu:0: " "$OUT/info.txt" || true)
    if [[ -z $wgpu0 ]]; then
      why="ember info lists no wgpu adapter ($(grep -m1 '^wgpu' "$OUT/info.txt" || echo 'no wgpu line'); $vulkan_note)"
    elif [[ $wgpu0 == *"[software (CPU)"* ]]; then
      why="wgpu:0 is a software adapter, not the GPU ($vulkan_note)"
    else
      why=""
    fi
    if [[ -n $why ]]; then
      log "GPU-path suite on wgpu not run: $why"
      rm -f "$OUT/suite-wgpu.log"
      suite_state wgpu "not run" "" "" "$why"
    else
      run_suite wgpu
    fi
  fi
}

train_part() {
  log "fashion-mlp, $FULL_EPOCHS epochs on $DEV"
  "$EMBER" train configs/fashion-mlp.toml --device "$DEV" --epochs "$FULL_EPOCHS" "${LIMIT[@]}" \
    --out "$OUT/runs/fashion-mlp-full-$DEV" --quiet 2>&1 | tee -a "$OUT/steps.log" || true
  log "fashion-cnn, $CNN_EPOCHS epochs on $DEV, then its test accuracy"
  cnn_run="$OUT/runs/fashion-cnn-full-$DEV"
  "$EMBER" train configs/fashion-cnn.toml --device "$DEV" --epochs "$CNN_EPOCHS" "${LIMIT[@]}" \
    --out "$cnn_run" --quiet 2>&1 | tee -a "$OUT/steps.log" || true
  "$EMBER" eval "$cnn_run" --split test --device "$DEV" --json > "$OUT/fashion-cnn-test.json" \
    2>>"$OUT/steps.log" || true
}

bench_part() {
  : > "$OUT/bench.jsonl"
  # The record names the config file's job (fashion-cnn's own config calls its network "cnn").
  for job in fashion-mlp tabular-mlp linear-scalar fashion-cnn; do
    log "ember bench $job on $DEV"
    "$EMBER" bench "configs/$job.toml" --device "$DEV" --epochs "${BENCH_EPOCHS[$job]}" "${LIMIT[@]}" \
      --json 2>>"$OUT/steps.log" | grep '^{' \
      | sed "s/^{\"job\":\"[^\"]*\"/{\"job\":\"$job\"/" >> "$OUT/bench.jsonl" || true
  done

  # The MLPs again on Burn's compositions instead of ember's GPU kernels (EMBER_GPU_KERNELS=0,
  # docs/devices.md): what the kernels gain on this device. linear-scalar takes none of them.
  : > "$OUT/bench-composed.jsonl"
  for job in fashion-mlp tabular-mlp; do
    log "ember bench $job on $DEV with Burn's compositions"
    EMBER_GPU_KERNELS=0 "$EMBER" bench "configs/$job.toml" --device "$DEV" --epochs "${BENCH_EPOCHS[$job]}" \
      "${LIMIT[@]}" --json 2>>"$OUT/steps.log" | grep '^{' \
      | sed "s/^{\"job\":\"[^\"]*\"/{\"job\":\"$job\"/" >> "$OUT/bench-composed.jsonl" || true
  done

  log "ember bench fashion-mlp --replicas $REPLICAS on $DEV"
  "$EMBER" bench configs/fashion-mlp.toml --replicas "$REPLICAS" --epochs 1 --device "$DEV" "${LIMIT[@]}" \
    --json 2>>"$OUT/steps.log" | grep '^{' > "$OUT/replicas.jsonl" || true
}

peers_part() {
  : > "$OUT/torch.jsonl"
  if ((have_torch)); then
    variants="best graphs"
    [[ $DEV == cpu ]] && variants=best
    rows=()
    [[ $mode == dry ]] && rows=(--max-rows 4096)
    for job in fashion-mlp tabular-mlp linear-scalar fashion-cnn; do
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
}

for p in $ALL_PARTS; do
  if [[ " $PARTS " == *" $p "* ]]; then
    "${p}_part"
  fi
done

python3 scripts/bench_report.py gpu --out "$OUT" --device "$DEV" --full-epochs "$FULL_EPOCHS" --parts "$PARTS" \
  | tee "$OUT/gpu-check.md"
