"""PEM's search over an alphabet learned from the reports (``extensions="learned"``).

A byte-wise beam tests all A = 256 extensions of each survivor, and about 1/A of them
survive, so the beam's cut sits near the ``1 - 1/A`` quantile of the null (~2.66 null
standard errors): every open prefix of a string must clear it in its own group. Most
bytes never occur in the data; testing them only raises the cut. This search runs twice
on the same Stats (every round on the server; the reports and their meaning are those of
:class:`ldpkit.discovery.PEM`):

1. the byte search; each tested open extension ``p + b`` adds to the evidence for symbol
   ``b`` with the weight ``w_p`` = its parent's estimate clipped to [0, 1] (1 for the empty
   prefix): ``M_b = sum w_p f(p + b)``, ``V_b = sum w_p^2 sigma0(p + b)^2``. The parents
   were chosen on the previous group's reports and the children are estimated from this
   group's, so ``M_b`` is unbiased for ``sum w_p f_true(p + b)`` given the parents, and the
   weight is the matched filter of children whose frequencies are shares of their
   parent's;
2. the same search where an open prefix past the first symbol extends only by the end
   symbol and the symbols with ``M_b / sqrt(V_b) > threshold`` (default 2).

The control's family (``HeavyHitters.tested``) is every candidate of both passes. Tuned on
girls' baby names at 10^6 users (``studies/discovery_moonshot.py``); measured on the
held-out data in docs/design/METHODS.md (open-vocabulary discovery, the learned alphabet).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..spec import Stats
from ._search import _pooled, estimate_level, select
from ._strings import empty_key, extend_keys
from .result import HeavyHitters

#: Evidence (in standard errors) a symbol needs to be tried in the second pass.
THRESHOLD = 2.0


def _beam(
    spec: Any, stats: Stats, allowed: np.ndarray | None
) -> tuple[tuple[np.ndarray, ...], list[np.ndarray], list[int], np.ndarray, np.ndarray]:
    """Run the beam search; ``allowed[b]``: may an open prefix (past level 0) extend by b.

    Returns the final survivors (prefix rows, estimates, errors, z), every level's z, the
    candidates per level, and the evidence ``(M, V)`` per symbol.
    """
    counts, n, a = stats.counts, stats.n, spec.symbols
    mass, var = np.zeros(a), np.zeros(a)
    prefixes = np.zeros((1, 0), dtype=np.uint16)
    keys = empty_key(1)
    weight = np.ones(1)
    z_tested: list[np.ndarray] = []
    per_level: list[int] = []
    f_sel = std_sel = z_sel = np.zeros(0)
    for level in range(spec.groups):
        m = prefixes.shape[0]
        ended = prefixes[:, -1] == 0 if level else np.zeros(m, dtype=bool)
        open_rows, closed_rows = np.flatnonzero(~ended), np.flatnonzero(ended)
        symbols = np.arange(a) if allowed is None or level == 0 else np.flatnonzero(allowed)
        parent = np.concatenate([np.repeat(open_rows, symbols.size), closed_rows])
        symbol = np.concatenate(
            [np.tile(symbols, open_rows.size), np.zeros(closed_rows.size, np.int64)]
        )
        child_keys = extend_keys(keys[parent], symbol)
        f, std, std0 = estimate_level(spec, counts[level], child_keys, level, n)
        grows = np.flatnonzero(symbol != 0)  # open extensions: own-group, unpooled estimates
        w = weight[parent[grows]]
        mass += np.bincount(symbol[grows], weights=w * f[grows], minlength=a)
        var += np.bincount(symbol[grows], weights=(w * std0[grows]) ** 2, minlength=a)
        if spec.pool_ended:
            _pool(spec, counts, n, prefixes, parent, symbol, f, std, std0)
        z = np.zeros(f.size)
        finite = np.isfinite(std0)
        z[finite] = f[finite] / std0[finite]
        z_tested.append(z)
        per_level.append(int(child_keys.size))
        keep = spec._prune(f, std0, level == spec.groups - 1)
        prefixes = np.hstack([prefixes[parent[keep]], symbol[keep, None].astype(np.uint16)])
        keys = child_keys[keep]
        weight = np.clip(f[keep], 0.0, 1.0)
        f_sel, std_sel, z_sel = f[keep], std[keep], z[keep]
    return (prefixes, f_sel, std_sel, z_sel), z_tested, per_level, mass, var


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


def learned_alphabet(mass: np.ndarray, var: np.ndarray, threshold: float) -> np.ndarray:
    """Return the symbols whose evidence ``M_b / sqrt(V_b)`` exceeds ``threshold``, and 0."""
    z = np.full(mass.shape, -np.inf)
    tested = var > 0
    z[tested] = mass[tested] / np.sqrt(var[tested])
    allowed = z > threshold
    allowed[0] = True  # the end symbol: an ended string is always a candidate
    return allowed


def discover_learned(spec: Any, stats: Stats, threshold: float = THRESHOLD) -> HeavyHitters:
    """Search twice: on every symbol, then on the symbols the first pass gave evidence for."""
    first, z1, _, mass, var = _beam(spec, stats, None)
    allowed = learned_alphabet(mass, var, threshold)
    z2: list[np.ndarray] = []
    if np.count_nonzero(allowed) == 1:  # no symbol has evidence: keep the first pass
        final, per_level = first, [int(z.size) for z in z1]
    else:
        final, z2, per_level, _, _ = _beam(spec, stats, allowed)
    z_all = np.concatenate(z1 + z2)  # the control covers every candidate of both passes
    prefixes, f_sel, std_sel, z_sel = final
    return select(spec, prefixes, f_sel, std_sel, z_sel, z_all, stats.n, tuple(per_level))
