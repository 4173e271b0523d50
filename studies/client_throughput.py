"""Client throughput (users per CPU second) of every categorical randomizer, before/after.

ldpkit replaced float coins by exact integer draws (GRR, OLH/BLH, HR/HRR,
SubsetSelection, SignedSubsetSelection, RAPPOR) and made the unary bits (OUE/SUE/THE) come
from the secure generator itself when ``rng=None``. This measures ``randomize`` with
``rng=None`` (secure AES-CTR generator, what a device uses) and with an int seed (PCG64),
in CPU time (``time.process_time``, robust to a loaded machine), for two source trees in
the same run, alternating between them:

    python studies/client_throughput.py --compare OLD_SRC [--repeats 3]

``--measure`` (what the comparison runs in a subprocess per source tree) prints one JSON
line per (mechanism, rng). The ratio new/old is what to read: both sides share the load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

CASES: list[tuple[str, dict[str, Any], int]] = [
    ("GRR", {"epsilon": 1.0, "domain_size": 64}, 400_000),
    ("OLH", {"epsilon": 1.0, "domain_size": 1024}, 400_000),
    ("BLH", {"epsilon": 1.0, "domain_size": 1024}, 400_000),
    ("HadamardResponse", {"epsilon": 1.0, "domain_size": 1024}, 400_000),
    ("HRR", {"epsilon": 1.0, "domain_size": 1024}, 400_000),
    ("SubsetSelection", {"epsilon": 1.0, "domain_size": 1024}, 50_000),
    ("SignedSubsetSelection", {"epsilon": 2.0, "domain_size": 64}, 200_000),
    ("RAPPOR", {"epsilon": 2.0, "domain_size": 128}, 100_000),
    ("OUE", {"epsilon": 1.0, "domain_size": 1024}, 50_000),
    ("SUE", {"epsilon": 1.0, "domain_size": 1024}, 50_000),
    ("THE", {"epsilon": 1.0, "domain_size": 1024}, 50_000),
]


def measure(repeats: int) -> None:
    from ldpkit.spec import mechanism_registry

    registry = mechanism_registry()
    for name, params, n in CASES:
        spec = registry[name](**params)
        d = params["domain_size"] * (2 if name == "SignedSubsetSelection" else 1)
        values = np.random.default_rng(0).integers(0, d, n)
        for label, rng in (("secure", None), ("seeded", 7)):
            spec.randomize(values[:1000], rng=rng)  # warm-up (imports, numba load)
            best = float("inf")
            for _ in range(repeats):
                t0 = time.process_time()
                spec.randomize(values, rng=rng)
                best = min(best, time.process_time() - t0)
            row = {"mechanism": name, "rng": label, "n": n, "users_per_cpu_s": n / best}
            print(json.dumps(row), flush=True)


def _run(src: str, repeats: int) -> list[dict[str, Any]]:
    env = dict(os.environ, PYTHONPATH=src)
    out = subprocess.run(
        [sys.executable, __file__, "--measure", "--repeats", str(repeats)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", action="store_true")
    parser.add_argument("--compare", metavar="OLD_SRC")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2, help="alternations old/new")
    args = parser.parse_args()
    if args.measure:
        measure(args.repeats)
        return
    if not args.compare:
        parser.error("give --compare OLD_SRC (or --measure)")
    new_src = str(Path(__file__).resolve().parents[1] / "src")
    best: dict[tuple[str, str, str], float] = {}
    for _ in range(args.rounds):
        for label, src in (("old", args.compare), ("new", new_src)):
            for row in _run(src, args.repeats):
                key = (label, row["mechanism"], row["rng"])
                best[key] = max(best.get(key, 0.0), row["users_per_cpu_s"])
    print(f"{'mechanism':22} {'rng':7} {'old users/s':>12} {'new users/s':>12} {'new/old':>8}")
    rows = []
    for name, _, _ in CASES:
        for rng in ("secure", "seeded"):
            old, new = best[("old", name, rng)], best[("new", name, rng)]
            rows.append({"mechanism": name, "rng": rng, "old": old, "new": new})
            print(f"{name:22} {rng:7} {old:12.0f} {new:12.0f} {new / old:8.2f}")
    out = Path(__file__).parent / "results" / "client_throughput.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
