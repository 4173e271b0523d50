"""The server's search over the prefix tree (every round runs here, on the Stats).

For each level ``l`` (prefix length ``l + 1``) the survivors of the previous level are
extended by every symbol (a prefix that already ended, i.e. whose last symbol is the
padding 0, only by the padding), each extension is estimated from group ``l``'s table,
corrected for its collisions with the significant extensions, and the spec prunes.

Estimate of a prefix c in group l (``n_l`` reports, H functions, range g, ``p`` the GRR
keep probability, ``q* = 1/g``)::

    S_c   = sum_j counts[l, j, h_{l,j}(c)]
    f_c   = (S_c / n_l - 1/g) / (p - 1/g)                                  (FO17 eq. 2)

Over the draw of the public family, ``E[f_c]`` is the group's frequency of c. For the one
family the spec fixes, a string v != c adds ``f_v (kappa(v, c) - 1/g) g / (g - 1)``, where
``kappa(v, c)`` is the share of the H functions under which v and c collide; the server
knows kappa for the extensions it tests, so it subtracts that term for every extension
estimated significantly above zero (two Jacobi steps of the linear system). What stays is
the collisions with strings it never tested, whose variance over families is
``sum_{v untested} f_v^2 / ((g - 1) H)`` (bounded by the untested mass times the
significance cut).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

from .. import _parallel
from ..frequency._items import COMPILED_MIN_WORDS
from ..spec import Stats
from ._strings import decode_symbols, empty_key, extend_keys, family_seeds, hash_keys_u64
from .result import HeavyHitters

#: Extensions estimated above this many null standard errors enter the collision correction.
_Z_SIGNIFICANT = 3.0
_JACOBI_STEPS = 2


def estimate_level(
    spec: Any, table: np.ndarray, keys: np.ndarray, level: int, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Estimate the prefixes named by ``keys`` from group ``level``'s table (H x g counts).

    Returns the corrected estimates, their standard errors and the null standard errors.
    """
    f, n_l, family_var = _level_raw(spec, table, keys, level)
    std, std0 = _errors(spec, f, n_l, family_var, n, table.shape[1])
    return f, std, std0


def _level_raw(
    spec: Any, table: np.ndarray, keys: np.ndarray, level: int
) -> tuple[np.ndarray, int, float]:
    """Corrected estimates, the group's size and the variance of untested collisions."""
    h, g = table.shape
    n_l = int(table.sum())
    size = keys.shape[0]
    if n_l == 0 or size == 0:  # no report in this group: nothing is known
        return np.zeros(size), n_l, 0.0
    gap = spec.p - 1.0 / g
    seeds = family_seeds(level, h)
    compiled = _parallel.use_compiled(h * size, COMPILED_MIN_WORDS)
    if compiled:  # the same sums without the (H, C) block of cells
        from ._kernels_search import cell_sums

        support = cell_sums(table, keys, seeds)
    else:
        cells = _cells(keys, seeds, g)  # (H, C)
        support = table.ravel()[cells].sum(axis=0)
    raw = (support / n_l - 1.0 / g) / gap
    null_var = (1.0 / g) * (1.0 - 1.0 / g) / (n_l * gap * gap)
    significant = np.flatnonzero(raw > _Z_SIGNIFICANT * np.sqrt(null_var))
    f = raw
    if significant.size:  # their cells: a few columns, computed apart when compiled
        sig_cells = _cells(keys[significant], seeds, g) if compiled else cells[:, significant]
        rows = sig_cells.ravel()
        for _ in range(_JACOBI_STEPS):
            w = np.clip(f[significant], 0.0, 1.0)
            weights = np.broadcast_to(w, (h, significant.size)).ravel()
            spread = np.bincount(rows, weights=weights, minlength=h * g)
            if compiled:
                collided = cell_sums(spread.reshape(h, g), keys, seeds) / h
            else:
                collided = spread[cells].mean(axis=0)
            own = np.zeros(size)
            own[significant] = w
            total = float(w.sum())
            bias = collided - own - (total - own) / g
            f = raw - bias * g / (g - 1.0)
        tested_mass = float(np.clip(f[significant], 0.0, 1.0).sum())
    else:
        tested_mass = 0.0
    untested = max(0.0, 1.0 - tested_mass)
    cut = min(untested, _Z_SIGNIFICANT * float(np.sqrt(null_var)))
    return f, n_l, untested * cut / ((g - 1.0) * h)


def _cells(keys: np.ndarray, seeds: np.ndarray, g: int) -> np.ndarray:
    """Cell ``j g + h_j(c)`` of candidate c under function j in the flattened (H, g) table."""
    hashed = hash_keys_u64(keys[None, :], seeds[:, None], g)  # (H, C)
    hashed += (np.arange(seeds.shape[0], dtype=np.uint64) * np.uint64(g))[:, None]
    return hashed.view(np.int64)  # < H g < 2^63: the same bits as int64


def _errors(
    spec: Any, f: np.ndarray, n_l: int, family_var: float | np.ndarray, n: int, g: int
) -> tuple[np.ndarray, np.ndarray]:
    """Return the standard errors at the estimates and at zero, from ``n_l`` reports."""
    if n_l == 0:
        inf = np.full(f.shape, np.inf)
        return inf, inf.copy()
    gap = spec.p - 1.0 / g
    null_var = (1.0 / g) * (1.0 - 1.0 / g) / (n_l * gap * gap)
    fc = np.clip(f, 0.0, 1.0)
    hit = 1.0 / g + fc * gap
    oracle_var = hit * (1.0 - hit) / (n_l * gap * gap)
    # the group is a value-blind sample of the n users: its frequency differs from theirs
    sample_var = fc * (1.0 - fc) * max(0.0, 1.0 - n_l / n) / n_l
    std = np.sqrt(oracle_var + sample_var + family_var)
    std0 = np.broadcast_to(np.sqrt(null_var + family_var), f.shape).astype(np.float64)
    return std, std0


def _pooled(
    spec: Any, counts: np.ndarray, keys: np.ndarray, level: int, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Estimate the strings that ended by ``level``, pooled over the deeper groups.

    A string ended when its last symbol is the padding. Each of the groups ``level ..
    max_length - 1`` counts exactly the users holding the string (padded with more end
    symbols), so the estimates are averaged with weights n_l (as one group of all their
    users).
    """
    g = counts.shape[2]
    total = np.zeros(keys.shape[0])
    family = 0.0
    users = 0
    for deeper in range(level, spec.groups):  # a loop over levels, not over candidates
        if deeper > level:
            keys = extend_keys(keys, np.zeros(keys.shape[0], dtype=np.int64))
        f, n_l, family_var = _level_raw(spec, counts[deeper], keys, deeper)
        total += n_l * f
        family += n_l * n_l * family_var
        users += n_l
    if users == 0:
        return _pooled_empty(keys.shape[0])
    f = total / users
    std, std0 = _errors(spec, f, users, family / (users * users), n, g)
    return f, std, std0


def _pooled_empty(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    inf = np.full(size, np.inf)
    return np.zeros(size), inf, inf.copy()


def _pool(
    spec: Any,
    counts: np.ndarray,
    n: int,
    prefixes: np.ndarray,
    parent: np.ndarray,
    symbol: np.ndarray,
    f: np.ndarray,
    std: np.ndarray,
    std0: np.ndarray,
) -> None:
    """Replace the ended extensions' estimates by their pooled ones, in place."""
    ended_child = np.flatnonzero(symbol == 0)
    if not ended_child.size:
        return
    rows = np.hstack([prefixes[parent[ended_child]], np.zeros((ended_child.size, 1), np.uint16)])
    lengths = np.count_nonzero(rows, axis=1)  # padding only trails
    for m in np.unique(lengths).tolist():  # a loop over string lengths
        these = ended_child[lengths == m]
        start = empty_key(these.size)
        for pos in range(m + 1):  # the string, then one end symbol
            start = extend_keys(start, rows[lengths == m, pos])
        f[these], std[these], std0[these] = _pooled(spec, counts, start, m, n)


def children(
    prefixes: np.ndarray, level: int, symbols: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Return one level's candidates as ``(parent row, symbol)``.

    Each open prefix is extended by every one of ``symbols``, each ended one (last symbol the
    padding 0) by the padding again.
    """
    m = prefixes.shape[0]
    ended = prefixes[:, -1] == 0 if level else np.zeros(m, dtype=bool)
    open_rows, closed_rows = np.flatnonzero(~ended), np.flatnonzero(ended)
    parent = np.concatenate([np.repeat(open_rows, symbols.size), closed_rows])
    symbol = np.concatenate(
        [np.tile(symbols, open_rows.size), np.zeros(closed_rows.size, np.int64)]
    )
    return parent, symbol


def score_level(
    spec: Any,
    counts: np.ndarray,
    n: int,
    level: int,
    prefixes: np.ndarray,
    keys: np.ndarray,
    parent: np.ndarray,
    symbol: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Estimate one level's candidates; return ``(keys, f, std, std0, z)``.

    Ended strings get their pooled estimates when the spec pools them (:func:`_pool`, which
    touches those rows only); ``z = f / std0`` where ``std0`` is finite, else 0.
    """
    child_keys = extend_keys(keys[parent], symbol)
    f, std, std0 = estimate_level(spec, counts[level], child_keys, level, n)
    if spec.pool_ended:
        _pool(spec, counts, n, prefixes, parent, symbol, f, std, std0)
    z = np.zeros(f.size)
    finite = np.isfinite(std0)
    z[finite] = f[finite] / std0[finite]
    return child_keys, f, std, std0, z


def discover(spec: Any, stats: Stats) -> HeavyHitters:
    """Run every round of the search on ``stats``; the spec's ``_prune`` keeps survivors."""
    counts = stats.counts
    n = stats.n
    alphabet = spec.symbols
    prefixes = np.zeros((1, 0), dtype=np.uint16)
    keys = empty_key(1)
    z_tested: list[np.ndarray] = []
    per_level: list[int] = []
    f_sel = std_sel = z_sel = np.zeros(0)
    for level in range(spec.groups):
        parent, symbol = children(prefixes, level, np.arange(alphabet))
        child_keys, f, std, std0, z = score_level(
            spec, counts, n, level, prefixes, keys, parent, symbol
        )
        z_tested.append(z)
        per_level.append(int(child_keys.size))
        keep = spec._prune(f, std0, level == spec.groups - 1)
        prefixes = np.hstack([prefixes[parent[keep]], symbol[keep, None].astype(np.uint16)])
        keys = child_keys[keep]
        f_sel, std_sel, z_sel = f[keep], std[keep], z[keep]
    z_all = np.concatenate(z_tested)
    return select(spec, prefixes, f_sel, std_sel, z_sel, z_all, stats.n, tuple(per_level))


def select(
    spec: Any,
    prefixes: np.ndarray,
    f_sel: np.ndarray,
    std_sel: np.ndarray,
    z_sel: np.ndarray,
    z_all: np.ndarray,
    n: int,
    per_level: tuple[int, ...],
) -> HeavyHitters:
    """Apply the spec's ``control`` to the final survivors; build the result.

    ``z_all`` holds the z-score of every candidate tested at every level (the family the
    control covers); ``prefixes`` are the survivors' symbol rows.
    """
    tested = int(z_all.size)
    control = spec.control
    chosen = np.arange(f_sel.size)
    if control == "fwer" and tested:
        cut = float(-special.ndtri(spec.alpha / tested))  # one-sided Bonferroni
        chosen = np.flatnonzero(z_sel > cut)
    elif control == "fdr" and tested:
        # Benjamini-Hochberg step-up over the one-sided p-values of every tested prefix
        pvalues = np.sort(special.ndtr(-z_all))
        passing = np.flatnonzero(pvalues <= spec.alpha * np.arange(1, tested + 1) / tested)
        bound = float(pvalues[passing[-1]]) if passing.size else -1.0
        chosen = np.flatnonzero(special.ndtr(-z_sel) <= bound)
    items = tuple(decode_symbols(prefixes[i], spec.alphabet) for i in chosen.tolist())
    return HeavyHitters(
        items=items,
        frequencies=np.asarray(f_sel[chosen], dtype=np.float64),
        std_error=np.asarray(std_sel[chosen], dtype=np.float64),
        n=n,
        spec=spec,
        tested=tested,
        candidates_per_level=per_level,
    )
