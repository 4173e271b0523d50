"""ToPS and ToPL throughput and accuracy against their baselines on real streams (STR21 §6, App. F).

Run from the repository root::

    PYTHONPATH=src python benchmarks/stream.py            # throughput + comparison
    PYTHONPATH=src python benchmarks/stream.py --quick    # fewer values / repetitions
    PYTHONPATH=src python benchmarks/stream.py --only topl  # the local-DP half only

Throughput: values per second through ``ToPS.update`` (validation, threshold phase,
clipping, the hierarchy's noise and bottom-up pass) with queries at a realistic cadence
(after every batch: one range sum with its standard error and the current value, which
forces the online consistency).

Accuracy: ToPS, PAK, NM-E, H^c_16 and flat Laplace on the POS, retail and DNS streams,
200 random ranges per stream (the same ranges for every method and repetition), errors
against the unclipped truth. Public bounds B as in the authors' code (POS 1638, retail 16470,
DNS google 500). The first m = 65,536 values choose theta (retail: 16,384, since it has only
88,162 values); n is the number of values that remain. Streams, bounds, methods and queries
are those of ``ldpkit reproduce tops21`` (``ldpkit.experiments.streams``), which runs the full
comparison with error bars and plots.

ToPL (local DP): throughput of the server's ``ingest`` (reports made beforehand by the
simulated devices, not timed), and of ``update`` (device randomization + ingest). Accuracy:
ToPL (corrected objective), ToPL with the authors' objective, SW-only (per-user unbiased
SW estimates, and the EMS mean times the range length), PM and SR on the fixed domain
[0, B], at eps in {0.5, 1, 2, 4}; the baselines see the same n released users (they spend
none on a threshold). "ToPL-oracle" takes theta from the *true* histogram of the first m
values (not private): a diagnostic of how much the Square Wave estimate of f costs.
"SW-EMS-mean" answers (j - i) times the mean of the EMS distribution of all reports.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from ldpkit.experiments.streams import (
    CENTRAL_METHODS,
    LOCAL_METHODS,
    StreamMethod,
    load_case,
    range_truth,
)
from ldpkit.stream import (
    SWOnly,
    ToPL,
    ToPS,
    client_randomize,
    range_errors,
)

#: The paper's three streams (shipped with ldpkit); tops21 adds the flight delays.
STREAMS = ("pos", "retail", "dns")
#: ToPL's comparison here adds SW's distribution-mean reading to the tops21 methods.
TOPL_METHODS = {
    **LOCAL_METHODS,
    "SW-EMS-mean": StreamMethod(SWOnly, {"estimator": "distribution"}, threshold_phase=False),
}


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


def _accuracy(methods: dict, epsilons: list[float], reps: int) -> list[dict]:
    records = []
    for name in STREAMS:
        case = load_case(name, seed=0)
        truth = range_truth(case)
        for eps in epsilons:
            for rep in range(reps):
                for label, method in methods.items():
                    answers = method(case, eps, np.random.default_rng(1000 * rep + 7))
                    errs = range_errors(answers.estimates, truth.sums, truth.starts, truth.stops)
                    records.append(
                        {
                            "stream": name,
                            "epsilon": eps,
                            "rep": rep,
                            "method": label,
                            "threshold": answers.threshold,
                            **errs,
                        }
                    )
    return records


def run_accuracy(epsilons: list[float], reps: int) -> list[dict]:
    return _accuracy(CENTRAL_METHODS, epsilons, reps)


def topl_ingest_throughput(total: int, batch: int, block_size: int, repeat: int = 3) -> float:
    """Reports per second through ``ToPL.ingest`` (threshold fixed; reports made beforehand)."""
    values = np.minimum(np.random.default_rng(0).geometric(0.1, total), 1000).astype(np.float64)
    spec = ToPL(1.0, 1000, threshold=60.0).client_spec()
    reports = client_randomize(spec, values, rng=1)
    batches = [reports[i : i + batch] for i in range(0, total, batch)]
    best = np.inf
    for _ in range(repeat):
        topl = ToPL(1.0, 1000, threshold=60.0, block_size=block_size)
        start = time.perf_counter()
        for b in batches:
            topl.ingest(b)
        best = min(best, time.perf_counter() - start)
    assert topl.n_released == total
    return total / best


def topl_update_throughput(total: int, batch: int, repeat: int = 2) -> float:
    """Users per second through ``ToPL.update``: SW threshold phase (m = 65,536, EMS) +
    clipping + HM randomization on the simulated devices + ingest."""
    values = np.minimum(np.random.default_rng(0).geometric(0.1, total), 1000).astype(np.float64)
    best = np.inf
    for r in range(repeat):
        topl = ToPL(1.0, 1000, threshold_size=65_536, length=total - 65_536, rng=r)
        start = time.perf_counter()
        for i in range(0, total, batch):
            topl.update(values[i : i + batch])
        best = min(best, time.perf_counter() - start)
    return total / best


def run_topl_throughput(quick: bool) -> list[dict]:
    total = 2**21 if quick else 2**23
    rows = []
    for batch, g in [(2**20, 1), (2**16, 1), (2**12, 1), (2**16, 1024), (2**10, 1024)]:
        rate = topl_ingest_throughput(total, batch, g, repeat=2 if quick else 3)
        label = f"ingest, batches of 2^{batch.bit_length() - 1}, block_size {g}"
        rows.append({"setting": label, "reports": total, "reports_per_s": rate})
        print(f"{label:45s} {rate / 1e6:8.2f} M reports/s")
    rate = topl_update_throughput(total, 2**16, repeat=1 if quick else 2)
    label = "update (devices + ingest), batches of 2^16"
    rows.append({"setting": label, "reports": total, "reports_per_s": rate})
    print(f"{label:45s} {rate / 1e6:8.2f} M users/s")
    return rows


def run_topl_accuracy(epsilons: list[float], reps: int) -> list[dict]:
    return _accuracy(TOPL_METHODS, epsilons, reps)


def summarize(records: list[dict]) -> list[dict]:
    import pandas as pd

    df = pd.DataFrame(records)
    table = (
        df.groupby(["stream", "epsilon", "method"], sort=False)[
            ["threshold", "mae", "mse", "mmae", "mmse"]
        ]
        .mean()
        .reset_index()
    )
    with pd.option_context("display.width", 140, "display.float_format", "{:.4g}".format):
        print(table.to_string(index=False))
    print()
    for metric in ("mae", "mse", "mmae", "mmse"):
        wins = []
        for (stream, eps), group in table.groupby(["stream", "epsilon"], sort=False):
            group = group[~group["method"].str.endswith("-oracle")]  # not private
            best = group.loc[group[metric].idxmin(), "method"]
            wins.append(f"{stream}@{eps}:{best}")
        print(f"best by {metric}: " + ", ".join(wins))
    return table.to_dict(orient="records")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--skip-accuracy", action="store_true")
    parser.add_argument("--only", choices=["tops", "topl"], default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out: dict = {}
    reps = args.reps or (2 if args.quick else 5)
    if args.only != "topl":
        print("== ToPS throughput (epsilon = 1, B = 1000, m = 65,536) ==")
        out["throughput"] = run_throughput(args.quick)
        if not args.skip_accuracy:
            print(f"\n== accuracy on real streams ({reps} repetitions, 200 random ranges each) ==")
            records = run_accuracy([0.1, 0.5, 1.0], reps)
            out["accuracy"] = summarize(records)
            out["records"] = records
    if args.only != "tops":
        print("\n== ToPL throughput (epsilon = 1, B = 1000, theta = 60) ==")
        out["topl_throughput"] = run_topl_throughput(args.quick)
        if not args.skip_accuracy:
            print(
                f"\n== ToPL accuracy on real streams ({reps} repetitions, 200 random ranges each) =="
            )
            records = run_topl_accuracy([0.5, 1.0, 2.0, 4.0], reps)
            out["topl_accuracy"] = summarize(records)
            out["topl_records"] = records
    if args.out is None:
        suffix = f"_{args.only}" if args.only else ""
        args.out = Path(__file__).parent / "results" / f"stream{suffix}.json"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
