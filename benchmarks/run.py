"""Run the product benchmarks: ``make bench`` (full) or ``make bench-quick`` (CI's smoke run).

Each benchmark is a script of its own that times ldpkit against its baseline (a peer library,
the bare stack, or the method it replaced) in the same run and prints the table; this driver
runs them one after the other in fresh interpreters, with small sizes in quick mode, and
prints how long each took and whether it exited cleanly. Research probes and one-off
before/after checks are not here: they live in ``studies/`` (see studies/README.md).

Run from the repository root: ``python benchmarks/run.py [--quick] [--only NAME ...]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: name -> (quick arguments, full arguments, what it needs beyond the base install)
BENCHMARKS: dict[str, tuple[list[str], list[str], str]] = {
    "frequency": (["--n", "20000", "--domains", "64"], [], ""),
    "hashing": (["--n", "20000", "--domains", "64", "--repeat", "1"], [], ""),
    "unary": (["--n", "20000", "--she-n", "5000", "--repeat", "1"], [], ""),
    "subset_hadamard": (["--n", "20000", "--repeats", "1"], [], ""),
    "rappor": (["--n", "20000", "--repeat", "1"], [], ""),
    "consistency": (["--domain", "2000", "--repeat", "1"], [], ""),
    "numeric": (
        [
            *("--n", "20000", "--buckets", "256", "--epsilons", "1", "--repeat", "1"),
            *("--accuracy-seeds", "1", "--accuracy-epsilons", "1"),
        ],
        [],
        "",
    ),
    "em_bootstrap_time": (
        ["--n", "20000", "--boot", "5", "--buckets", "256", "--eps", "1"],
        [],
        "",
    ),
    "stream": (["--quick"], [], ""),
    "imports": (["--repeat", "1"], [], ""),
    "server_side": (["--n", "20000", "--batches", "10", "--repeat", "1"], [], "service"),
    "collector_asgi": (["--requests", "300"], [], "service"),
    "collector": (
        [
            *("--seconds", "1", "--connections", "16", "--skip-postgres", "--skip-batched"),
            *("--estimate-batches", "1000"),
        ],
        [],
        "wrk",
    ),
    "interval_coverage": (
        ["--reps", "2", "2", "--n", "20000", "--eps", "1", "--boot", "5", "--budget", "30"],
        [],
        "",
    ),
    "heavy_hitters": (["--eps", "4", "--top", "20"], ["--full"], ""),
    "heavy_hitters_discovery": ([], ["--full"], ""),
    "heavy_hitters_rates": (
        ["--methods", "PEM", "FLH", "--n", "20000", "--peer-n", "2000"],
        ["--full"],
        "",
    ),
    "longitudinal": ([], ["--full"], ""),
    "multidim": ([], ["--full"], ""),
    "multidim_olh": (["--runs", "4", "--eps", "1"], ["--full"], ""),
    "sets": (["--quick"], [], ""),
    "poisoning": (["--n", "5000"], [], ""),
    "auto_distribution": (
        [
            *("--epsilons", "1", "--reps", "1", "--skip-large", "--datasets", "Beta(5,2)"),
            *("--speed-epsilons", "1", "--speed-repeat", "1"),
        ],
        [],
        "",
    ),
}


def _available(need: str) -> str | None:
    """Why a benchmark cannot run here, or None."""
    if need == "service":
        try:
            import fastapi  # noqa: F401
            import sqlalchemy  # noqa: F401
        except ImportError:
            return "the 'service' extra is not installed"
    if need == "wrk":
        if shutil.which("wrk") is None:
            return "wrk is not installed"
        return _available("service")
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI's smoke run)")
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), default=None)
    args = parser.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(HERE)])}
    failed, summary = [], []
    for name in args.only or list(BENCHMARKS):
        quick, full, need = BENCHMARKS[name]
        why = _available(need)
        if why is not None:
            summary.append((name, "skipped", why))
            continue
        cmd = [sys.executable, str(HERE / f"{name}.py"), *(quick if args.quick else full)]
        print(f"\n=== {name}: {' '.join(cmd[1:])}", flush=True)
        t0 = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, env=env, check=False)
        took = time.perf_counter() - t0
        ok = done.returncode == 0
        summary.append((name, "ok" if ok else f"exit {done.returncode}", f"{took:.1f} s"))
        if not ok:
            failed.append(name)
    print("\nbenchmark            result     time / reason")
    for name, result, detail in summary:
        print(f"{name:<20} {result:<10} {detail}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
