"""Throughput of the unary- and histogram-encoding oracles (users per second).

Run: ``PYTHONPATH=src python benchmarks/unary.py [--n 1000000] [--repeat 3] [--threads 2]``.
Prints a table and writes ``benchmarks/results/unary.json``. Timings are the best of
``--repeat`` runs after one warm-up call (which loads or compiles the numba kernels). SUE,
OUE and THE run at ``--n`` users; SHE, whose reports are n x d float64, runs at
``--she-n`` users (a quarter of it at d = 1024), generated and aggregated in chunks whose
Stats are merged.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
import numpy as np

from ldpkit import OUE, SHE, SUE, THE, Stats

#: One uint64 draw per bit is compared with ``probability * 2^64``.
_SCALE = 2.0**64


def usable_cpus() -> int:
    """CPUs this process may run on: the compiled kernels' default thread count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def numpy_reference_bits(
    values: np.ndarray, d: int, p: float, q: float, rng: np.random.Generator, chunk: int = 4096
) -> np.ndarray:
    """Plain-numpy sampler of the unary law: one uniform 64-bit integer per bit.

    Each is compared with the bit's threshold (``p 2^64`` for the true item, ``q 2^64`` for
    the others), packed in chunks of rows so that no n x d matrix of wide values is held.
    """
    hi, lo = (np.uint64(min(int(x * _SCALE), 2**64 - 1)) for x in (p, q))
    out = np.empty((values.shape[0], (d + 7) // 8), dtype=np.uint8)
    for start in range(0, values.shape[0], chunk):
        v = values[start : start + chunk]
        u = rng.integers(0, 2**64 - 1, size=(v.shape[0], d), dtype=np.uint64, endpoint=True)
        thresholds = np.full(u.shape, lo, dtype=np.uint64)
        thresholds[np.arange(v.shape[0]), v] = hi
        out[start : start + chunk] = np.packbits(u < thresholds, axis=1)
    return out


def best_time(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm-up: numba cache load / compilation, page faults
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def she_randomize(she: SHE, values: np.ndarray, chunk: int) -> list:
    return [she.randomize(values[i : i + chunk], rng=i) for i in range(0, values.size, chunk)]


def she_aggregate(she: SHE, parts: list) -> Stats:
    return Stats.empty(she).merge(*[she.aggregate(p) for p in parts])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--she-n", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument(
        "--threads", type=int, default=None, help="kernel threads (default: all CPUs)"
    )
    args = parser.parse_args()
    if args.threads is not None:  # the kernels use the CPUs the process may run on
        os.sched_setaffinity(0, set(range(args.threads)))
    rows: list[dict[str, Any]] = []

    def record(
        mechanism: str, step: str, d: int, n: int, fn: Callable[[], Any], repeat: int
    ) -> None:
        seconds = best_time(fn, repeat)
        rows.append(
            {
                "mechanism": mechanism,
                "step": step,
                "domain_size": d,
                "n": n,
                "seconds": seconds,
                "users_per_s": n / seconds,
            }
        )
        print(
            f"{mechanism:6s} {step:22s} d={d:5d} n={n:9d} {seconds:8.3f} s "
            f"{n / seconds:14,.0f} users/s"
        )

    for d in (64, 1024):
        values = np.random.default_rng(0).integers(0, d, args.n)
        for cls in (SUE, OUE, THE):
            spec = cls(epsilon=args.epsilon, domain_size=d)
            reports = spec.randomize(values, rng=1)
            record(
                cls.__name__,
                "randomize",
                d,
                args.n,
                functools.partial(spec.randomize, values, rng=1),
                args.repeat,
            )
            record(
                cls.__name__,
                "aggregate",
                d,
                args.n,
                functools.partial(spec.aggregate, reports),
                args.repeat,
            )
        # context: the plain-numpy sampler of the same law (one uint64 draw per bit)
        spec = OUE(epsilon=args.epsilon, domain_size=d)
        small = values[: max(1, args.n // 20)]
        record(
            "OUE",
            "randomize (numpy ref)",
            d,
            small.size,
            functools.partial(
                numpy_reference_bits, small, d, spec.p, spec.q, np.random.default_rng(2)
            ),
            1,
        )

        she = SHE(epsilon=args.epsilon, domain_size=d)
        she_values = values[: args.she_n if d <= 64 else max(1, args.she_n // 4)]
        chunk = max(1, (1 << 22) // d)  # ~32 MB of float64 reports per chunk
        parts = she_randomize(she, she_values, chunk)
        record(
            "SHE",
            "randomize (chunked)",
            d,
            she_values.size,
            functools.partial(she_randomize, she, she_values, chunk),
            args.repeat,
        )
        record(
            "SHE",
            "aggregate (chunked)",
            d,
            she_values.size,
            functools.partial(she_aggregate, she, parts),
            args.repeat,
        )

    out = Path(__file__).parent / "results" / "unary.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "epsilon": args.epsilon,
        "threads": usable_cpus(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
    }
    out.write_text(json.dumps({"meta": meta, "results": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
