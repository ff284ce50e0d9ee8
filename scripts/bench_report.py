#!/usr/bin/env python3
"""Helpers of scripts/bench-peers.sh and scripts/gpu-check.sh (standard library only).

  bench_report.py run-ember --out RECORDS --job JOB --threads N --round R -- CMD...
      runs `ember bench --json` (CMD), measures how busy the other processes kept the machine
      meanwhile (as the peers' common.py does), and appends one record to RECORDS.
  bench_report.py table --records RECORDS --commit C --command CMD [--peers-python PY]
      prints a study of the run (scripts/bench-peers.sh writes it to docs/benchmarks/): one
      table per job, every peer's steps/s and ember's ratio to it.
  bench_report.py gpu --out OUT --device DEV --full-epochs N
      prints gpu-check.md from what scripts/gpu-check.sh left in OUT: the GPU-path suite on cuda
      and wgpu, the full fashion-mlp run, ember bench against the PyTorch peers; exit 1 when a
      check failed.
"""
import argparse
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time

JOBS = [("fashion-mlp", "w1"), ("tabular-mlp", "w2"), ("linear-scalar", "w3"), ("fashion-cnn", "w4"),
        ("fashion-mlp-tuned", "w5")]
# The jobs scripts/gpu-check.sh benchmarks on the GPU (the tuned recipe is a CPU row only).
GPU_JOBS = ["fashion-mlp", "tabular-mlp", "linear-scalar", "fashion-cnn"]


def product_flops(batch, widths):
    """fp32 operations of one training step's matrix products for an MLP with these layer
    widths: the forward products, the weight gradients, and the input gradients of every layer
    but the first (the data needs none). The bias, activation and update add under 1 %."""
    pairs = list(zip(widths, widths[1:]))
    forward = sum(2 * batch * i * o for i, o in pairs)
    dx = sum(2 * batch * i * o for i, o in pairs[1:])
    return 2 * forward + dx


def conv_flops(batch, side, blocks):
    """fp32 operations of one training step's convolutions (3x3, padding 1, each followed by a
    2x2 pool) on `side`x`side` images: the forward, the weight gradient, and the input gradient
    of every block but the first, as for the products."""
    total, s = 0, side
    for i, (cin, cout) in enumerate(blocks):
        one = 2 * batch * s * s * cin * cout * 9
        total += 2 * one + (one if i else 0)
        s //= 2
    return total


# The same models and batch sizes as configs/*.toml and bench/peers (linear-scalar: x·w + p·f,
# one product with f as a 41st input).
STEP_FLOPS = {
    "fashion-mlp": product_flops(64, [784, 512, 512, 10]),
    # The same network; its Adam, dropout and schedule add element-wise work, not products.
    "fashion-mlp-tuned": product_flops(64, [784, 512, 512, 10]),
    "tabular-mlp": product_flops(2048, [61, 20, 10, 1]),
    "linear-scalar": product_flops(128, [41, 1]),
    # The convolutions, then the head's products (and its input gradient, which feeds them).
    "fashion-cnn": conv_flops(64, 28, [(1, 32), (32, 64)]) + product_flops(64, [1, 3136, 128, 10]),
}
PEER_NAMES = {
    "torch-posted": "PyTorch as posted (DataLoader, `.item()`)",
    "torch-best": "PyTorch best effort (preloaded, fused optimizer)",
    "torch-best-ftz": "PyTorch best effort + `set_flush_denormal(True)`",
    "torch-compile": "PyTorch best + torch.compile",
    "keras-fit": "Keras `model.fit`",
    "keras-fit-xla": "Keras `model.fit`, XLA",
    "jax-step": "JAX jit step",
    "jax-scan": "JAX jit + lax.scan per epoch",
}


def cpu_busy_s():
    with open("/proc/stat") as f:
        v = [int(t) for t in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def children_cpu_s():
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return c.ru_utime + c.ru_stime


def run_ember(a):
    b0, o0, w0 = cpu_busy_s(), children_cpu_s(), time.perf_counter()
    p = subprocess.run(a.command_line, capture_output=True, text=True)
    wall = time.perf_counter() - w0
    other = max(0.0, ((cpu_busy_s() - b0) - (children_cpu_s() - o0)) / wall)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    if p.returncode != 0:
        sys.exit(p.returncode)
    report = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("{")][-1])
    rec = dict(
        workload=dict(JOBS)[a.job],
        job=a.job,
        variant="ember",
        framework="ember",
        threads=a.threads,
        round=a.round,
        steps_per_s=report["learner"]["steps_per_s"],
        first_epoch_s=report["learner"]["first_epoch_s"],
        bare_steps_per_s=report["bare"]["steps_per_s"],
        wall_over_steps=report["wall_over_steps"],
        valid_accuracy=report["final_valid_accuracy"],
        valid_loss=report["final_valid_loss"],
        epochs_run=report["epochs"],
        other_cores_busy=round(other, 2),
        when=time.strftime("%Y-%m-%d %H:%M:%S"),
        report=report,
    )
    with open(a.out, "a") as f:
        f.write(json.dumps(rec) + "\n")


def fmt_rate(values):
    """'median (min–max)' of a list of steps/s."""
    m = statistics.median(values)
    if len(values) == 1:
        return f"{m:,.0f}"
    return f"{m:,.0f} ({min(values):,.0f}–{max(values):,.0f})"


def machine():
    model = "unknown CPU"
    try:
        for ln in open("/proc/cpuinfo"):
            if ln.startswith("model name"):
                model = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    flags = ""
    try:
        text = open("/proc/cpuinfo").read()
        flags = ", ".join(f for f in ("avx2", "fma", "avx512f", "amx_tile") if f" {f}" in text)
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} vCPU {model} ({flags}), {mem:.0f} GiB, {platform.system()} {platform.release()}"


def versions(records, peers_python):
    out = {}
    for r in records:
        if r["framework"] != "ember" and "version" in r:
            out[r["framework"]] = r["version"]
    try:
        rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        rustc = "rustc ?"
    ember = next((r["report"] for r in records if r["framework"] == "ember"), None)
    parts = [f"ember {ember_version()} on Burn 0.21.0 (CPU backend: flex), {rustc}"]
    parts += [f"{k} {v}" for k, v in sorted(out.items())]
    if peers_python:
        try:
            py = subprocess.run([peers_python, "--version"], capture_output=True, text=True)
            parts.append(py.stdout.strip())
        except OSError:
            pass
    return ", ".join(parts) if ember or out else "no records"


def ember_version():
    for ln in open(os.path.join(os.path.dirname(__file__), "..", "Cargo.toml")):
        if ln.startswith("version"):
            return ln.split('"')[1]
    return "?"


def bare_median(records):
    return statistics.median([r["bare_steps_per_s"] for r in records])


def gflops(job, steps_per_s):
    return steps_per_s * STEP_FLOPS[job] / 1e9


def peak_share(job, steps_per_s, threads, a):
    """'S %': the share of `threads` cores' measured peak that a rate of `job`'s steps is."""
    return f"{100 * gflops(job, steps_per_s) / (a.peak_gflops * threads):.2g} %"


def of_peak(job, steps_per_s, threads, a):
    """' (G GFLOP/s, S % of peak)' for a rate of `job`'s steps, or '' without a measured peak."""
    if not a.peak_gflops:
        return ""
    share = peak_share(job, steps_per_s, threads, a)
    return f" ({gflops(job, steps_per_s):.3g} GFLOP/s, {share} of peak)"


def table(a):
    records = [json.loads(ln) for ln in open(a.records) if ln.strip()]
    threads_seen = sorted({r["threads"] for r in records})
    out = []
    w = out.append
    w(f"# ember against PyTorch, Keras and JAX on the CPU ({time.strftime('%Y-%m-%d')}, {a.commit})\n")
    w("Made by `make bench-peers` (`scripts/bench-peers.sh`); every number below comes from one run "
      "of it on this machine, from the records in `bench-out/records.jsonl` (keep them in "
      "`bench/records/MACHINE.jsonl`, and the current figures in BENCHMARKS.md's tables, when "
      "committing this study).\n")
    w(f"- Machine: {machine()}")
    w(f"- Versions: {versions(records, a.peers_python)}")
    w(f"- ember commit: {a.commit}; command: `{a.command}`")
    if a.simd:
        w(f"- SIMD (`ember info`): {a.simd}")
    if a.peak_gflops:
        width = f" at {a.peak_width} width" if a.peak_width else ""
        w(f"- Peak: {a.peak_gflops:.1f} GFLOP/s per core, fp32 FMA{width} (`cargo bench --bench peak`, "
          "pinned to the last core, just before the runs). *of peak* is a job's GFLOP/s (steps/s "
          "times its products' operations per step) over that peak times the threads.")
    w(f"- Date: {time.strftime('%Y-%m-%d')}")
    w("- Method: each run is pinned with `taskset` (1 thread: the last core; 2 threads: both), "
      "ember (`--threads N`) and the peers (`PEERS_THREADS=N`) alike; ember and the peers alternate, "
      "in an order rotated each round, each after waiting for the machine to be quiet. steps/s is "
      "the median over the epochs after the first of one run; a cell is the median over the rounds "
      "(min–max in brackets). ratio = ember's steps/s (through Burn's Learner, as `ember train`) over "
      "the peer's. *first* is the first epoch in seconds (warm-up). *busy* is the most other "
      "processes kept busy (cores) during any of the row's runs.")
    w("- ember trains through its `Learner` exactly as `ember train` does; *bare* is ember's own step "
      "loop (forward, backward, optimizer step) for comparison. Peer scripts: `bench/peers/` "
      "(README there); same model, loss, optimizer, batch size and data.\n")

    for job, wl in JOBS:
        rows = [r for r in records if r["workload"] == wl]
        if not rows:
            continue
        w(f"## {job} ({wl})\n")
        peak_col = " | of peak" if a.peak_gflops else ""
        head = "| | " + " | ".join(
            f"{t} thr steps/s{peak_col} | ember ratio | first s | busy" for t in threads_seen) + " |"
        w(head)
        w("|---|" + ("---|" * (4 + bool(peak_col))) * len(threads_seen))
        ember = {t: [r for r in rows if r["framework"] == "ember" and r["threads"] == t]
                 for t in threads_seen}
        ember_med = {t: statistics.median([r["steps_per_s"] for r in ember[t]]) if ember[t] else None
                     for t in threads_seen}
        variants = ["ember"] + [v for v in PEER_NAMES if any(r["variant"] == v for r in rows)]
        best = {}
        for v in variants:
            cells = []
            for t in threads_seen:
                rs = [r for r in rows if r["variant"] == v and r["threads"] == t]
                if not rs:
                    cells.append(" | ".join(["–"] * (4 + bool(peak_col))))
                    continue
                sps = [r["steps_per_s"] for r in rs]
                med = statistics.median(sps)
                if v != "ember" and med > best.get(t, (0.0, ""))[0]:
                    best[t] = (med, v)
                ratio = "" if v == "ember" or not ember_med[t] else f"**{ember_med[t] / med:.2f}x**"
                first = statistics.median([r["first_epoch_s"] for r in rs])
                busy = max(r.get("other_cores_busy", 0) for r in rs)
                share = f" | {peak_share(job, med, t, a)}" if peak_col else ""
                cells.append(f"{fmt_rate(sps)}{share} | {ratio} | {first:.2f} | {busy:.2f}")
            name = "**ember** (Learner)" if v == "ember" else PEER_NAMES[v]
            w(f"| {name} | " + " | ".join(cells) + " |")
        cells = []
        for t in threads_seen:
            rs = ember[t]
            if rs:
                bare = [r["bare_steps_per_s"] for r in rs]
                share = f" | {peak_share(job, statistics.median(bare), t, a)}" if peak_col else ""
                cells.append(f"{fmt_rate(bare)}{share} | | | ")
            else:
                cells.append("–" + " |" * (3 + bool(peak_col)) + " ")
        w("| ember bare step loop | " + " | ".join(cells) + " |")
        w("")
        for t in threads_seen:
            if ember[t] and t in best:
                bsps, bname = best[t]
                acc = [r["valid_accuracy"] for r in ember[t] if r.get("valid_accuracy") is not None]
                loss = statistics.median([r["valid_loss"] for r in ember[t]])
                wos = statistics.median([r["wall_over_steps"] for r in ember[t]])
                accs = f", valid accuracy {100 * statistics.median(acc):.2f} %" if acc else ""
                w(f"- {t} thread(s): ember {ember_med[t]:,.0f} steps/s{of_peak(job, ember_med[t], t, a)} "
                  f"vs best peer {PEER_NAMES[bname]} {bsps:,.0f}{of_peak(job, bsps, t, a)}: "
                  f"**{ember_med[t] / bsps:.2f}x**. ember's run: valid loss {loss:.4f}{accs} "
                  f"after {ember[t][0]['epochs_run']} epochs; wall time of the bench's `ember train` / "
                  f"(steps / steps/s) = {wos:.2f} (short run: start-up weighs more than in a full one).")
        known = [t for t in threads_seen if ember_med[t]]
        for t in known[1:]:
            w(f"- {t} threads against {known[0]}: ember's median steps/s is "
              f"**{ember_med[t] / ember_med[known[0]]:.2f}x**, bare loop "
              f"{bare_median(ember[t]) / bare_median(ember[known[0]]):.2f}x.")
        w("")
    print("\n".join(out))


def summary(path):
    try:
        return json.load(open(os.path.join(path, "summary.json")))
    except (OSError, ValueError):
        return None


SUITE_DEVICES = ("cuda", "wgpu")


def suite_row(out, dev, info):
    """One row of the GPU-path suite table, from suite-DEV.json and suite-DEV.log that
    scripts/gpu-check.sh writes; returns (cells, failed)."""
    prefix = f"{dev}:0: "
    adapter = next((ln[len(prefix):] for ln in info.splitlines() if ln.startswith(prefix)), "–")
    adapter = adapter.replace("|", "\\|")
    try:
        st = json.load(open(os.path.join(out, f"suite-{dev}.json")))
    except (OSError, ValueError):
        st = None
    try:
        log = open(os.path.join(out, f"suite-{dev}.log"), errors="replace").read()
    except OSError:
        log = ""
    secs = f"{st['seconds']:.1f} s" if st and st.get("seconds") is not None else "–"
    if st is None:
        # The CUDA suite always runs on the GPU; a missing wgpu state only means it was not run.
        return [dev, adapter, "**not run** (no suite-%s.json)" % dev if dev == "cuda" else
                "not run (no suite-wgpu.json)", "–", "–", secs], dev == "cuda"
    if st["state"] == "not run":
        return [dev, adapter, f"not run: {st.get('reason') or '?'}", "–", "–", secs], dev == "cuda"
    if st["state"] == "listed":
        m = re.search(r"^(\d+) tests?, \d+ benchmarks?", log, re.M)
        n = m.group(1) if m else "?"
        ok = st["rc"] == 0 and m is not None
        result = f"listed only: {n} tests" if ok else f"**--list failed** (exit status {st['rc']})"
        return [dev, adapter, result, "–", "–", secs], not ok
    results = re.findall(r"^test result: (\w+)\. (\d+) passed; (\d+) failed;", log, re.M)
    if not results:
        why = (f"cut off after {st.get('seconds') or 0:.0f} s" if st["rc"] in (124, 137)
               else f"exit status {st['rc']}")
        return [dev, adapter, f"**no test result** ({why}; see suite-{dev}.log)", "–", "–", secs], True
    word, passed, failed = results[-1]
    ok = st["rc"] == 0 and word == "ok" and int(failed) == 0
    result = "ok" if ok else f"**FAILED** (exit status {st['rc']}; see suite-{dev}.log)"
    return [dev, adapter, result, passed, failed, secs], not ok


def cnn_full(out, dev, w, failed):
    """Section 2's second run: configs/fashion-cnn.toml trained in full, and its test accuracy
    (`ember eval --split test`, which gpu-check.sh writes to fashion-cnn-test.json)."""
    full = summary(os.path.join(out, "runs", f"fashion-cnn-full-{dev}"))
    w(f"\n## 2b. fashion-cnn on {dev}\n")
    path = os.path.join(out, "fashion-cnn-test.json")
    test = json.load(open(path)) if os.path.exists(path) and os.path.getsize(path) else None
    if full and full["status"] == "complete" and test:
        w(f"{full['epochs_done']} epochs: train {full['train_seconds']:.2f} s, wall "
          f"{full['wall_seconds']:.2f} s, {full['steps_per_s']:,.0f} steps/s, valid accuracy "
          f"{100 * full['final_metrics']['valid_accuracy']:.2f} %, test accuracy "
          f"{100 * test['accuracy']:.2f} % (CPU, seeds 1-3: 92.6 % and up, docs/images.md)")
    else:
        failed.append("fashion-cnn full run")
        w("**did not complete** (see steps.log)")


NOT_IN_PARTS = "not run in this call (gpu-check.sh's PARTS left it out)"


def gpu(a):
    """The report of scripts/gpu-check.sh; a part that PARTS left out is not a failure."""
    out, dev, parts = a.out, a.device, set(a.parts.split())
    lines, failed = [], []
    w = lines.append
    info = open(os.path.join(out, "info.txt")).read().strip() if os.path.exists(
        os.path.join(out, "info.txt")) else "?"
    dry = dev == "cpu"
    w(f"# gpu-check{' --dry-run' if dry else ''} on {dev} ({time.strftime('%Y-%m-%d %H:%M')})\n")
    w("```\n" + info + "\n```\n")
    w("## 1. GPU-path suite (tests/gpu_path.rs against this ember)\n")
    if dry:
        w("Dry run: the suite's test binary is only listed (CI runs the suite through `make test`).\n")
    w("| device | adapter | result | passed | failed | time |")
    w("|---|---|---|---|---|---|")
    if "suite" not in parts:
        w(f"| – | – | {NOT_IN_PARTS} | – | – | – |")
    else:
        for d in SUITE_DEVICES:
            cells, bad = suite_row(out, d, info)
            if bad:
                failed.append(f"GPU-path suite on {d}")
            w("| " + " | ".join(cells) + " |")
    full = summary(os.path.join(out, "runs", f"fashion-mlp-full-{dev}"))
    w(f"\n## 2. fashion-mlp, {a.full_epochs} epochs on {dev}\n")
    if "train" not in parts:
        w(NOT_IN_PARTS)
    elif full and full["status"] == "complete":
        acc = full["final_metrics"]["valid_accuracy"]
        goal = full["train_seconds"] <= 3.0 or dev == "cpu"
        w(f"train {full['train_seconds']:.2f} s (goal on an H200: 3 s or less: "
          f"{'met' if goal else '**not met**'}), wall {full['wall_seconds']:.2f} s, "
          f"{full['steps_per_s']:,.0f} steps/s, valid accuracy {100 * acc:.2f} %")
    else:
        failed.append("fashion-mlp full run")
        w("**did not complete** (see steps.log)")
    if "train" in parts:
        cnn_full(out, dev, w, failed)
    else:
        w(f"\n## 2b. fashion-cnn on {dev}\n\n{NOT_IN_PARTS}")
    w(f"\n## 3. Speed on {dev}: ember against PyTorch (steps/s, median after the first epoch)\n")
    bench = by_job(os.path.join(out, "bench.jsonl"), "bench" in parts)
    composed = by_job(os.path.join(out, "bench-composed.jsonl"), "bench" in parts)
    torch_r = {}
    path = os.path.join(out, "torch.jsonl")
    for ln in open(path) if "peers" in parts and os.path.exists(path) else []:
        r = json.loads(ln)
        torch_r[(r["job"], r["variant"])] = r
    if "bench" in parts or "peers" in parts:
        speed_rows(bench, torch_r, parts, w, failed)
        kernel_rows(bench, composed, w)
    else:
        w(NOT_IN_PARTS)
    if "bench" in parts:
        replica_section(out, dev, w, failed)
    else:
        w(f"\n## 4. Replicas on {dev}\n\n{NOT_IN_PARTS}")
    ran = ", ".join(sorted(parts))
    w("\n" + (f"All checks of the parts run ({ran}) passed." if not failed else "FAILED: " + ", ".join(failed)))
    print("\n".join(lines))
    sys.exit(1 if failed else 0)


def by_job(path, wanted):
    """The bench records of a JSONL file, by job; none where the part did not run."""
    records = {}
    for ln in open(path) if wanted and os.path.exists(path) else []:
        r = json.loads(ln)
        records[r["job"]] = r
    return records


def kernel_rows(bench, composed, w):
    """ember's GPU kernels against Burn's compositions of the same operations, a row per job."""
    if not composed:
        return
    w("\nember's GPU kernels against Burn's compositions (`EMBER_GPU_KERNELS=0`), steps/s through "
      "the Learner:\n")
    w("| job | ember's kernels | Burn's compositions | kernels / compositions |")
    w("|---|---|---|---|")
    for job, c in composed.items():
        b = bench.get(job)
        k, o = (b["learner"]["steps_per_s"] if b else None), c["learner"]["steps_per_s"]
        ratio = f"{k / o:.2f}x" if k else "–"
        w(f"| {job} | {format(k, ',.0f') if k else '–'} | {o:,.0f} | {ratio} |")


def speed_rows(bench, torch_r, parts, w, failed):
    """Section 3's table: ember's bench records against PyTorch's, a row per job."""
    w("| job | ember (Learner) | ember bare loop | ember first epoch s | torch eager | torch CUDA graphs "
      "| ember / best torch |")
    w("|---|---|---|---|---|---|---|")
    for job in GPU_JOBS:
        b = bench.get(job)
        te, tg = torch_r.get((job, "torch-best")), torch_r.get((job, "torch-graphs"))
        peers = [r["steps_per_s"] for r in (te, tg) if r]
        ratio = f"**{b['learner']['steps_per_s'] / max(peers):.2f}x**" if b and peers else "–"
        if b is None and "bench" in parts:
            failed.append(f"bench {job}")
        cell = lambda r: f"{r['steps_per_s']:,.0f}" if r else "–"  # noqa: E731
        w(f"| {job} | {b and format(b['learner']['steps_per_s'], ',.0f') or '–'} | "
          f"{b and format(b['bare']['steps_per_s'], ',.0f') or '–'} | "
          f"{b and format(b['learner']['first_epoch_s'], '.2f') or '–'} | {cell(te)} | {cell(tg)} | {ratio} |")


def replica_section(out, dev, w, failed):
    """Section 4: K seeds of fashion-mlp as replicas against K processes (ember bench --replicas)."""
    path = os.path.join(out, "replicas.jsonl")
    records = [json.loads(ln) for ln in open(path)] if os.path.exists(path) else []
    if not records:
        failed.append("bench fashion-mlp --replicas")
        w(f"\n## 4. Replicas on {dev}\n\n**no result** (see steps.log)")
        return
    r = records[0]
    w(f"\n## 4. Replicas on {dev}: {r['replicas']} seeds of fashion-mlp, {r['epochs']} epoch, "
      "wall time (`ember bench --replicas`)\n")
    w("| way | wall | x one run |")
    w("|---|---|---|")
    one = r["seconds"][0]
    for way, s in zip(["one run", "replicas", "2 processes at a time", "one after another"], r["seconds"]):
        w(f"| {way} | {s:.2f} s | {s / one:.2f} |")
    if dev != "cpu":
        ratio = r["seconds"][1] / one
        w(f"\nGoal on a GPU: replicas in at most 2x one run: {'met' if ratio <= 2 else '**not met**'} "
          f"({ratio:.2f}x).")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="action", required=True)
    r = sub.add_parser("run-ember")
    r.add_argument("--out", required=True)
    r.add_argument("--job", required=True)
    r.add_argument("--threads", type=int, required=True)
    r.add_argument("--round", type=int, required=True)
    r.add_argument("command_line", nargs=argparse.REMAINDER)
    t = sub.add_parser("table")
    t.add_argument("--records", required=True)
    t.add_argument("--commit", default="unknown")
    t.add_argument("--command", default="make bench-peers")
    t.add_argument("--peers-python", default=None)
    t.add_argument("--simd", default=None, help="ember info's `cpu simd` line, less its label")
    t.add_argument("--peak-width", default=None, help="the peak benchmark's width: avx512 or avx2")
    t.add_argument("--peak-gflops", type=float, default=None,
                   help="the fp32 peak of one core, from `cargo bench --bench peak`")
    g = sub.add_parser("gpu")
    g.add_argument("--out", required=True)
    g.add_argument("--device", required=True)
    g.add_argument("--full-epochs", type=int, required=True)
    g.add_argument("--parts", default="suite train bench peers", help="the parts gpu-check.sh ran")
    a = p.parse_args()
    if a.action == "gpu":
        gpu(a)
    elif a.action == "run-ember":
        if a.command_line[:1] == ["--"]:
            a.command_line = a.command_line[1:]
        run_ember(a)
    else:
        table(a)


if __name__ == "__main__":
    main()
