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

from ..spec import Stats
from ._strings import decode_symbols, empty_key, extend_keys, family_seeds, hash_keys
from .result import HeavyHitters

#: Extensions estimated above this many null standard errors enter the collision correction.
_Z_SIGNIFICANT = 3.0
_JACOBI_STEPS = 2


def estimate_level(
    spec: Any, table: np.ndarray, keys: np.ndarray, level: int, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Corrected estimates, their standard errors and the null standard errors of the
    prefixes named by ``keys`` from group ``level``'s table (H x g counts)."""
    h, g = table.shape
    n_l = int(table.sum())
    size = keys.shape[0]
    if n_l == 0 or size == 0:  # no report in this group: nothing is known
        inf = np.full(size, np.inf)
        return np.zeros(size), inf, inf.copy()
    p = spec.p
    gap = p - 1.0 / g
    hashed = hash_keys(keys[None, :], family_seeds(level, h)[:, None], g)  # (H, C)
    support = np.take_along_axis(table, hashed, axis=1).sum(axis=0)
    raw = (support / n_l - 1.0 / g) / gap
    null_var = (1.0 / g) * (1.0 - 1.0 / g) / (n_l * gap * gap)
    significant = np.flatnonzero(raw > _Z_SIGNIFICANT * np.sqrt(null_var))
    f = raw
    if significant.size:
        rows = (np.arange(h)[:, None] * g + hashed[:, significant]).ravel()
        for _ in range(_JACOBI_STEPS):
            w = np.clip(f[significant], 0.0, 1.0)
            weights = np.broadcast_to(w, (h, significant.size)).ravel()
            spread = np.bincount(rows, weights=weights, minlength=h * g).reshape(h, g)
            collided = np.take_along_axis(spread, hashed, axis=1).mean(axis=0)
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
    family_var = untested * cut / ((g - 1.0) * h)
    fc = np.clip(f, 0.0, 1.0)
    hit = 1.0 / g + fc * gap
    oracle_var = hit * (1.0 - hit) / (n_l * gap * gap)
    # the group is a value-blind sample of the n users: its frequency differs from theirs
    sample_var = fc * (1.0 - fc) * max(0.0, 1.0 - n_l / n) / n_l
    std = np.sqrt(oracle_var + sample_var + family_var)
    std0 = np.full(size, np.sqrt(null_var + family_var))
    return f, std, std0


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
        m = prefixes.shape[0]
        ended = prefixes[:, -1] == 0 if level else np.zeros(m, dtype=bool)
        open_rows, closed_rows = np.flatnonzero(~ended), np.flatnonzero(ended)
        parent = np.concatenate([np.repeat(open_rows, alphabet), closed_rows])
        symbol = np.concatenate(
            [np.tile(np.arange(alphabet), open_rows.size), np.zeros(closed_rows.size, np.int64)]
        )
        child_keys = extend_keys(keys[parent], symbol)
        f, std, std0 = estimate_level(spec, counts[level], child_keys, level, n)
        z = np.zeros(f.size)
        finite = np.isfinite(std0)
        z[finite] = f[finite] / std0[finite]
        z_tested.append(z)
        per_level.append(int(child_keys.size))
        keep = spec._prune(f, std0, level == spec.groups - 1)
        prefixes = np.hstack([prefixes[parent[keep]], symbol[keep, None].astype(np.uint16)])
        keys = child_keys[keep]
        f_sel, std_sel, z_sel = f[keep], std[keep], z[keep]
    z_all = np.concatenate(z_tested)
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
        n=stats.n,
        spec=spec,
        tested=tested,
        candidates_per_level=tuple(per_level),
    )
