"""Rank PEM's beam by the evidence summed along each path instead of level by level.

Run from the repository root::

    PYTHONPATH=src python studies/discovery_paths.py --eps 2.4 1.2 4 8 --seeds 0 1 2
    PYTHONPATH=src python studies/discovery_paths.py --heldout 0.6 0.7 0.8 0.9 1 --eps 4 2 8

The shipped search (``PEM()``: a byte pass, a pass over the learned alphabet, both last
levels ranked together, ``ldpkit.discovery._learned``) keeps at each level the ``4 top_k``
open extensions of largest estimate: a string is found only if each of its open prefixes
clears the beam's cut in its own group (~2.66 null s.e. on bytes). Its prefixes' estimates
come from disjoint groups of users, so they are independent, and each is at least the
string's frequency plus noise: a path whose prefix dips to z ~ 2 at one level but is strong
around it could be kept if the beam remembered the path.

Rows (server side only: the same Stats for every row, the reports unchanged):

* ``shipped``: ``PEM().estimate(stats)``;
* ``sum c B``: the same two passes, but an open extension's beam score is its parent's
  score plus ``min(z, c)`` (z its own group's estimate over the null standard error), the
  beam keeps the ``B`` largest scores (``B`` in multiples of top_k; any number of children
  per parent); ended strings keep their ``2 top_k`` places as in the shipped search, and
  the last level ranks the strings exactly as the shipped search does (pooled estimates,
  selection bias of the unended rows taken off, UTF-8 rule);
* ``decay d c B``: the parent's score weighted by ``d`` (``d = 0``: the shipped level-wise
  ranking; ``d = 1``: the plain sum);
* ``wide B``: the shipped level-wise ranking with a beam of ``B`` (does the width alone
  explain a gain?).

Tuning data only for the design (girls' baby names, 10^6 users, max_length 12, top 20,
recall@20 against the true top 20; draw ``s``: population seed ``10 + s``, randomization
seed ``s``, as in ``studies/discovery_default.py``). ``--heldout F..``: the paper's PEM at
eps against the level-wise default (``discover_learned(paths=False)``) and the frozen path
rule (``paths=True``, ``PEM()``'s default since this study) at every factor F x eps, on the
same Stats, on all baby names and city names.

The conclusion is recorded in docs/design/METHODS.md (open-vocabulary discovery, the
moonshot).
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import numpy as np

from _common import BENCHMARKS, load_script
from ldpkit import PEM
from ldpkit.discovery._learned import discover_learned

bench = load_script(BENCHMARKS / "heavy_hitters_discovery.py", "_hh_discovery")

K = 20


def discover_paths(
    spec: PEM, stats: Any, decay: float, cap: float, width: int, first_width: int | None = None
) -> tuple:
    """Both passes with the path-scored beam; the last level ranked as the shipped search.

    ``first_width``: the byte pass's beam if not ``width`` (the learned pass tests ~30
    extensions per survivor, the byte pass 256: the byte pass is most of the time).
    Returns the chosen strings (most frequent first), their estimates and the tested count.
    """
    hh = discover_learned(spec, stats, decay=decay, cap=cap, width=width, first_width=first_width)
    return list(hh.items), np.asarray(hh.frequencies), hh.tested


def rules(
    widths: list[int], caps: list[float], decays: list[float], first: list[int]
) -> dict[str, tuple]:
    """Every (label, (decay, cap, width, first_width)) the comparison runs but the shipped."""
    out: dict[str, tuple] = {}
    for b1 in first:  # a narrower byte pass, the learned pass at every width
        for b in widths:
            for c in caps:
                for d in decays:
                    out[f"decay {d:g} c{c:g} bytes {b1}k learned {b}k"] = (d, c, b * K, b1 * K)
    for b in widths:
        if b != 4:
            out[f"wide {b}k"] = (0.0, np.inf, b * K, None)
        for c in caps:
            for d in decays:
                label = f"sum c{c:g} {b}k" if d == 1.0 else f"decay {d:g} c{c:g} {b}k"
                out[label] = (d, c, b * K, None)
    return out


def compare(
    data: tuple[np.ndarray, np.ndarray],
    epsilons: list[float],
    seeds: list[int],
    variants: dict[str, tuple],
    label: str,
) -> None:
    """Print recall@20 of the shipped search and every variant on the same Stats."""
    names, weights = data
    for eps in epsilons:
        spec = PEM(epsilon=eps)
        results: dict[str, list[tuple[float, float, float]]] = {}
        for seed in seeds:
            values = bench.draw(names, weights, 10**6, seed=10 + seed)
            truth = bench.truth_of(values, 12)
            stats = spec.aggregate(spec.randomize(values, rng=seed))
            t0 = time.perf_counter()
            hh = spec.estimate(stats)
            found = {"shipped": (list(hh.items), list(hh.frequencies), time.perf_counter() - t0)}
            for row, (d, c, b, b1) in variants.items():
                t0 = time.perf_counter()
                items, freqs, _ = discover_paths(spec, stats, d, c, b, b1)
                found[row] = (items, list(freqs), time.perf_counter() - t0)
            for row, (items, freqs, sec) in found.items():
                m = bench.metrics(items, freqs, truth, 10**6, K)
                results.setdefault(row, []).append((m["recall"], m["ncr"], sec))
        print("\n| data | eps | rows | recall@20 (mean) | per draw | NCR | server s |")
        print("|---|---|---|---|---|---|---|")
        for row, runs in results.items():
            a = np.array(runs)
            print(
                f"| {label} | {eps:g} | {row} | {a[:, 0].mean():.3f} | "
                f"{', '.join(f'{x:.2f}' for x in a[:, 0])} | {a[:, 1].mean():.3f} | "
                f"{a[:, 2].mean():.1f} |",
                flush=True,
            )


def heldout(epsilons: list[float], factors: list[float], seeds: list[int]) -> None:
    """Held out: the paper's PEM at eps; the level-wise and the path rule at factor x eps.

    Both rules run on the same Stats (``discover_learned`` with ``paths=False``: the
    default before the path score; ``paths=True``: the default with it).
    """
    data = {"baby names": bench.baby_names(), "city names": bench.city_names()}
    print("| data | eps | rows | recall@20 (mean) | per draw | NCR (mean) | server s |")
    print("|---|---|---|---|---|---|---|")
    for label, (names, weights) in data.items():
        for eps in epsilons:
            results: dict[str, list[tuple[float, float, float]]] = {}
            for seed in seeds:
                values = bench.draw(names, weights, 10**6, seed=10 + seed)
                truth = bench.truth_of(values, 12)
                paper = PEM(epsilon=eps, keep=K, pool_ended=False).run(values, rng=seed)
                runs = {"PEM (paper) at eps": (paper, 0.0)}
                for r in factors:
                    spec = PEM(epsilon=r * eps)
                    stats = spec.aggregate(spec.randomize(values, rng=seed))
                    for rule, paths in (("level-wise", False), ("paths", True)):
                        t0 = time.perf_counter()
                        hh = discover_learned(spec, stats, paths=paths)
                        runs[f"{rule} at {r:g} eps"] = (hh, time.perf_counter() - t0)
                for row, (hh, sec) in runs.items():
                    m = bench.metrics(list(hh.items), list(hh.frequencies), truth, 10**6, K)
                    results.setdefault(row, []).append((m["recall"], m["ncr"], sec))
            for row, rr in results.items():
                a = np.array(rr)
                print(
                    f"| {label} | {eps:g} | {row} | {a[:, 0].mean():.3f} | "
                    f"{', '.join(f'{x:.2f}' for x in a[:, 0])} | {a[:, 1].mean():.3f} | "
                    f"{a[:, 2].mean():.1f} |",
                    flush=True,
                )


def main() -> None:
    """Parse the arguments and run the tuning comparison or the held-out one."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eps", type=float, nargs="+", default=[2.4, 1.2, 4.0, 8.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--widths", type=int, nargs="+", default=[4, 8], help="x top_k")
    parser.add_argument("--caps", type=float, nargs="+", default=[4.0, 6.0])
    parser.add_argument("--decays", type=float, nargs="+", default=[1.0])
    parser.add_argument("--first", type=int, nargs="*", default=[], help="byte pass x top_k")
    parser.add_argument("--only-first", action="store_true", help="only the --first rows")
    parser.add_argument("--heldout", type=float, nargs="*", default=None, help="factors")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    variants = rules(args.widths, args.caps, args.decays, args.first)
    if args.only_first:
        variants = {k: v for k, v in variants.items() if v[3] is not None}
    if args.heldout is not None:
        heldout(args.eps, args.heldout or [0.6, 0.7, 0.8, 0.9, 1.0], args.seeds)
    else:
        compare(bench.baby_names("F"), args.eps, args.seeds, variants, "girls")


if __name__ == "__main__":
    main()
