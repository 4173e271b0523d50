"""ToPS throughput and accuracy against its baselines on real streams (STR21 §6, App. F).

Run from the repository root::

    PYTHONPATH=src python benchmarks/stream.py            # throughput + comparison
    PYTHONPATH=src python benchmarks/stream.py --quick    # fewer values / repetitions

Throughput: values per second through ``ToPS.update`` (validation, threshold phase,
clipping, the hierarchy's noise and bottom-up pass) with queries at a realistic cadence
(after every batch: one range sum with its standard error and the current value, which
forces the online consistency).

Accuracy: ToPS, PAK, NM-E, H^c_16 and flat Laplace on the POS, retail and DNS streams,
200 random ranges per repetition (the same ranges for every method), errors against the
unclipped truth. Public bounds B as in the authors' code (POS 1638, retail 16470, DNS
google 500). The first m = 65,536 values choose theta (retail: 16,384, since it has only
88,162 values); n is the number of values that remain.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from ldpkit.stream import HC16, NME, PAK, FlatLaplace, ToPS, evaluate_ranges, random_ranges

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "streams.npz"
BOUNDS = {"pos": 1638, "retail": 16470, "dns_google": 500}
THRESHOLD_SIZE = {"pos": 65_536, "retail": 16_384, "dns_google": 65_536}
METHODS = {"ToPS": ToPS, "PAK": PAK, "NM-E": NME, "Hc16": HC16, "flat": FlatLaplace}


def load_streams() -> dict[str, np.ndarray]:
    for path in (DATA, Path("/work/shared/data/streams.npz")):
        if path.is_file():
            with np.load(path, allow_pickle=False) as data:
                return {k: data[k].astype(np.float64) for k in data.files}
    raise SystemExit("streams.npz not found")


def throughput(total: int, batch: int, query_every: int | None, repeat: int = 3) -> float:
    values = np.minimum(np.random.default_rng(0).geometric(0.1, total), 1000).astype(np.float64)
    batches = [values[i : i + batch] for i in range(0, total, batch)]
    best = np.inf
    for r in range(repeat):
        tops = ToPS(1.0, 1000, threshold_size=65_536, length=total - 65_536, rng=r)
        start = time.perf_counter()
        for k, b in enumerate(batches):
            tops.update(b)
            if query_every and (k + 1) % query_every == 0 and tops.n_released > 0:
                n = tops.n_released
                tops.range_sum(n // 3, n)
                tops.value_at()
        best = min(best, time.perf_counter() - start)
    return total / best


def run_throughput(quick: bool) -> list[dict]:
    total = 2**21 if quick else 2**23
    rows = []
    for batch, every, label in [
        (2**20, None, "batches of 2^20, no queries"),
        (2**16, 1, "batches of 2^16, query after each"),
        (2**14, 1, "batches of 2^14, query after each"),
        (2**12, 4, "batches of 2^12, query every 2^14 values"),
        (2**10, 16, "batches of 2^10, query every 2^14 values"),
    ]:
        rate = throughput(total, batch, every, repeat=2 if quick else 3)
        rows.append({"setting": label, "values": total, "values_per_s": rate})
        print(f"{label:45s} {rate / 1e6:8.2f} M values/s")
    return rows


def run_accuracy(epsilons: list[float], reps: int) -> list[dict]:
    streams = load_streams()
    records = []
    for name in ("pos", "retail", "dns_google"):
        values = streams[name]
        m = THRESHOLD_SIZE[name]
        released = values[m:]
        n = released.size
        for eps in epsilons:
            for rep in range(reps):
                ranges = random_ranges(n, 200, rng=10_000 + rep)
                for label, cls in METHODS.items():
                    est = cls(eps, BOUNDS[name], threshold_size=m, length=n, rng=1000 * rep + 7)
                    est.update(values)
                    errs = evaluate_ranges(est, released, ranges=ranges)
                    records.append(
                        {"stream": name, "epsilon": eps, "rep": rep, "method": label,
                         "threshold": est.threshold, **errs}
                    )
    return records


def summarize(records: list[dict]) -> list[dict]:
    import pandas as pd

    df = pd.DataFrame(records)
    table = df.groupby(["stream", "epsilon", "method"], sort=False)[
        ["threshold", "mae", "mse", "mmae", "mmse"]
    ].mean().reset_index()
    with pd.option_context("display.width", 140, "display.float_format", "{:.4g}".format):
        print(table.to_string(index=False))
    print()
    for metric in ("mae", "mse", "mmae", "mmse"):
        wins = []
        for (stream, eps), group in table.groupby(["stream", "epsilon"], sort=False):
            best = group.loc[group[metric].idxmin(), "method"]
            wins.append(f"{stream}@{eps}:{best}")
        print(f"best by {metric}: " + ", ".join(wins))
    return table.to_dict(orient="records")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--skip-accuracy", action="store_true")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "stream.json")
    args = parser.parse_args()
    print("== ToPS throughput (epsilon = 1, B = 1000, m = 65,536) ==")
    thr = run_throughput(args.quick)
    out: dict = {"throughput": thr}
    if not args.skip_accuracy:
        reps = args.reps or (2 if args.quick else 5)
        print(f"\n== accuracy on real streams ({reps} repetitions, 200 random ranges each) ==")
        records = run_accuracy([0.1, 0.5, 1.0], reps)
        out["accuracy"] = summarize(records)
        out["records"] = records
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
