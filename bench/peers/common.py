"""Shared helpers for the peer benchmarks: threads, data, timing, result records.

Import this module BEFORE torch / tensorflow / jax so the thread variables are
set before those libraries start their thread pools.
"""
import gzip
import hashlib
import json
import os
import platform
import resource
import statistics
import sys
import time

THREADS = int(os.environ.get("PEERS_THREADS", "2"))
for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_v, str(THREADS))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("PEERS_DATA", "/tmp/peers-data")
FASHION_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                 "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def _fashion_src():
    """Where the four Fashion-MNIST IDX files are (gzipped or not): $PEERS_FASHION, else the
    places `make data` (scripts/get-data.sh) accepts: the repository's datasets/fashion-mnist/,
    then Debian's /usr/share/datasets/fashion-mnist."""
    if os.environ.get("PEERS_FASHION"):
        return os.environ["PEERS_FASHION"]
    dirs = [os.path.join(HERE, "..", "..", "datasets", "fashion-mnist"), "/usr/share/datasets/fashion-mnist"]
    for d in dirs:
        if all(os.path.exists(os.path.join(d, n + ".gz")) or os.path.exists(os.path.join(d, n))
               for n in FASHION_FILES):
            return os.path.normpath(d)
    return dirs[-1]


FASHION_SRC = _fashion_src()
RESULTS = os.environ.get("PEERS_RESULTS", os.path.join(HERE, "results", "raw.jsonl"))

# ---------------------------------------------------------------- workloads
# name: (batch, epochs in the original post, default epochs we run)
WORKLOADS = {
    "w1": dict(batch=64, orig_epochs=20),
    "w2": dict(batch=2048, orig_epochs=200),
    "w3": dict(batch=128, orig_epochs=300),
    "w4": dict(batch=64, orig_epochs=15),  # configs/fashion-cnn.toml
    "w5": dict(batch=64, orig_epochs=20),  # configs/fashion-mlp-tuned.toml
}
# W5 trains on 54,000 of the 60,000 training images, as the tuned recipe's valid_fraction 0.1.
W5_TRAIN_ROWS = 54_000


# ------------------------------------------------------------ Fashion-MNIST
def _read_idx_bytes(name):
    """The bytes of FASHION_SRC/name, from name.gz when there is one, else the plain file."""
    gz = os.path.join(FASHION_SRC, name + ".gz")
    if os.path.exists(gz):
        with gzip.open(gz, "rb") as f:
            return f.read()
    with open(os.path.join(FASHION_SRC, name), "rb") as f:
        return f.read()


def _idx(name, offset):
    return np.frombuffer(_read_idx_bytes(name), dtype=np.uint8, offset=offset)


def fashion():
    """(x_train uint8 [60000,28,28], y_train uint8, x_test, y_test) from the IDX files in FASHION_SRC."""
    xtr = _idx("train-images-idx3-ubyte", 16).reshape(-1, 28, 28)
    ytr = _idx("train-labels-idx1-ubyte", 8)
    xte = _idx("t10k-images-idx3-ubyte", 16).reshape(-1, 28, 28)
    yte = _idx("t10k-labels-idx1-ubyte", 8)
    return xtr, ytr, xte, yte


def fashion_torchvision_root():
    """Lay the raw (un-gzipped) idx files out the way torchvision.datasets.FashionMNIST
    expects them (ROOT/FashionMNIST/raw/...), so the 'as posted' variant can use the
    real torchvision Dataset + ToTensor without downloading anything."""
    raw = os.path.join(DATA, "FashionMNIST", "raw")
    os.makedirs(raw, exist_ok=True)
    for n in FASHION_FILES:
        dst = os.path.join(raw, n)
        if not os.path.exists(dst):
            with open(dst + ".tmp", "wb") as g:
                g.write(_read_idx_bytes(n))
            os.replace(dst + ".tmp", dst)
    return DATA


# --------------------------------------------------------- W2 synthetic data
W2_N, W2_D = 200_000, 61


def w2_rule():
    """Deterministic synthetic binary-classification set (reproducible outside numpy).

    RNG: numpy legacy RandomState(0) == MT19937 seeded with init_genrand(0);
    each uniform double u is genrand_res53: a=next_u32()>>5, b=next_u32()>>6,
    u=(a*67108864.0+b)/9007199254740992.0.  Draw order (all float64):
      1. U: 200000*61 doubles, row-major (row i, column j)
      2. w: 61 doubles
      3. e: 200000 doubles
    Features:  x[i,j] = float32((2*U[i,j] - 1) * sqrt(3))     (uniform, unit variance)
    Label, computed in float64 from the float32 features xf = float64(x):
      z = 0; for j in 0..61: z = z + xf[j] * (2*w[j] - 1)          (sequential sum)
      z = z + 2*xf[0]*xf[1] + 2*(xf[2]*xf[2] - 1) + 3*(e[i] - 0.5)
      y[i] = 1.0 if z > 0 else 0.0   (float32, shape [200000, 1])
    """
    rs = np.random.RandomState(0)
    u = rs.random_sample((W2_N, W2_D))
    w = rs.random_sample(W2_D) * 2.0 - 1.0
    e = rs.random_sample(W2_N)
    x = ((u * 2.0 - 1.0) * np.sqrt(3.0)).astype(np.float32)
    xf = x.astype(np.float64)
    z = np.zeros(W2_N)
    for j in range(W2_D):  # explicit sequential order so other languages get identical bits
        z = z + xf[:, j] * w[j]
    z = z + 2.0 * xf[:, 0] * xf[:, 1] + 2.0 * (xf[:, 2] * xf[:, 2] - 1.0) + 3.0 * (e - 0.5)
    y = (z > 0).astype(np.float32).reshape(-1, 1)
    return x, y


def w2_data():
    """Loads /tmp/peers-data/w2_x.npy, w2_y.npy (creating them on first use)."""
    os.makedirs(DATA, exist_ok=True)
    px, py = os.path.join(DATA, "w2_x.npy"), os.path.join(DATA, "w2_y.npy")
    if not (os.path.exists(px) and os.path.exists(py)):
        x, y = w2_rule()
        np.save(px, x)
        np.save(py, y)
    return np.load(px), np.load(py)


def w3_data():
    """Exactly the post's tensors, as float32: xx=arange(40*640*60).view(38400,40),
    ff=arange(38400).view(38400,1), out=arange(38400).view(38400,1)."""
    xx = np.arange(40 * 640 * 60, dtype=np.float32).reshape(38400, 40)
    ff = np.arange(38400, dtype=np.float32).reshape(38400, 1)
    out = np.arange(38400, dtype=np.float32).reshape(38400, 1)
    return xx, ff, out


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ------------------------------------------------------------------ timing
def _cpu_busy_s():
    """Seconds of CPU (all cores) spent busy machine-wide, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(t) for t in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime


class Meter:
    """Wall-clock per-epoch timer plus a noise probe: how many cores other processes
    kept busy (from /proc/stat minus our own CPU time), for the whole run and per epoch."""

    # an epoch is "quiet" when other processes left our THREADS cores free: they used less than
    # (cores - THREADS) + 0.3 cores (0.3 with 2 threads on 2 cores; 1.3 with 1 pinned thread)
    QUIET = max(0, (os.cpu_count() or 2) - THREADS) + 0.3

    def __init__(self):
        self.epoch_s, self.eval_s, self.epoch_other = [], [], []
        self._busy0, self._own0, self._wall0 = _cpu_busy_s(), _own_cpu_s(), time.perf_counter()
        self.load0 = os.getloadavg()[0]

    def begin(self):
        self._e = (_cpu_busy_s(), _own_cpu_s(), time.perf_counter())

    def end(self):
        b0, o0, w0 = self._e
        dt = time.perf_counter() - w0
        self.epoch_s.append(dt)
        other = (_cpu_busy_s() - b0) - (_own_cpu_s() - o0)
        self.epoch_other.append(max(0.0, other / dt) if dt > 0 else 0.0)
        return dt

    def over_budget(self):
        """True once the run has used PEERS_MAX_S seconds (default 180): the loops then stop
        after the current epoch (at least 2 epochs always run), so a run slowed down by
        other processes cannot take forever. Per-epoch figures stay valid."""
        return (len(self.epoch_s) >= 2
                and time.perf_counter() - self._wall0 > float(os.environ.get("PEERS_MAX_S", "180")))

    def other_cores(self):
        wall = time.perf_counter() - self._wall0
        other = (_cpu_busy_s() - self._busy0) - (_own_cpu_s() - self._own0)
        return max(0.0, other / wall) if wall > 0 else 0.0


def report(workload, variant, framework, version, meter, steps_per_epoch, extra=None):
    ep = meter.epoch_s
    idx = list(range(1, len(ep))) or [0]  # steady state: epochs 2..N
    quiet = [i for i in idx if meter.epoch_other[i] < Meter.QUIET]
    steady = [ep[i] for i in (quiet or idx)]  # quiet epochs only, when there are any
    med = statistics.median(steady)
    rec = dict(
        workload=workload,
        variant=variant,
        framework=framework,
        version=version,
        threads=THREADS,
        affinity=sorted(os.sched_getaffinity(0)),
        batch=WORKLOADS[workload]["batch"],
        epochs_run=len(ep),
        orig_epochs=WORKLOADS[workload]["orig_epochs"],
        steps_per_epoch=steps_per_epoch,
        first_epoch_s=round(ep[0], 4),
        epoch_s_median=round(med, 4),
        epoch_s_min=round(min(steady), 4),
        epoch_s_mean=round(statistics.mean(steady), 4),
        steps_per_s=round(steps_per_epoch / med, 1),
        eval_s_median=round(statistics.median(meter.eval_s), 4) if meter.eval_s else None,
        steady_epochs_used=len(steady),
        steady_from="quiet epochs" if quiet else "all epochs (none quiet)",
        epoch_s_all=[round(t, 4) for t in ep],
        epoch_other_cores=[round(o, 2) for o in meter.epoch_other],
        other_cores_busy=round(meter.other_cores(), 2),
        noisy_epochs=sum(o >= Meter.QUIET for o in meter.epoch_other[1:]),
        loadavg_start=round(meter.load0, 2),
        python=platform.python_version(),
        when=time.strftime("%Y-%m-%d %H:%M:%S"),
    )
    if extra:
        rec.update(extra)
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "a") as f:
        f.write(json.dumps(rec) + "\n")
    print(json.dumps(rec, indent=1))
    sys.stdout.flush()
    return rec


def wait_quiet(max_wait_s=600.0, threshold=0.3, window_s=3.0):
    """Block until other processes use < threshold cores over window_s (or max_wait_s passes).
    Returns the last measured figure."""
    t_end = time.time() + max_wait_s
    while True:
        b0, o0, w0 = _cpu_busy_s(), _own_cpu_s(), time.perf_counter()
        time.sleep(window_s)
        other = ((_cpu_busy_s() - b0) - (_own_cpu_s() - o0)) / (time.perf_counter() - w0)
        if other < threshold or time.time() > t_end:
            return other


if __name__ == "__main__":  # python common.py wait-quiet [max_wait_s] | make-data
    if sys.argv[1:2] == ["wait-quiet"]:
        t0 = time.time()
        o = wait_quiet(float(sys.argv[2]) if len(sys.argv) > 2 else 600.0)
        print(f"other processes busy: {o:.2f} cores (waited {time.time() - t0:.0f}s)", flush=True)
        sys.exit(0 if o < 0.3 else 3)
    elif sys.argv[1:2] == ["make-data"]:
        x, y = w2_data()
        fashion_torchvision_root()
        for n in ("w2_x.npy", "w2_y.npy"):
            print(n, sha256(os.path.join(DATA, n)))
        print("w2: x", x.shape, x.dtype, "y mean", float(y.mean()))
