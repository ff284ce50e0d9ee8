#!/usr/bin/env bash
# `make bench-peers`: ember and the peer scripts of bench/peers (PyTorch as posted, PyTorch
# best effort, Keras fit, JAX jit step, JAX jit + scan) on the same machine, with the same thread
# count, pinned to the same cores, in alternating runs; then a study of the run from the
# records (docs/benchmarks/bench-peers-DATE.md, or REPORT), whose figures BENCHMARKS.md's
# tables take by hand.
#
#   scripts/bench-peers.sh                    # 1 and 2 threads, 3 rounds, the three jobs + the recipe
#   ROUNDS=1 JOBS=tabular-mlp THREADS_LIST=1 scripts/bench-peers.sh
#
# Knobs: ROUNDS (3), THREADS_LIST ("1 2"), JOBS (the three seed jobs and fashion-mlp-tuned;
# fashion-cnn on request), PEER_VARIANTS (below), CNN_PEER_VARIANTS (fashion-cnn's, below),
# PEERS_DIR (bench/peers in this repository), PEERS_VENV (/tmp/peers-venv, made from the peers'
# requirements.txt on first use: about 5 GB), PEERS_DATA (/tmp/peers-data), PEERS_MAX_S (20: a
# peer run stops after the epoch that passes this many seconds, at least 2 epochs),
# QUIET_WAIT (60: seconds to wait for other processes to go quiet before each run; 0 = don't),
# BENCH_OUT (bench-out: records and logs), REPORT (docs/benchmarks/bench-peers-DATE.md, DATE
# today's, UTC; a path from the repository root), HIDE_AVX512 (0; 1 = every run,
# ember's, the peers' and the peak's, sees this CPU without AVX-512: the AVX2 machine's paths on
# this machine's cores, through scripts/hide-avx512.c; needs gcc and CPUID faulting).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# The peer scripts ship with ember in bench/peers, found from this script's location (the cd
# above); a relative PEERS_DIR is taken from the repository root, like every path here.
default_peers_dir=$root/bench/peers
PEERS_DIR=$(realpath "${PEERS_DIR:-$default_peers_dir}" 2>/dev/null || true)
PEERS_VENV=${PEERS_VENV:-/tmp/peers-venv}
export PEERS_DATA=${PEERS_DATA:-/tmp/peers-data}
export PEERS_MAX_S=${PEERS_MAX_S:-20}
ROUNDS=${ROUNDS:-3}
THREADS_LIST=${THREADS_LIST:-"1 2"}
JOBS=${JOBS:-"fashion-mlp tabular-mlp linear-scalar fashion-mlp-tuned"}
QUIET_WAIT=${QUIET_WAIT:-60}
HIDE_AVX512=${HIDE_AVX512:-0}
OUT=$root/${BENCH_OUT:-bench-out}
REPORT=$root/${REPORT:-docs/benchmarks/bench-peers-$(date -u +%Y-%m-%d).md}
PEER_VARIANTS=${PEER_VARIANTS:-"torch_bench.py:--variant posted|torch_bench.py:--variant best|keras_bench.py:|jax_bench.py:--variant step|jax_bench.py:--variant scan"}

# Epochs of `ember bench` per job: enough steady epochs for a median, about 20 s each way.
declare -A EMBER_EPOCHS=([fashion-mlp]=5 [tabular-mlp]=40 [linear-scalar]=150 [fashion-cnn]=3
  [fashion-mlp-tuned]=5)
declare -A WORKLOAD=([fashion-mlp]=w1 [tabular-mlp]=w2 [linear-scalar]=w3 [fashion-cnn]=w4
  [fashion-mlp-tuned]=w5)
# The CNN's peers: PyTorch eager and compiled, JAX's jitted step (its scan adds nothing to a step
# this long, and the posted loop and Keras are the MLP seeds' own programs). Run it with
#   JOBS=fashion-cnn REPORT=bench-out/fashion-cnn.md scripts/bench-peers.sh
# The tuned recipe (Adam, dropout, a cosine schedule, shuffled) has one peer: the same recipe in
# PyTorch with its fused Adam, the bar set for ember's optimizer step; run as
# PyTorch runs by default, and with subnormals flushed to zero as ember's Adam does.
declare -A JOB_PEERS=([fashion-cnn]="${CNN_PEER_VARIANTS:-torch_bench.py:--variant best|torch_bench.py:--variant compile|jax_bench.py:--variant step}"
  [fashion-mlp-tuned]="torch_bench.py:--variant best|torch_bench.py:--variant best --flush-denormal")

die() { echo "bench-peers: $*" >&2; exit 1; }
[[ "$HIDE_AVX512" == [01] ]] || die "HIDE_AVX512 is 0 or 1, not '$HIDE_AVX512'"
[[ -f "$PEERS_DIR/common.py" ]] || die "no peer scripts at ${PEERS_DIR:-$default_peers_dir} (set PEERS_DIR)"
command -v taskset >/dev/null || die "taskset (util-linux) is needed to pin runs to cores"
ncpu=$(nproc)

# The peers' Python environment, once.
PY=$PEERS_VENV/bin/python
if ! "$PY" -c "import torch, torchvision, tensorflow, keras, jax, optax" 2>/dev/null; then
  echo "== creating $PEERS_VENV from $PEERS_DIR/requirements.txt (about 5 GB, a few minutes)"
  python3.11 -m venv "$PEERS_VENV" 2>/dev/null || python3 -m venv "$PEERS_VENV"
  "$PEERS_VENV/bin/pip" install -q -r "$PEERS_DIR/requirements.txt"
fi
# Their data (the W2 table as .npy, FashionMNIST laid out for torchvision), once.
make -s data
[[ -f "$PEERS_DATA/w2_x.npy" && -d "$PEERS_DATA/FashionMNIST/raw" ]] \
  || (cd "$PEERS_DIR" && "$PY" common.py make-data)

cargo build --release -q
EMBER=$root/target/release/ember

mkdir -p "$OUT/logs"
records=$OUT/records.jsonl
: > "$records"
# The fp32 peak of one core, for each figure's share of it (crates/ember-kernels/benches/peak.rs), pinned like a
# 1-thread run.
cargo bench -q -p ember-kernels --bench peak --no-run 2>/dev/null
# From here on every run sees the CPU without AVX-512, where asked.
if [[ "$HIDE_AVX512" == 1 ]]; then
  gcc -O2 -shared -fPIC -o "$OUT/hide-avx512.so" scripts/hide-avx512.c -ldl
  # The library itself is the probe: it exits 97 where the kernel refuses CPUID faulting.
  LD_PRELOAD=$OUT/hide-avx512.so /bin/true 2>/dev/null \
    || die "HIDE_AVX512=1 needs CPUID faulting (cpuid_fault in /proc/cpuinfo)"
  export LD_PRELOAD=$OUT/hide-avx512.so${LD_PRELOAD:+:$LD_PRELOAD}
  # glibc picks its string functions from CPUID before any library loads.
  hwcaps=glibc.cpu.hwcaps=-AVX512F,-AVX512CD,-AVX512BW,-AVX512DQ,-AVX512VL,-AVX512ER,-AVX512PF
  export GLIBC_TUNABLES=$hwcaps${GLIBC_TUNABLES:+:$GLIBC_TUNABLES}
fi
taskset -c $((ncpu - 1)) cargo bench -q -p ember-kernels --bench peak | tee "$OUT/peak.txt"
peak=$(awk '/^peak_gflops_per_core/ {print $2}' "$OUT/peak.txt")
peak_width=$(awk '/^peak_width/ {print $2}' "$OUT/peak.txt")
# The SIMD level of the CPU, of ember's kernels and of the gemm crate's, for the header.
{ "$EMBER" info | sed -n 's/^cpu simd: //p' | tr -d '\n'
  [[ "$HIDE_AVX512" != 1 ]] || printf '; AVX-512 hidden from every run (HIDE_AVX512=1)'
  echo; } > "$OUT/simd.txt"
git rev-parse --short HEAD > "$OUT/commit" 2>/dev/null || echo unknown > "$OUT/commit"

wait_quiet() {
  [[ "$QUIET_WAIT" == 0 ]] || (cd "$PEERS_DIR" && "$PY" common.py wait-quiet "$QUIET_WAIT") || true
}

for threads in $THREADS_LIST; do
  # 1 thread: pinned to the last core; 2 or more: the first N cores. Peers and ember alike.
  if ((threads == 1)); then cores=$((ncpu - 1)); else cores="0-$((threads - 1))"; fi
  pin="taskset -c $cores"
  for round in $(seq 1 "$ROUNDS"); do
    for job in $JOBS; do
      w=${WORKLOAD[$job]}
      runs=("ember")
      IFS='|' read -ra peers <<< "${JOB_PEERS[$job]:-$PEER_VARIANTS}"
      runs+=("${peers[@]}")
      # Rotate the order each round, so no one always runs first (or right after a busy spell).
      n=${#runs[@]}; shift_by=$(( (round - 1) % n ))
      runs=("${runs[@]:shift_by}" "${runs[@]:0:shift_by}")
      for r in "${runs[@]}"; do
        wait_quiet
        if [[ "$r" == ember ]]; then
          log="$OUT/logs/ember-$job-t$threads-r$round.log"
          echo "== t$threads r$round $job: ember bench"
          python3 scripts/bench_report.py run-ember --out "$records" --job "$job" \
            --threads "$threads" --round "$round" -- \
            $pin "$EMBER" --threads "$threads" bench "configs/$job.toml" --device cpu \
            --epochs "${EMBER_EPOCHS[$job]}" --json > "$log" 2>&1 \
            || { echo "FAILED: ember bench $job (log: $log)"; tail -3 "$log"; }
        else
          script=${r%%:*}; args=${r#*:}
          log="$OUT/logs/${script%.py}-$w-$(echo "$args" | tr -c 'a-z0-9' '_')t$threads-r$round.log"
          echo "== t$threads r$round $job: $script $w $args"
          (cd "$PEERS_DIR" && PEERS_THREADS=$threads PEERS_RESULTS=$records \
            $pin "$PY" "$script" "$w" $args) > "$log" 2>&1 \
            || { echo "FAILED: $script $w $args (log: $log)"; tail -3 "$log"; }
        fi
      done
    done
  done
done

mkdir -p "$(dirname "$REPORT")"
python3 scripts/bench_report.py table --records "$records" --commit "$(cat "$OUT/commit")" \
  --command "$0 (ROUNDS=$ROUNDS THREADS_LIST='$THREADS_LIST' PEERS_MAX_S=$PEERS_MAX_S HIDE_AVX512=$HIDE_AVX512)" \
  --peers-python "$PY" ${peak:+--peak-gflops "$peak"} ${peak_width:+--peak-width "$peak_width"} \
  --simd "$(cat "$OUT/simd.txt")" > "$REPORT.tmp"
mv "$REPORT.tmp" "$REPORT"
echo "wrote $REPORT (records: $records)"
echo "to keep it: list it in docs/benchmarks/README.md, copy the records to bench/records/," \
  "and update BENCHMARKS.md's table for this machine class"
