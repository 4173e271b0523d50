"""Client throughput with the secure default randomness.

``rng=None`` used to mean numpy's PCG64 seeded from the OS; it now means
:func:`ldpkit.secure_generator` (AES-128 in counter mode keyed from OS entropy). This times
``randomize`` of GRR, OUE and OLH at d = 1024 and n = 1e6 both ways in one run:

* ``pcg64``: ``rng=np.random.default_rng(seed)`` (what ``rng=None`` gave before; what a
  seeded simulation still gets);
* ``secure``: ``rng=None`` (the new default; the generator is created inside the call, so
  its ~0.15 s one-off import of randomgen is paid before timing by a warm-up call).

Run: ``python studies/randomness.py [--n 1000000] [--d 1024] [--repeat 3]``. Prints users/s
(best of ``--repeat``) and the ratio, and writes benchmarks/results/randomness.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from ldpkit import GRR, OLH, OUE


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    values = np.random.default_rng(0).integers(0, args.d, args.n)
    rows = []
    print(f"{'mechanism':10} {'pcg64 users/s':>14} {'secure users/s':>15} {'secure/pcg64':>13}")
    for spec in (
        GRR(epsilon=1.0, domain_size=args.d),
        OUE(epsilon=1.0, domain_size=args.d),
        OLH(epsilon=1.0, domain_size=args.d),
    ):
        spec.randomize(values[:1000], rng=None)  # warm-up: kernels compiled, randomgen loaded
        spec.randomize(values[:1000], rng=0)
        seeded = _best(
            lambda s=spec: s.randomize(values, rng=np.random.default_rng(1)), args.repeat
        )
        secure = _best(lambda s=spec: s.randomize(values, rng=None), args.repeat)
        row = {
            "mechanism": spec.name,
            "n": args.n,
            "d": args.d,
            "pcg64_users_per_s": args.n / seeded,
            "secure_users_per_s": args.n / secure,
            "ratio": seeded / secure,
        }
        rows.append(row)
        print(
            f"{spec.name:10} {row['pcg64_users_per_s']:14.3g} {row['secure_users_per_s']:15.3g} "
            f"{row['ratio']:13.2f}"
        )
    out = Path(__file__).parent / "results" / "randomness.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
