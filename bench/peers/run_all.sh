#!/usr/bin/env bash
# Runs every peer measurement once, each after waiting (up to $QUIET_WAIT s) for the
# machine to be quiet (other processes < 0.3 cores), appending to results/raw.jsonl here
# (or to $PEERS_RESULTS), logs in logs/ here; then summarize.py.
#   bash run_all.sh            # everything (~15 min on a quiet 2-core machine)
#   bash run_all.sh w2         # only lines containing a pattern (several patterns: any of them)
# PEERS_THREADS=1 runs everything on one thread and pins it to one core (taskset -c 1);
# QUIET_WAIT=0 skips the waiting; QUIET_STRICT=1 skips a run when the machine did not get quiet;
# PEERS_MAX_S bounds each run (default 180 s, >= 2 epochs).
set -u
cd "$(dirname "$0")"
PY=${PY:-${PEERS_VENV:-/tmp/peers-venv}/bin/python}
QUIET_WAIT=${QUIET_WAIT:-120}
mkdir -p results logs
RUNS=(
  "torch_bench.py w1 --variant posted"
  "keras_bench.py w1"
  "torch_bench.py w1 --variant best"
  "torch_bench.py w1 --variant compile"
  "jax_bench.py w1 --variant step"
  "jax_bench.py w1 --variant scan"
  "torch_bench.py w2 --variant posted"
  "torch_bench.py w2 --variant best"
  "torch_bench.py w2 --variant compile"
  "keras_bench.py w2"
  "keras_bench.py w2 --jit"
  "jax_bench.py w2 --variant step"
  "jax_bench.py w2 --variant scan"
  "torch_bench.py w3 --variant posted"
  "torch_bench.py w3 --variant best"
  "torch_bench.py w3 --variant compile"
  "keras_bench.py w3"
  "keras_bench.py w3 --jit"
  "jax_bench.py w3 --variant step"
  "jax_bench.py w3 --variant scan"
)
for r in "${RUNS[@]}"; do
  [[ -n "${EXCLUDE:-}" && "$r" == *"$EXCLUDE"* ]] && continue
  if (($#)); then keep=0; for p in "$@"; do [[ "$r" == *"$p"* ]] && keep=1; done; ((keep)) || continue; fi
  if [[ "$QUIET_WAIT" != 0 ]] && ! $PY common.py wait-quiet "$QUIET_WAIT" && [[ "${QUIET_STRICT:-0}" == 1 ]]; then
    echo "SKIPPED (machine busy): $r"; continue
  fi
  log="logs/$(echo "$r" | tr -c 'a-z0-9' '_' | sed 's/_*$//')_t${PEERS_THREADS:-2}.log"
  PIN=""; [[ "${PEERS_THREADS:-2}" == 1 ]] && PIN="taskset -c 1"
  echo "== $PIN $r  (threads ${PEERS_THREADS:-2}, log: $log)"
  $PIN $PY $r > "$log" 2>&1 || { echo "FAILED: $r"; tail -5 "$log"; }
  grep -E '"(steps_per_s|first_epoch_s|epoch_s_median|test_acc|other_cores_busy)"' "$log" | tr -d '\n'; echo
done
$PY summarize.py
