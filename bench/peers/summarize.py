"""Turns results/raw.jsonl into results/table.md (one row per run, reruns included).

  python summarize.py      # or PEERS_RESULTS=/some/records.jsonl: reads that, writes table.md beside it
Steady figures use only "quiet" epochs (other processes < 0.3 cores during that epoch) when a
run has any (quiet: other processes left our threads' cores free, i.e. used < 2 - threads + 0.3
cores); a run is marked NOISY when fewer than a third of its epochs 2..N were quiet.
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
# The same record file common.py appends to.
RESULTS = os.environ.get("PEERS_RESULTS", os.path.join(HERE, "results", "raw.jsonl"))
ORDER = ["torch-posted", "torch-best", "torch-compile", "keras-fit", "keras-fit-xla", "jax-step", "jax-scan"]
LABEL = {"torch-posted": "a", "torch-best": "b", "torch-compile": "b+compile", "keras-fit": "c",
         "keras-fit-xla": "c+XLA", "jax-step": "d (jit step)", "jax-scan": "d (jit+scan)"}


def main():
    rows = [json.loads(line) for line in open(RESULTS) if line.strip()]
    rows.sort(key=lambda r: (r["workload"], ORDER.index(r["variant"]) if r["variant"] in ORDER else 99, r["when"]))
    out = ["| workload | variant | version | threads | epochs run / orig | steps/epoch | first epoch s "
           "| steady epoch s (median) | steps/s | eval s/epoch | test acc | quiet epochs | other procs (cores, avg) | when |",
           "|" + "---|" * 14]
    for r in rows:
        n_steady = max(1, r["epochs_run"] - 1)
        n_quiet = r["steady_epochs_used"] if r["steady_from"] == "quiet epochs" else 0
        noisy = n_quiet < max(1, n_steady // 3)
        out.append("| {w} | {v} | {ver} | {th} | {e} / {oe} | {spe} | {f:.3f} | {m:.4f} | {sps:.0f} | {ev} | {acc} | {q}/{ns} | {o:.2f}{n} | {when} |".format(
            w=r["workload"].upper(), v=f'{LABEL.get(r["variant"], "")} {r["variant"]}', ver=r["version"],
            th=r["threads"], e=r["epochs_run"], oe=r["orig_epochs"], spe=r["steps_per_epoch"],
            f=r["first_epoch_s"], m=r["epoch_s_median"], sps=r["steps_per_s"],
            ev="" if r.get("eval_s_median") is None else f'{r["eval_s_median"]:.3f}',
            acc=r.get("test_acc", ""), q=n_quiet, ns=n_steady, o=r["other_cores_busy"], n=" NOISY" if noisy else "", when=r["when"][11:16]))
    path = os.path.join(os.path.dirname(os.path.abspath(RESULTS)), "table.md")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
