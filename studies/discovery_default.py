"""What group allocation and interval pruning would give the one-round discovery default.

Run from the repository root::

    PYTHONPATH=src python studies/discovery_default.py                # eps 1 2 4 8, 3 draws
    PYTHONPATH=src python studies/discovery_default.py --eps 4 --seeds 3 4 5
    PYTHONPATH=src python studies/discovery_default.py --diagnose --eps 2 4

Tuning data only: girls' baby names drawn by their birth counts (the ``--tune`` data of
``benchmarks/heavy_hitters_discovery.py``), 10^6 users, max_length 12 bytes, top 20;
recall@20 and NCR against the true top 20, averaged over population draws (draw ``s``:
population seed ``10 + s``, randomization seed ``s``).

Rows, per (eps, draw):

* ``even / beam``: the shipped ``PEM()`` (one group per prefix length, equal shares, a beam
  of 4 top_k, ended strings pooled over their groups);
* ``ramp / beam``: the same search on reports whose value-blind group coin has the integer
  weights ``min(l + 1, 4)`` (fewer users on the first lengths, whose prefixes are the most
  frequent); ``ramp6``: ``min(l + 1, 6)``. Same report law per group, only the shares move;
* ``even / final-lcb``: the last level ranks by the lower bound ``f - sigma0`` instead of
  ``f`` (the winner's curse of single-group strings against pooled ones);
* ``even / bound``: interval pruning: keep every prefix whose upper bound ``f + 2 sigma0``
  clears a lower bound of the k-th string's frequency (the k-th largest ``f - 2 std`` of the
  ended strings found so far: k distinct strings at least that frequent), at least 4 top_k
  and at most 8 top_k per level, instead of the fixed beam.

``--letters`` adds ``a-z / beam``: ``PEM()`` with the 26 lower-case letters as its alphabet
(27 symbols per step instead of 256; the tuning names are all lower-case ASCII).

``--heldout`` runs the moonshot on the held-out data (all baby names, city names): the
paper's PEM at eps against ``PEM()`` at eps and at 0.6 eps, over the same draws.

``--diagnose`` prints, per level, the beam's cut (its ``4 top_k``-th estimate, in null
standard errors) and the true top-20 prefixes that fall below it (not yet ended), which is
where a one-round search loses them.

The conclusion is recorded in docs/design/METHODS.md (open-vocabulary discovery, the
default).
"""

from __future__ import annotations

import argparse
import string
import time
import warnings
from typing import Any

import numpy as np

from _common import BENCHMARKS, load_script
from ldpkit import PEM
from ldpkit.discovery import _search
from ldpkit.discovery._strings import (
    empty_key,
    encode_strings,
    extend_keys,
    family_seeds,
    hash_keys,
    level_keys,
)
from ldpkit.discovery.prefix import _uint_dtype
from ldpkit.frequency.grr import grr_sample
from ldpkit.spec import Reports

bench = load_script(BENCHMARKS / "heavy_hitters_discovery.py", "_hh_discovery")

K = 20
ALLOCATIONS = {
    "ramp": lambda level: min(level + 1, 4),
    "ramp6": lambda level: min(level + 1, 6),
}


def randomize_weighted(spec: PEM, values: np.ndarray, weights: list[int], seed: int) -> Reports:
    """``spec.randomize`` with group ``l`` drawn w.p. ``weights[l] / sum(weights)``."""
    gen = np.random.default_rng(seed)
    symbols = encode_strings(values, spec.max_length, spec.alphabet)
    n = symbols.shape[0]
    bounds = np.cumsum(weights)
    groups = np.searchsorted(bounds, gen.integers(0, int(bounds[-1]), size=n), side="right")
    hashes = np.asarray(gen.integers(0, spec.family_size, size=n))
    keys = level_keys(symbols, groups)
    table = np.concatenate([family_seeds(lv, spec.family_size) for lv in range(spec.groups)])
    hashed = hash_keys(keys, table[groups * spec.family_size + hashes], spec.range_size)
    y = grr_sample(hashed, spec.range_size, spec._weights(), gen)
    return Reports(
        spec,
        groups=groups.astype(_uint_dtype(spec.groups - 1)),
        hashes=hashes.astype(_uint_dtype(spec.family_size - 1)),
        values=y.astype(_uint_dtype(spec.range_size - 1)),
    )


def search(spec: PEM, stats: Any, rule: str, widths: list[int] | None = None) -> Any:
    """Return ``_search.discover`` with the pruning ``rule`` ("final-lcb" or "bound")."""
    counts, n, alphabet = stats.counts, stats.n, spec.symbols
    beam = 4 * spec.top_k
    prefixes = np.zeros((1, 0), dtype=np.uint16)
    keys = empty_key(1)
    z_tested: list[np.ndarray] = []
    per_level: list[int] = []
    ended_lcb = np.zeros(0)
    f_sel = std_sel = z_sel = np.zeros(0)
    for level in range(spec.groups):
        ended = prefixes[:, -1] == 0 if level else np.zeros(prefixes.shape[0], dtype=bool)
        open_rows, closed_rows = np.flatnonzero(~ended), np.flatnonzero(ended)
        parent = np.concatenate([np.repeat(open_rows, alphabet), closed_rows])
        symbol = np.concatenate(
            [np.tile(np.arange(alphabet), open_rows.size), np.zeros(closed_rows.size, np.int64)]
        )
        child_keys = extend_keys(keys[parent], symbol)
        f, std, std0 = _search.estimate_level(spec, counts[level], child_keys, level, n)
        ended_child = np.flatnonzero(symbol == 0)
        if ended_child.size:  # pooled over the deeper groups, as the shipped search does
            rows = np.hstack(
                [prefixes[parent[ended_child]], np.zeros((ended_child.size, 1), np.uint16)]
            )
            lengths = np.count_nonzero(rows, axis=1)
            for m in np.unique(lengths).tolist():
                these = ended_child[lengths == m]
                start = empty_key(these.size)
                for pos in range(m + 1):
                    start = extend_keys(start, rows[lengths == m, pos])
                f[these], std[these], std0[these] = _search._pooled(spec, counts, start, m, n)
        z = np.zeros(f.size)
        finite = np.isfinite(std0)
        z[finite] = f[finite] / std0[finite]
        z_tested.append(z)
        per_level.append(int(child_keys.size))
        newly_ended = ended_child[np.isin(parent[ended_child], open_rows)]
        ended_lcb = np.concatenate([ended_lcb, f[newly_ended] - 2.0 * std[newly_ended]])
        if level == spec.groups - 1:
            score = f - std0 if rule == "final-lcb" else f
            keep = np.argsort(-score, kind="stable")[: spec.top_k]
        elif rule == "bound":
            order = np.argsort(-f, kind="stable")
            floor = np.sort(ended_lcb)[-spec.top_k] if ended_lcb.size >= spec.top_k else 0.0
            passing = order[(f + 2.0 * std0)[order] >= floor]
            keep = passing[: 2 * beam] if passing.size > beam else order[:beam]
        else:
            keep = np.argsort(-f, kind="stable")[:beam]
        if widths is not None:
            widths.append(int(keep.size))
        prefixes = np.hstack([prefixes[parent[keep]], symbol[keep, None].astype(np.uint16)])
        keys = child_keys[keep]
        f_sel, std_sel, z_sel = f[keep], std[keep], z[keep]
    z_all = np.concatenate(z_tested)
    return _search.select(spec, prefixes, f_sel, std_sel, z_sel, z_all, n, tuple(per_level))


def compare(
    epsilons: list[float], seeds: list[int], n: int, shares: bool = True, letters: bool = False
) -> None:
    """Print recall@20 and NCR of every row, per draw and averaged."""
    names, weights = bench.baby_names("F")
    for eps in epsilons:
        spec = PEM(epsilon=eps)
        results: dict[str, list[tuple[float, float]]] = {}
        for seed in seeds:
            values = bench.draw(names, weights, n, seed=10 + seed)
            truth = bench.truth_of(values, 12)
            t0 = time.perf_counter()
            runs: dict[str, Any] = {}
            stats = spec.aggregate(spec.randomize(values, rng=seed))
            runs["even / beam"] = spec.estimate(stats)
            for rule in ("final-lcb", "bound"):
                runs[f"even / {rule}"] = search(spec, stats, rule)
            for label, rule_of in ALLOCATIONS.items() if shares else ():
                shares = [rule_of(level) for level in range(spec.groups)]
                other = spec.aggregate(randomize_weighted(spec, values, shares, seed))
                runs[f"{label} / beam"] = spec.estimate(other)
            if letters:  # the tuning names are lower-case ASCII letters
                runs["a-z / beam"] = PEM(epsilon=eps, alphabet=string.ascii_lowercase).run(
                    values, rng=seed
                )
            for label, hh in runs.items():
                m = bench.metrics(list(hh.items), list(hh.frequencies), truth, n, K)
                results.setdefault(label, []).append((m["recall"], m["ncr"]))
            print(f"eps {eps:g} draw {seed}: {time.perf_counter() - t0:.0f} s", flush=True)
        print("\n| eps | rows | recall@20 (mean) | per draw | NCR (mean) |\n|---|---|---|---|---|")
        for label, rows in results.items():
            a = np.array(rows)
            print(
                f"| {eps:g} | {label} | {a[:, 0].mean():.3f} | "
                f"{', '.join(f'{r:.2f}' for r in a[:, 0])} | {a[:, 1].mean():.3f} |",
                flush=True,
            )
        print()


def diagnose(epsilons: list[float], seed: int, n: int) -> None:
    """Per level: the beam's cut and the true top-20 prefixes (not yet ended) below it."""
    names, weights = bench.baby_names("F")
    values = bench.draw(names, weights, n, seed=10 + seed)
    truth = bench.truth_of(values, 12)
    top = [s for s, _ in truth.most_common(K)]
    symbols = encode_strings(np.array(top, dtype=object), 12, None)
    for eps in epsilons:
        spec = PEM(epsilon=eps)
        stats = spec.aggregate(spec.randomize(values, rng=seed))
        hh = spec.estimate(stats)
        seen = _level_estimates(spec, stats)
        print(f"eps {eps:g}: found {sum(s in top for s in hh.items)} of the top {K}")
        for level in range(spec.groups):
            keys = level_keys(symbols, np.full(len(top), level))
            f, _, std0 = _search.estimate_level(spec, stats.counts[level], keys, level, n)
            # the beam's cut at this level: the 4 top_k-th largest estimate the search saw
            cut = np.sort(seen[level])[-4 * K] if seen[level].size >= 4 * K else -np.inf
            lost = [
                f"{top[i]}:{f[i] / std0[i]:.1f}"
                for i in range(len(top))
                if f[i] < cut and symbols[i, level] != 0
            ]
            print(f"  level {level}: cut {cut / std0[0]:.1f} null s.e.; below it: {lost}")


def heldout(epsilons: list[float], seeds: list[int], n: int) -> None:
    """The moonshot on the held-out data: the paper's PEM at eps against PEM() at 0.6 eps."""
    data = {"baby names": bench.baby_names(), "city names": bench.city_names()}
    for label, (names, weights) in data.items():
        print("\n| data | eps | rows | recall@20 (mean) | per draw | NCR (mean) |")
        print("|---|---|---|---|---|---|")
        for eps in epsilons:
            specs = {
                "PEM (paper) at eps": PEM(epsilon=eps, keep=K, pool_ended=False),
                "PEM() at eps": PEM(epsilon=eps),
                "PEM() at 0.6 eps": PEM(epsilon=0.6 * eps),
            }
            results: dict[str, list[tuple[float, float]]] = {}
            for seed in seeds:
                values = bench.draw(names, weights, n, seed=10 + seed)
                truth = bench.truth_of(values, 12)
                for row, spec in specs.items():
                    hh = spec.run(values, rng=seed)
                    m = bench.metrics(list(hh.items), list(hh.frequencies), truth, n, K)
                    results.setdefault(row, []).append((m["recall"], m["ncr"]))
            for row, runs in results.items():
                a = np.array(runs)
                print(
                    f"| {label} | {eps:g} | {row} | {a[:, 0].mean():.3f} | "
                    f"{', '.join(f'{r:.2f}' for r in a[:, 0])} | {a[:, 1].mean():.3f} |",
                    flush=True,
                )


def _level_estimates(spec: PEM, stats: Any) -> list[np.ndarray]:
    """Every level's estimates of the candidates the shipped search tests."""
    seen: list[np.ndarray] = []

    class Probe(PEM):
        name = "_probe"

        def _prune(self, f: np.ndarray, sigma0: np.ndarray, final: bool) -> np.ndarray:
            seen.append(f.copy())
            return super()._prune(f, sigma0, final)

    probe = Probe(epsilon=spec.epsilon)
    _search.discover(probe, stats)
    return seen


def main() -> None:
    """Parse the arguments and run the comparison or the diagnosis."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eps", type=float, nargs="+", default=[4.0, 8.0, 2.0, 1.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--diagnose", action="store_true")
    parser.add_argument("--heldout", action="store_true", help="the moonshot, held-out data")
    parser.add_argument("--letters", action="store_true", help="add PEM(alphabet=a-z) rows")
    parser.add_argument("--server-only", action="store_true", help="skip the allocation rows")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.heldout:
        heldout(args.eps, args.seeds, args.n)
    elif args.diagnose:
        diagnose(args.eps, args.seeds[0], args.n)
    else:
        compare(args.eps, args.seeds, args.n, not args.server_only, args.letters)


if __name__ == "__main__":
    main()
