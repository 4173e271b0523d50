"""Collapsed support counts against the exact per-report E-step, on the same hybrid reports.

Run: ``nice python studies/auto_hybrid_collapsed.py [--reps 2] [--epsilons 0.5 1 2.5 4]
[--datasets ...] [--share 0.25] [--strengths 2 0.5 0]``. Per cell and strength s, one
:class:`~ldpkit.numeric.AutoDistribution` (``hh_share``) draws the reports; the fit of
strength s from the uniform start is computed twice: by AutoDistribution's joint EM on the
mergeable Stats (the HH levels' support counts, :meth:`AutoDistribution._model`) and by the
prototype's joint EM with the exact per-report likelihood of every OLH report
(studies/auto_hybrid.py, ``JointEM``, no iteration cap here beyond ``--max-iter``).
Prints W1 and KS (WAV25's grid errors against the data) of both and their ratio
(collapsed / exact); writes benchmarks/results/auto_hybrid_collapsed.json.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

from _common import RESULTS
from auto_hybrid import JointEM
from ldpkit.experiments.numeric import grid_errors
from ldpkit.numeric import AutoDistribution, Distribution
from ldpkit.reproduce import wav25
from ldpkit.spec import Reports


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1, 2.5, 4])
    ap.add_argument("--datasets", nargs="+", default=["Beta(5,2)", "weeks worked"])
    ap.add_argument("--share", type=float, default=0.25)
    ap.add_argument("--strengths", type=float, nargs="+", default=[0.5, 0.0])
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--max-iter", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    JointEM.max_iter = args.max_iter
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for name in args.datasets:
        bench = wav25.load_bench(name, wav25.FULL, args.seed)
        srt = np.sort(bench.values)
        for eps in args.epsilons:
            spec = AutoDistribution(epsilon=eps, buckets=1024, hh_share=args.share)
            tree = spec.tree
            errs: dict[str, list[tuple[float, float]]] = {}
            for r in range(args.reps):
                rep = spec.randomize(
                    bench.values, rng=np.random.SeedSequence([args.seed, r, int(eps * 100)])
                )
                stats = spec.aggregate(rep)
                lv = np.asarray(rep.levels)
                hh = lv > 0
                fields = {"levels": lv[hh], "values": np.asarray(rep.items)[hh]}
                if "seeds" in rep.fields:
                    fields["seeds"] = np.asarray(rep.seeds)[hh]
                exact = JointEM(eps, np.asarray(stats.counts), tree, Reports(tree, **fields))
                for s in args.strengths:
                    dist = spec.estimate(stats, strengths=[s], end_atoms=False)
                    errs.setdefault(f"collapsed s={s:g}", []).append(grid_errors(dist, srt))
                    theta = exact.fit(s, eps, None)
                    errs.setdefault(f"exact s={s:g}", []).append(
                        grid_errors(Distribution(theta, 0.0, 1.0), srt)
                    )
            row: dict[str, Any] = {"data": name, "eps": eps, "r": args.share}
            for key, vals in errs.items():
                arr = np.asarray(vals)
                row[f"{key} W1"], row[f"{key} KS"] = (
                    float(arr[:, 0].mean()),
                    float(arr[:, 1].mean()),
                )
            line = f"{name:18s} eps={eps:<4g}"
            for s in args.strengths:
                for m in ("W1", "KS"):
                    c, e = row[f"collapsed s={s:g} {m}"], row[f"exact s={s:g} {m}"]
                    row[f"ratio s={s:g} {m}"] = c / e
                    line += f" s={s:g} {m} {c:.4f}/{e:.4f}={c / e:.2f}"
            print(line + f" ({time.perf_counter() - t0:.0f} s)", flush=True)
            rows.append(row)
            RESULTS.mkdir(parents=True, exist_ok=True)
            (RESULTS / "auto_hybrid_collapsed.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
