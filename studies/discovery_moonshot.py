"""The moonshot: what epsilon PEM() needs to match the paper's PEM, and a learned alphabet.

Run from the repository root::

    PYTHONPATH=src python studies/discovery_moonshot.py --ratios 0.6 0.7 0.8 0.9 --eps 4 2
    PYTHONPATH=src python studies/discovery_moonshot.py --heldout 0.6 0.8 1.0 --eps 4 8 2
    PYTHONPATH=src python studies/discovery_moonshot.py --eps 2.4 --seeds 0 1 2

10^6 users, max_length 12 bytes, top 20, recall@20 averaged over population draws (draw
``s``: population seed ``10 + s``, randomization seed ``s``), as in
``studies/discovery_default.py``.

``--ratios``: held out (all baby names, city names): the paper's PEM
(``PEM(keep=top_k, pool_ended=False)``) at eps against ``PEM()`` at every factor x eps.

A learned alphabet (server side, the same reports): a byte-wise beam tests 256 extensions
per survivor and keeps ~1/256 of them, so its cut sits near the 1 - 1/256 null quantile
(~2.66 null s.e.); most bytes never occur. Pass 1 is the shipped byte search; every tested
open extension ``p + b`` adds ``w_p f(p + b)`` to the evidence ``M[last symbol of p, b]``
and ``(w_p sigma0)^2`` to its variance, ``w_p`` the parent's estimate clipped to [0, 1] (1
for the empty prefix): the matched filter of children whose frequencies are shares of their
parent's, unbiased since the parents were chosen on the previous group's reports. Pass 2
repeats the search, extending each prefix past the first symbol only by the end symbol and
the symbols whose evidence clears a threshold.

``--eps E`` (tuning data, girls' names, or ``--data all|cities``): pass 1 (``bytes``)
against pass 2 with the unigram rules (``uni z>2``: one z per symbol summed over every
context; ``uni max z>2``: the larger of the first symbols' z and the later symbols'),
bigram rules (``uni z>2 & bi z>t``: also the symbol's z after the prefix's last symbol),
and two upper bounds that are not methods: the bytes of the true top 2000 strings
(``oracle unigram``) and the true bigrams of the top 300 (``oracle bigram``).

``--heldout``: the held-out moonshot with the bytes search and both unigram rules.

``--finals F.. --data girls|baby|city|heldout``: where the byte search's answer at low eps
goes wrong. At eps 2.4 most of its top 20 are 12-byte noise paths (often not UTF-8) whose
one-group estimates, the largest of ~20k tested, beat the real names' pooled ones. Rows:
``plain`` (the shipped search); ``utf8``: the last level drops rows that are not UTF-8
(the client cuts at whole characters, so no device holds them); ``+bonf``: a row that has
not ended must clear the one-sided Bonferroni cut over the last level's open rows;
``+max``: such a row is ranked by ``f - sigma0 Phi^-1(1 - 1/m)``; ``reserve+``: ended
strings keep 2 top_k places of their own at every level instead of competing with the
open prefixes for the beam. ``union``: both passes (bytes, learned) with ``reserve+utf8+max``,
their last levels ranked together: what ``PEM.estimate(stats, extensions="learned")`` runs.

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
from ldpkit.discovery import _search
from ldpkit.discovery._strings import empty_key, extend_keys

bench = load_script(BENCHMARKS / "heavy_hitters_discovery.py", "_hh_discovery")

K = 20
FINAL_RULES = ("plain", "utf8", "utf8+bonf", "utf8+max", "reserve+plain", "reserve+utf8")


def _valid_utf8(row: np.ndarray) -> bool:
    try:
        bytes(row[row != 0].astype(np.uint8).tolist()).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def final_keep(f: np.ndarray, std0: np.ndarray, rows: np.ndarray, k: int, rule: str) -> np.ndarray:
    """The last level's top ``k`` under ``rule`` ("plain", "utf8", "utf8+bonf", "utf8+max").

    ``utf8``: a row that is not UTF-8 is no device's string (the client cuts at whole
    characters). ``bonf``: a row that has not ended (one group's estimate, the largest of
    ``m`` tested) must clear the one-sided Bonferroni cut at 0.05 / m; ``max``: it is ranked
    by ``f - sigma0 * Phi^-1(1 - 1/m)`` (its expected selection bias).
    """
    from scipy import special

    score = f.copy()
    open_ = rows[:, -1] != 0
    m = max(int(open_.sum()), 1)
    if rule.endswith("bonf"):
        score[open_ & (f < -special.ndtri(0.05 / m) * std0)] = -np.inf
    elif rule.endswith("max"):
        score[open_] -= -special.ndtri(1.0 / m) * std0[open_]
    order = np.argsort(-score, kind="stable")
    out: list[int] = []
    for i in order.tolist():
        if len(out) == k or not np.isfinite(score[i]):
            break
        if rule == "plain" or _valid_utf8(rows[i]):
            out.append(i)
    return np.array(out, dtype=np.int64)


def search(
    spec: PEM,
    stats: Any,
    allowed: np.ndarray | None,
    beam: int,
    final_rule: str = "plain",
    last: list[tuple[np.ndarray, ...]] | None = None,
) -> tuple[Any, np.ndarray, np.ndarray]:
    """Beam search; ``allowed[ctx, b]``: may a prefix ending in ctx extend by b (ctx A: root)."""
    counts, n, a = stats.counts, stats.n, spec.symbols
    mass = np.zeros((a + 1, a))
    var = np.zeros((a + 1, a))
    prefixes = np.zeros((1, 0), dtype=np.uint16)
    keys = empty_key(1)
    weight = np.ones(1)  # matched filter: a parent's children carry mass in proportion to it
    z_tested: list[np.ndarray] = []
    per_level: list[int] = []
    f_sel = std_sel = z_sel = np.zeros(0)
    for level in range(spec.groups):
        m = prefixes.shape[0]
        ctx = prefixes[:, -1].astype(np.int64) if level else np.full(m, a, dtype=np.int64)
        ended = (ctx == 0) if level else np.zeros(m, dtype=bool)
        open_rows, closed_rows = np.flatnonzero(~ended), np.flatnonzero(ended)
        if allowed is None or level == 0:
            ok = np.ones((open_rows.size, a), dtype=bool)
        else:
            ok = allowed[ctx[open_rows]].copy()
            ok[:, 0] = True
        pi, sym = np.nonzero(ok)
        parent = np.concatenate([open_rows[pi], closed_rows])
        symbol = np.concatenate([sym, np.zeros(closed_rows.size, np.int64)])
        child_keys = extend_keys(keys[parent], symbol)
        f, std, std0 = _search.estimate_level(spec, counts[level], child_keys, level, n)
        opened = np.arange(pi.size)
        opened = opened[symbol[opened] != 0]
        w = weight[parent[opened]]
        np.add.at(mass, (ctx[parent[opened]], symbol[opened]), w * f[opened])
        np.add.at(var, (ctx[parent[opened]], symbol[opened]), (w * std0[opened]) ** 2)
        ended_child = np.flatnonzero(symbol == 0)
        if ended_child.size:
            rows = np.hstack(
                [prefixes[parent[ended_child]], np.zeros((ended_child.size, 1), np.uint16)]
            )
            lengths = np.count_nonzero(rows, axis=1)
            for mm in np.unique(lengths).tolist():
                these = ended_child[lengths == mm]
                start = empty_key(these.size)
                for pos in range(mm + 1):
                    start = extend_keys(start, rows[lengths == mm, pos])
                f[these], std[these], std0[these] = _search._pooled(spec, counts, start, mm, n)
        z = np.zeros(f.size)
        finite = np.isfinite(std0)
        z[finite] = f[finite] / std0[finite]
        z_tested.append(z)
        per_level.append(int(child_keys.size))
        final = level == spec.groups - 1
        if final and last is not None:  # the last level's candidates, for a union of passes
            rows = np.hstack([prefixes[parent], symbol[:, None].astype(np.uint16)])
            last.append((rows, f, std, std0, z))
        base = final_rule.removeprefix("reserve+")
        if final and base != "plain":
            rows = np.hstack([prefixes[parent], symbol[:, None].astype(np.uint16)])
            keep = final_keep(f, std0, rows, spec.top_k, base)
        elif not final and final_rule.startswith("reserve"):
            # ended strings keep their own places: they cost one extension each, and open
            # noise prefixes (the largest of many tested) would push them out of the beam
            grow, done = np.flatnonzero(symbol != 0), np.flatnonzero(symbol == 0)
            keep = np.concatenate(
                [
                    grow[np.argsort(-f[grow], kind="stable")[:beam]],
                    done[np.argsort(-f[done], kind="stable")[: 2 * spec.top_k]],
                ]
            )
        else:
            keep = np.argsort(-f, kind="stable")[: spec.top_k if final else beam]
        prefixes = np.hstack([prefixes[parent[keep]], symbol[keep, None].astype(np.uint16)])
        keys = child_keys[keep]
        weight = np.clip(f[keep], 0.0, 1.0)
        f_sel, std_sel, z_sel = f[keep], std[keep], z[keep]
    z_all = np.concatenate(z_tested)
    hh = _search.select(spec, prefixes, f_sel, std_sel, z_sel, z_all, n, tuple(per_level))
    return hh, mass, var


def oracle(names: np.ndarray, weights: np.ndarray, top: int) -> np.ndarray:
    """Successor table of the true ``top`` strings' bytes (an upper bound, not a method)."""
    allowed = np.zeros((257, 256), dtype=bool)
    for s in names[np.argsort(-weights)[:top]]:
        raw = list(s.encode("utf-8")[:12])
        for a, b in zip([256, *raw], raw, strict=False):
            allowed[a, b] = True
    return allowed


def rules(mass: np.ndarray, var: np.ndarray) -> dict[str, np.ndarray]:
    """Candidate successor tables from pass 1's masses."""
    out: dict[str, np.ndarray] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        zu = mass.sum(0) / np.sqrt(var.sum(0))
        zb = np.where(var > 0, mass / np.sqrt(var), 0.0)
    a = mass.shape[1]
    zmax = np.maximum(_z(mass[a], var[a]), _z(mass[:a].sum(0), var[:a].sum(0)))
    for t in (2.0,):
        out[f"uni z>{t:g}"] = np.broadcast_to(zu > t, mass.shape)
        out[f"uni max z>{t:g}"] = np.broadcast_to(zmax > t, mass.shape)
    for t in (-1.0, 0.0, 1.0):
        out[f"uni z>2 & bi z>{t:g}"] = (zb > t) & (zu > 2.0)[None, :]
    return out


def ratios(epsilons: list[float], factors: list[float], seeds: list[int]) -> None:
    """Held out: the paper's PEM at eps against PEM() at every factor x eps, same draws."""
    data = {"baby names": bench.baby_names(), "city names": bench.city_names()}
    print("| data | eps | rows | recall@20 (mean) | per draw | NCR (mean) |")
    print("|---|---|---|---|---|---|")
    for label, (names, weights) in data.items():
        for eps in epsilons:
            specs = {"PEM (paper) at eps": PEM(epsilon=eps, keep=K, pool_ended=False)}
            for r in factors:
                specs[f"PEM() at {r:g} eps"] = PEM(epsilon=r * eps)
            results: dict[str, list[tuple[float, float]]] = {}
            for seed in seeds:
                values = bench.draw(names, weights, 10**6, seed=10 + seed)
                truth = bench.truth_of(values, 12)
                for row, spec in specs.items():
                    hh = spec.run(values, rng=seed)
                    m = bench.metrics(list(hh.items), list(hh.frequencies), truth, 10**6, K)
                    results.setdefault(row, []).append((m["recall"], m["ncr"]))
            for row, runs in results.items():
                a = np.array(runs)
                print(
                    f"| {label} | {eps:g} | {row} | {a[:, 0].mean():.3f} | "
                    f"{', '.join(f'{x:.2f}' for x in a[:, 0])} | {a[:, 1].mean():.3f} |",
                    flush=True,
                )


def _z(mass: np.ndarray, var: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.nan_to_num(mass / np.sqrt(var), nan=-np.inf)


def two_pass(spec: PEM, stats: Any, rule: str, t: float = 2.0) -> tuple[Any, Any, int]:
    """Pass 1 on bytes (the shipped search), pass 2 on the symbols whose evidence clears ``t``.

    ``rule="sum"``: one z per symbol over every context (the first symbols included);
    ``"max"``: the larger of the first symbols' z and the later symbols' z.
    """
    hh, mass, var = search(spec, stats, None, 4 * K)
    a = mass.shape[1]
    if rule == "sum":
        z = _z(mass.sum(0), var.sum(0))
    else:
        z = np.maximum(_z(mass[a], var[a]), _z(mass[:a].sum(0), var[:a].sum(0)))
    allowed = np.broadcast_to(z > t, mass.shape)
    return hh, search(spec, stats, allowed, 4 * K)[0], int(np.count_nonzero(z > t))


def heldout(epsilons: list[float], factors: list[float], seeds: list[int]) -> None:
    """Held out: paper PEM at eps; PEM() on bytes and the learned alphabet at factor x eps."""
    data = {"baby names": bench.baby_names(), "city names": bench.city_names()}
    print("| data | eps | rows | recall@20 (mean) | per draw | NCR (mean) |")
    print("|---|---|---|---|---|---|")
    for label, (names, weights) in data.items():
        for eps in epsilons:
            results: dict[str, list[tuple[float, float]]] = {}
            for seed in seeds:
                values = bench.draw(names, weights, 10**6, seed=10 + seed)
                truth = bench.truth_of(values, 12)
                paper = PEM(epsilon=eps, keep=K, pool_ended=False).run(values, rng=seed)
                runs = {"PEM (paper) at eps": paper}
                for r in factors:
                    spec = PEM(epsilon=r * eps)
                    stats = spec.aggregate(spec.randomize(values, rng=seed))
                    b, lh, size = two_pass(spec, stats, "sum")
                    lm = two_pass(spec, stats, "max")[1]
                    shipped = spec.estimate(stats)
                    assert b.items == shipped.items  # pass 1 is the shipped search
                    runs[f"PEM() bytes at {r:g} eps"] = b
                    runs[f"learned (sum) at {r:g} eps"] = lh
                    runs[f"learned (max) at {r:g} eps"] = lm
                    print(f"  {label} eps {eps:g} x{r:g} seed {seed}: {size} symbols", flush=True)
                for row, hh in runs.items():
                    m = bench.metrics(list(hh.items), list(hh.frequencies), truth, 10**6, K)
                    results.setdefault(row, []).append((m["recall"], m["ncr"]))
            for row, rr in results.items():
                a = np.array(rr)
                print(
                    f"| {label} | {eps:g} | {row} | {a[:, 0].mean():.3f} | "
                    f"{', '.join(f'{x:.2f}' for x in a[:, 0])} | {a[:, 1].mean():.3f} |",
                    flush=True,
                )


def union_pass(spec: PEM, stats: Any, rule: str = "utf8+max") -> Any:
    """Both passes (bytes, learned sum z > 2); the last level ranks their candidates together.

    A string's estimate is the same function of the Stats in either pass (up to the
    collision correction's tested set), so the union ranks on one scale; ``rule`` keeps
    the noise rows of the byte pass's last level from taking the learned pass's names'
    places.
    """
    last: list[tuple[np.ndarray, ...]] = []
    _, mass, var = search(spec, stats, None, 4 * K, "reserve+" + rule, last)
    z = _z(mass.sum(0), var.sum(0))
    allowed = np.broadcast_to(z > 2.0, mass.shape)
    search(spec, stats, allowed, 4 * K, "reserve+" + rule, last)
    rows, f, std, std0, zz = (np.concatenate(parts) for parts in zip(*last, strict=True))
    _, first = np.unique(rows, axis=0, return_index=True)
    first = np.sort(first)
    keep = first[final_keep(f[first], std0[first], rows[first], spec.top_k, rule)]
    return _search.select(spec, rows[keep], f[keep], std[keep], zz[keep], zz, stats.n, ())


def finals(epsilons: list[float], factors: list[float], seeds: list[int], data: str) -> None:
    """Held out or tuning: the last level's ranking rules on the same Stats."""
    sets = {
        "baby names": bench.baby_names,
        "city names": bench.city_names,
        "girls (tuning)": lambda: bench.baby_names("F"),
    }
    chosen = [d for d in sets if d.startswith(data)] if data != "heldout" else list(sets)[:2]
    print("| data | eps | rows | recall@20 (mean) | per draw | NCR (mean) |")
    print("|---|---|---|---|---|---|")
    for label in chosen:
        names, weights = sets[label]()
        for eps in epsilons:
            results: dict[str, list[tuple[float, float]]] = {}
            for seed in seeds:
                values = bench.draw(names, weights, 10**6, seed=10 + seed)
                truth = bench.truth_of(values, 12)
                paper = PEM(epsilon=eps, keep=K, pool_ended=False).run(values, rng=seed)
                runs = {"PEM (paper) at eps": paper}
                for r in factors:
                    spec = PEM(epsilon=r * eps)
                    stats = spec.aggregate(spec.randomize(values, rng=seed))
                    for rule in FINAL_RULES:
                        runs[f"{rule} at {r:g} eps"] = search(spec, stats, None, 4 * K, rule)[0]
                    runs[f"union at {r:g} eps"] = union_pass(spec, stats)
                for row, hh in runs.items():
                    m = bench.metrics(list(hh.items), list(hh.frequencies), truth, 10**6, K)
                    results.setdefault(row, []).append((m["recall"], m["ncr"]))
            for row, rr in results.items():
                a = np.array(rr)
                print(
                    f"| {label} | {eps:g} | {row} | {a[:, 0].mean():.3f} | "
                    f"{', '.join(f'{x:.2f}' for x in a[:, 0])} | {a[:, 1].mean():.3f} |",
                    flush=True,
                )


def main() -> None:
    """Run pass 1 and the pass-2 variants; print recall@20 per row."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--eps", type=float, nargs="+", default=[2.4])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--data", default="F")
    parser.add_argument("--beam", type=int, nargs="+", default=[80])
    parser.add_argument("--ratios", type=float, nargs="*", default=None)
    parser.add_argument("--heldout", type=float, nargs="*", default=None)
    parser.add_argument("--finals", type=float, nargs="*", default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.finals is not None:
        finals(args.eps, args.finals, args.seeds, args.data)
        return
    if args.heldout is not None:
        heldout(args.eps, args.heldout, args.seeds)
        return
    if args.ratios is not None:
        ratios(args.eps, args.ratios, args.seeds)
        return
    if args.data == "cities":
        names, weights = bench.city_names()
    else:
        names, weights = bench.baby_names(None if args.data == "all" else args.data)
    for eps in args.eps:
        spec = PEM(epsilon=eps)
        res: dict[str, list[float]] = {}
        for seed in args.seeds:
            values = bench.draw(names, weights, 10**6, seed=10 + seed)
            truth = bench.truth_of(values, 12)
            stats = spec.aggregate(spec.randomize(values, rng=seed))
            t0 = time.perf_counter()
            hh, mass, var = search(spec, stats, None, 4 * K)
            t1 = time.perf_counter()
            runs = {"bytes": hh}
            tables = rules(mass, var)
            uni = oracle(names, weights, 2000).any(0)
            tables["oracle unigram top2000"] = np.broadcast_to(uni, mass.shape)
            tables["oracle bigram top300"] = oracle(names, weights, 300)
            for label, allowed in tables.items():
                for beam in args.beam:
                    ext = f"{label} b{beam}"
                    runs[ext] = search(spec, stats, allowed, beam)[0]
                    cnt = np.count_nonzero(allowed[1:], axis=1)
                    print(
                        f"  {ext}: mean successors {cnt[cnt > 0].mean():.1f} "
                        f"(letters used {np.count_nonzero(allowed.any(0))})"
                    )
            for label, h in runs.items():
                m = bench.metrics(list(h.items), list(h.frequencies), truth, 10**6, K)
                res.setdefault(label, []).append(m["recall"])
            print(f"eps {eps} seed {seed}: pass1 {t1 - t0:.1f} s", flush=True)
        for label, r in res.items():
            print(f"| {args.data} | {eps:g} | {label} | {np.mean(r):.3f} | {r} |", flush=True)


if __name__ == "__main__":
    main()
