"""An oracle bound: how many users per prefix length the moonshot's names need.

Run from the repository root::

    PYTHONPATH=src python studies/discovery_oracle.py                     # tuning (girls)
    PYTHONPATH=src python studies/discovery_oracle.py --data baby city    # held out

A study, not a method: it reads the true frequencies of every prefix (no randomization), so
it bounds what any allocation of PEM's groups across prefix lengths could give, before a
client-side design is tried. A one-round prefix search finds a string only if each of its
open prefixes (length 1 .. its length) clears the pruning cut in its own group, and the
string itself (ended, pooled over the groups at its length and beyond) then ranks in the top
k. With ``n_l`` users in group ``l`` and OLH's null variance ``V(eps)`` per user (FO17
section 4.5, ``(1/g)(1 - 1/g) / (p - 1/g)^2`` at the spec's realized g and p), a prefix of
true frequency ``f`` is at ``f sqrt(n_l / V)`` null standard errors; clearing a cut of
``c`` standard errors with ``m`` to spare needs::

    n_l >= V(eps) (c + m)^2 / f^2.

``c`` is the ``1 - 1/A`` quantile of the null (a beam keeps about one in A of the extensions
it tests): A = 256 for bytes (2.66), A = 30 for an alphabet learned from the reports (1.83,
the names' letters and a few more). The ended string is estimated from every group at its
length ``L`` and beyond, so those groups' users add up (``sum_{l >= L} n_l``).

For the ``r`` names the paper's PEM finds at eps (its recall@20 over the held-out draws of
docs/results/heavy_hitters_discovery.md, x 20), the easiest ``r`` of the true top 20 (by
their own need) and the best allocation of users to lengths (each length gets what its
hardest prefix among those names needs; the ended strings' need is met by the deepest
groups first), the study prints the users needed at 0.6 eps and the smallest factor of eps
at which 10^6 users suffice; then the same with even shares (the shipped client: every
group as large as the largest need, 12 groups) and, at 10^6 / 12 users per group, the
prefixes' margins ``z - c`` at 0.6 eps (worst and median over the names).

``--steps``: even shares with one or two symbols per group (12 or 6 groups, each twice as
large; two symbols test ``A^2`` extensions per survivor, so the cut is the ``1 - 1/A^2``
quantile), for A = 30 and 256: the users the ``r`` easiest names need at 0.6 eps and the
smallest factor of eps at which 10^6 suffice.

``--simulate EPS..``: ``PEM()``'s search (the learned default) on reports whose group coin
has the weights ``SHAPED`` against even groups, 3 draws (``--seeds``).

``--known EPS..``: ``PEM()``'s search with its learned alphabet against the true bytes of
the top 300 strings past their first symbol (what no learning, on the server or from a
client-side group, can beat), 3 draws.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import numpy as np
from scipy import special

from _common import BENCHMARKS, load_script
from ldpkit import PEM

bench = load_script(BENCHMARKS / "heavy_hitters_discovery.py", "_hh_discovery")

K, LENGTH, N = 20, 12, 10**6
#: (data, eps) -> names the paper's PEM finds at eps (mean recall@20 over 3 held-out draws x 20;
#: docs/results/heavy_hitters_discovery.md, "Moonshot over 3 draws"); tuning: the same cells.
TARGETS = {("baby", 2.0): 4, ("baby", 4.0): 12, ("baby", 8.0): 12, ("city", 4.0): 3}
TARGETS |= {("city", 8.0): 7, ("girls", 2.0): 1, ("girls", 4.0): 12, ("girls", 8.0): 12}


def null_variance(eps: float) -> float:
    """OLH's per-user null variance at the default spec's realized g and p."""
    spec = PEM(epsilon=eps)
    g = spec.range_size
    return (1.0 / g) * (1.0 - 1.0 / g) / (spec.p - 1.0 / g) ** 2


def population(data: str) -> Counter:
    """True frequencies of the strings cut at LENGTH bytes (weights, not a draw)."""
    names, weights = {
        "girls": lambda: bench.baby_names("F"),
        "baby": bench.baby_names,
        "city": bench.city_names,
    }[data]()
    total: Counter = Counter()
    for name, w in zip(names.tolist(), (weights / weights.sum()).tolist(), strict=True):
        total[bench.cut(name, LENGTH)] += w
    return total


def prefix_frequencies(freq: Counter, name: str) -> tuple[np.ndarray, int]:
    """Frequencies of the name's open prefixes (bytes 1 .. L) and its length L in bytes."""
    raw = name.encode("utf-8")
    by_prefix: Counter = Counter()
    for s, w in freq.items():
        b = s.encode("utf-8")
        for length in range(1, len(raw) + 1):
            if b[:length] == raw[:length]:
                by_prefix[length] += w
            else:
                break
    return np.array([by_prefix[i] for i in range(1, len(raw) + 1)]), len(raw)


def needs(prefixes: np.ndarray, length: int, f: float, v: float, c: float, m: float) -> np.ndarray:
    """Users needed per group: open prefixes at lengths 1..L-1; the last entry: the pooled end."""
    need = np.zeros(LENGTH + 1)
    # group l holds prefixes of length l + 1: the open prefixes of lengths 1 .. L are in
    # groups 0 .. L - 1 (a string cut at LENGTH bytes never ends: its last prefix is it)
    need[:length] = v * (c + m) ** 2 / prefixes**2
    if length < LENGTH:  # ended: groups L .. LENGTH - 1 pooled must reach this many
        need[LENGTH] = v * (c + m) ** 2 / f**2
    return need


def allocation(needs_rows: np.ndarray, length_of: list[int]) -> np.ndarray:
    """Fewest users per group meeting every name: its largest open need, then the ends."""
    groups = needs_rows[:, :LENGTH].max(axis=0)
    for row, length in zip(needs_rows, length_of, strict=True):
        if length < LENGTH:  # the pooled groups L.. must add up to the end's need
            short = row[LENGTH] - groups[length:].sum()
            if short > 0:
                groups[LENGTH - 1] += short  # the deepest group counts for every ended string
    return groups


def even_users(needs_rows: np.ndarray, length_of: list[int]) -> float:
    """Users needed with even shares: every group as large as the largest need."""
    per_group = needs_rows[:, :LENGTH].max()
    for row, length in zip(needs_rows, length_of, strict=True):
        if length < LENGTH:  # LENGTH - L pooled groups
            per_group = max(per_group, row[LENGTH] / (LENGTH - length))
    return float(LENGTH * per_group)


def even_step_users(
    prefixes: np.ndarray, length: int, f: float, v: float, c: float, step: int
) -> float:
    """Users one name needs with even shares and ``step`` symbols per group (12 / step groups).

    Group k (k = 1 .. 12 / step) holds prefixes of length ``k step``: the name's open
    prefixes at those lengths up to its own length are checked there; its ended form is
    pooled over the groups past its length. ``c`` is the cut for ``A^step`` extensions.
    """
    groups = LENGTH // step
    need = 0.0
    for k in range(1, groups + 1):
        if k * step <= length:  # an open prefix checked in group k
            need = max(need, v * c**2 * groups / prefixes[k * step - 1] ** 2)
    if length < LENGTH:  # the groups past its length all count the ended string
        past = groups - length // step
        need = max(need, v * c**2 * groups / (past * f**2))
    return need


def steps(data: str, eps: float, r: int, spare: float) -> str:
    """The factor of eps even shares need with one and two symbols per group (A = 30, 256)."""
    freq = population(data)
    top = [s for s, _ in freq.most_common(K)]
    info = [(*prefix_frequencies(freq, s), freq[s]) for s in top]
    factors = np.round(np.arange(0.3, 1.51, 0.05), 2)
    cells = []
    for a, step in ((30, 1), (30, 2), (256, 1), (256, 2)):
        c = float(-special.ndtri(1.0 / float(a) ** step)) + spare

        def users(factor: float, step: int = step, c: float = c) -> float:
            v = null_variance(factor * eps)
            each = sorted(even_step_users(*info[i], v, c, step) for i in range(K))
            return each[r - 1]  # the r easiest names

        fits = [f for f in factors if users(float(f)) <= N]
        cells.append(f"{users(0.6):.3g} ({(fits[0] if fits else float('nan')):g})")
    return f"| {data} | {eps:g} | {r} | " + " | ".join(cells) + " |"


def study(data: str, eps: float, r: int, c: float, m: float) -> str:
    """One row: users needed at 0.6 eps for the r easiest names, and the factor that fits."""
    freq = population(data)
    top = [s for s, _ in freq.most_common(K)]
    info = [(*prefix_frequencies(freq, s), freq[s]) for s in top]

    def users(factor: float, names: list[int], even: bool = False) -> float:
        v = null_variance(factor * eps)
        rows = np.array([needs(info[i][0], info[i][1], info[i][2], v, c, m) for i in names])
        lengths = [info[i][1] for i in names]
        return even_users(rows, lengths) if even else float(allocation(rows, lengths).sum())

    single = [users(0.6, [i]) for i in range(K)]
    easiest = sorted(range(K), key=lambda i: single[i])[:r]
    need = users(0.6, easiest)
    factors = np.round(np.arange(0.3, 1.51, 0.05), 2)
    fits = [f for f in factors if users(float(f), easiest) <= N]
    fits_even = [f for f in factors if users(float(f), easiest, even=True) <= N]
    v = null_variance(0.6 * eps)
    margins = []
    for i in easiest:
        margins.append(float((info[i][0] * np.sqrt(N / LENGTH / v)).min() - c))
    return (
        f"| {data} | {eps:g} | {r} | {c:.2f}+{m:g} | {need:.3g} | {need / N:.2f} | "
        f"{(fits[0] if fits else float('nan')):g} | {users(0.6, easiest, even=True):.3g} | "
        f"{(fits_even[0] if fits_even else float('nan')):g} | {min(margins):.2f} / "
        f"{np.median(margins):.2f} |"
    )


#: Group weights shaped on the oracle's best allocation for the tuning data (girls' names,
#: eps 4, the 12 easiest names, learned cut + 2): little on length 1, most on lengths 3-5,
#: a floor of 2 on every length so that longer strings stay reachable.
SHAPED = [1, 4, 8, 8, 8, 6, 5, 4, 3, 2, 2, 3]


def simulate(data: str, epsilons: list[float], seeds: list[int]) -> None:
    """PEM()'s search on reports with even groups and with the SHAPED group weights."""
    default = Path(__file__).resolve().parent / "discovery_default.py"
    study_default = load_script(default, "_discovery_default")
    names, weights = {
        "girls": lambda: bench.baby_names("F"),
        "baby": bench.baby_names,
        "city": bench.city_names,
    }[data]()
    print("| data | eps | groups | recall@20 (mean) | per draw | NCR (mean) |")
    print("|---|---|---|---|---|---|")
    for eps in epsilons:
        spec = PEM(epsilon=eps)
        rows: dict[str, list[tuple[float, float]]] = {}
        for seed in seeds:
            values = bench.draw(names, weights, N, seed=10 + seed)
            truth = bench.truth_of(values, LENGTH)
            for label, w in (("even", [1] * LENGTH), ("shaped", SHAPED)):
                reports = study_default.randomize_weighted(spec, values, w, seed)
                hh = spec.estimate(spec.aggregate(reports))
                m = bench.metrics(list(hh.items), list(hh.frequencies), truth, N, K)
                rows.setdefault(label, []).append((m["recall"], m["ncr"]))
        for label, runs in rows.items():
            a = np.array(runs)
            print(
                f"| {data} | {eps:g} | {label} | {a[:, 0].mean():.3f} | "
                f"{', '.join(f'{x:.2f}' for x in a[:, 0])} | {a[:, 1].mean():.3f} |",
                flush=True,
            )


def known_alphabet(data: str, epsilons: list[float], seeds: list[int], top: int = 300) -> None:
    """PEM()'s search with the learned alphabet against the true bytes of the top strings.

    The second pass extends by the bytes the true ``top`` strings use past their first
    symbol, an upper bound of any way (client or server) of learning the alphabet.
    """
    from ldpkit.discovery import _learned

    names, weights = {
        "girls": lambda: bench.baby_names("F"),
        "baby": bench.baby_names,
        "city": bench.city_names,
    }[data]()
    learned = _learned.learned_alphabet
    print("| data | eps | alphabet | recall@20 (mean) | per draw |")
    print("|---|---|---|---|---|")
    for eps in epsilons:
        rows: dict[str, list[float]] = {"learned": [], "known": []}
        size = 0
        for seed in seeds:
            values = bench.draw(names, weights, N, seed=10 + seed)
            truth = bench.truth_of(values, LENGTH)
            known = np.zeros(256, dtype=bool)
            known[0] = True
            for s in [t for t, _ in truth.most_common(top)]:
                known[list(s.encode("utf-8")[1:])] = True
            size = int(known.sum())
            spec = PEM(epsilon=eps)
            stats = spec.aggregate(spec.randomize(values, rng=seed))
            for label in rows:
                if label == "known":  # a study's swap of the rule, restored below
                    _learned.learned_alphabet = lambda mass, var, t, k=known: k
                try:
                    hh = spec.estimate(stats)
                finally:
                    _learned.learned_alphabet = learned
                m = bench.metrics(list(hh.items), list(hh.frequencies), truth, N, K)
                rows[label].append(m["recall"])
        for label, runs in rows.items():
            name = f"known ({size} symbols)" if label == "known" else label
            print(
                f"| {data} | {eps:g} | {name} | {np.mean(runs):.3f} | "
                f"{', '.join(f'{x:.2f}' for x in runs)} |",
                flush=True,
            )


def main() -> None:
    """Print the oracle table for the requested data sets (or ``--simulate`` the shares)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", nargs="+", default=["girls"])
    parser.add_argument("--spare", type=float, nargs="+", default=[2.0, 1.0])
    parser.add_argument("--simulate", type=float, nargs="*", default=None)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", action="store_true", help="1 or 2 symbols per group")
    parser.add_argument("--known", type=float, nargs="*", default=None, help="known alphabet")
    args = parser.parse_args()
    if args.known is not None:
        for data in args.data:
            known_alphabet(data, args.known, args.seeds)
        return
    if args.steps:
        print(
            "| data | eps | names | A=30, 1 symbol per group: users at 0.6 eps (factor) | "
            "A=30, 2 symbols | A=256, 1 symbol | A=256, 2 symbols |"
        )
        print("|---|---|---|---|---|---|---|")
        for data in args.data:
            for (d, eps), r in TARGETS.items():
                if d == data:
                    print(steps(data, eps, r, args.spare[0]), flush=True)
        return
    if args.simulate is not None:
        for data in args.data:
            simulate(data, args.simulate, args.seeds)
        return
    print(
        "| data | eps | names (paper PEM finds) | cut + spare (null s.e.) | users needed at "
        "0.6 eps, best allocation | / 10^6 | smallest factor of eps with 10^6 | users "
        "needed, even shares | its factor | even shares at 0.6 eps: worst / median margin "
        "z - cut |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for data in args.data:
        for (d, eps), r in TARGETS.items():
            if d != data:
                continue
            for a in (256, 30):
                c = float(-special.ndtri(1.0 / a))
                for m in args.spare:
                    print(study(data, eps, r, c, m), flush=True)


if __name__ == "__main__":
    main()
