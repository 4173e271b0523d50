"""Import cost of ldpkit against numpy, and of ``ldpkit --help``, in fresh interpreters.

Run: ``python benchmarks/imports.py [--repeat 5]``. Prints a table and writes
benchmarks/results/imports.json.

Targets: ``import ldpkit`` <= 2.5x the wall time of ``import numpy`` (median of
``--repeat`` fresh subprocesses each, interleaved in the same run, so both see the same
machine load), and ``ldpkit --help`` <= 1 s. Each row is the wall time of a whole
``python -c CODE`` process (interpreter start-up included, as a user experiences it);
``python -c pass`` is listed too so the start-up share can be read off. The CPU column
(user + system time of the child) is less sensitive to other processes than wall time on a
shared machine; the load average is recorded with the results.

The client rows also check which heavy modules (scipy, pandas, numba, pyarrow) the
statement loaded: the light-import design promises none.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import print_table, write_json

SRC = str(Path(__file__).resolve().parents[1] / "src")
HEAVY = ("scipy", "pandas", "numba", "pyarrow")

PROBE = (
    "import sys, json; print(json.dumps(sorted({m.split('.')[0] for m, v in sys.modules.items()"
    f" if v is not None and m.split('.')[0] in {HEAVY!r}}})))"
)

# label -> statement; "numpy" is the baseline of the ratio column.
CASES = {
    "python -c pass": "pass",
    "import numpy": "import numpy",
    "import ldpkit": "import ldpkit",
    "from ldpkit import GRR, OLH, OUE, SquareWave": "from ldpkit import GRR, OLH, OUE, SquareWave",
    "client: import + randomize 4 specs": (
        "from ldpkit import GRR, OLH, OUE, SquareWave\n"
        "for s, v in ((GRR(epsilon=1.0, domain_size=10), [3]), (OLH(epsilon=1.0, domain_size=100), [3]),"
        " (OUE(epsilon=1.0, domain_size=100), [3]), (SquareWave(epsilon=1.0), [0.5])):\n"
        "    s.randomize(v, rng=0)"
    ),
    "import ldpkit.frequency, ldpkit.numeric": "import ldpkit.frequency, ldpkit.numeric",
    "ldpkit --help": (
        "import sys\nfrom ldpkit.cli import app\nsys.argv = ['ldpkit', '--help']\n"
        "try:\n    app()\nexcept SystemExit:\n    pass"
    ),
    "server: import every public name": (
        "import ldpkit, ldpkit.frequency as f, ldpkit.numeric as n\n"
        "[getattr(m, k) for m in (ldpkit, f, n) for k in m.__all__]"
    ),
}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(code: str, probe: bool) -> tuple[float, float, list[str]]:
    """Wall and CPU (user + system) seconds of one fresh interpreter, and heavy modules seen."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    full = code + ("\n" + PROBE if probe else "")
    cpu0, t0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", full], capture_output=True, text=True, env=env, check=False
    )
    seconds, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if done.returncode != 0:
        raise RuntimeError(f"{code!r} failed:\n{done.stderr}")
    loaded = json.loads(done.stdout.strip().splitlines()[-1]) if probe else []
    return seconds, cpu, loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    times: dict[str, list[float]] = {label: [] for label in CASES}
    cpus: dict[str, list[float]] = {label: [] for label in CASES}
    for _ in range(args.repeat):  # interleaved: every case sees the same load drift
        for label, code in CASES.items():
            wall, cpu, _ = run_once(code, probe=False)
            times[label].append(wall)
            cpus[label].append(cpu)
    # One more run per case with the probe (kept out of the timings: json adds a little).
    loaded = {label: run_once(code, probe=True)[2] for label, code in CASES.items()}

    base = statistics.median(times["import numpy"])
    rows = [
        {
            "case": label,
            "median_s": statistics.median(ts),
            "min_s": min(ts),
            "vs_numpy": statistics.median(ts) / base,
            "cpu_s": statistics.median(cpus[label]),
            "heavy_loaded": ",".join(loaded[label]) or "none",
        }
        for label, ts in times.items()
    ]
    ratio = statistics.median(times["import ldpkit"]) / base
    client = statistics.median(times["from ldpkit import GRR, OLH, OUE, SquareWave"]) / base
    help_s = statistics.median(times["ldpkit --help"])
    help_cpu = statistics.median(cpus["ldpkit --help"])
    print_table(
        f"Fresh-interpreter wall time, median of {args.repeat} ({sys.executable})",
        rows,
        [
            ("case", "case"),
            ("median_s", "median s"),
            ("min_s", "min s"),
            ("vs_numpy", "x import numpy"),
            ("cpu_s", "median CPU s"),
            ("heavy_loaded", "heavy modules loaded"),
        ],
    )
    verdict = {
        "import_ldpkit_vs_numpy": ratio,
        "client_import_vs_numpy": client,
        "help_seconds": help_s,
        "help_cpu_seconds": help_cpu,
        "load_average_1min": os.getloadavg()[0],
        "targets": {"import_vs_numpy": 2.5, "help_seconds": 1.0},
        "met": ratio <= 2.5 and client <= 2.5 and help_s <= 1.0,
    }
    print(
        f"import ldpkit / import numpy = {ratio:.2f}x, client import = {client:.2f}x "
        f"(target <= 2.5x); ldpkit --help {help_s:.2f} s wall, {help_cpu:.2f} s CPU "
        f"(target <= 1 s); load average {os.getloadavg()[0]:.1f}"
    )
    path = write_json("imports", rows, {"repeat": args.repeat, **verdict})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
