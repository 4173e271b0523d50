"""PEM's search with a second pass over an alphabet learned from the reports.

``PEM.estimate(stats, extensions="learned")``, the default of ``PEM()`` (``pool_ended``).
A byte-wise beam tests all A = 256 extensions of each survivor and about 1/A of them
survive, so the beam's cut sits near the ``1 - 1/A`` quantile of the null (~2.66 null
standard errors): every open prefix of a string must clear it in its own group, and most
bytes never occur in the data. Every round runs on the server, on the same Stats (the
reports and their meaning are those of :class:`ldpkit.discovery.PEM`):

1. the byte search; each tested open extension ``p + b`` adds to the evidence for symbol
   ``b`` with the weight ``w_p`` = its parent's estimate clipped to [0, 1] (1 for the empty
   prefix): ``M_b = sum w_p f(p + b)``, ``V_b = sum w_p^2 sigma0(p + b)^2``. The parents
   were chosen on the previous group's reports and the children are estimated from this
   group's, so ``M_b`` is unbiased for ``sum w_p f_true(p + b)`` given the parents; the
   weight is the matched filter of children whose frequencies are shares of their
   parent's;
2. the same search where an open prefix past the first symbol extends only by the end
   symbol and the symbols with ``M_b / sqrt(V_b) > 2``;
3. the last level ranks both passes' candidates together (a string's estimate is the same
   function of the Stats in either pass, up to which extensions entered the collision
   correction), so a string whose symbols the evidence missed is still found if the byte
   pass found it.

In both passes the beam ranks an open extension by the evidence along its path, not by its
own estimate alone: its score is ``DECAY`` (0.7) times its parent's score plus
``min(z, CAP)`` (``CAP`` = 3, z its estimate over the null standard error), ties broken by
z, and the beam keeps ``WIDTH top_k`` (8 top_k) of them, any number per parent. A string's
prefixes are estimated from disjoint groups of users, so their errors are independent, and
each prefix is at least as frequent as the string: a true prefix that dips near the noise
at one length keeps the credit of its strong ancestors and survives one level, where its
own strong children then carry it; a noise extension of a noise prefix has no such credit.
The cap (about the best noise extension's z among 256) stops a very frequent ancestor from
carrying all of its noise descendants past the real prefixes of other strings; the decay
forgets old evidence, so that a path that stopped being strong falls back. The beam is
twice as wide as the level-wise one it replaced (which ranked by the estimate alone in
``4 top_k``, ``paths=False``): wider alone lost (girls' names at eps 2.4, 3 draws: 0.483
against 0.500), wider with the path score won (0.617; ``studies/discovery_paths.py``).

In both passes ended strings keep ``2 top_k`` places of their own at every level (they cost
one extension each, and the open prefixes, the largest of many tested, would push them out
of the beam), and the last level ranks a row that has not ended (one group's estimate, the
largest of the ``m`` such rows tested) by ``f - sigma0 Phi^-1(1 - 1/m)``, its expected
selection bias. With the bytes alphabet a last-level row that is not UTF-8 is dropped: the
client cuts at whole characters, so no device holds it. The control's family
(``HeavyHitters.tested``, the sum of ``candidates_per_level``) is every candidate of both
passes.

Tuned on girls' baby names at 10^6 users and measured on the held-out data
(``studies/discovery_moonshot.py``, ``studies/discovery_paths.py``; docs/design/METHODS.md,
open-vocabulary discovery, the moonshot).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

from ..spec import Stats
from ._search import children, score_level, select
from ._strings import empty_key
from .result import HeavyHitters

#: Evidence (in standard errors) a symbol needs to be tried in the second pass.
THRESHOLD = 2.0
#: Path score of an open extension: ``DECAY x`` its parent's score ``+ min(z, CAP)``.
DECAY = 0.7
CAP = 3.0
#: Default beam of the path-scored search, in multiples of top_k.
WIDTH = 8

_Last = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _beam(
    spec: Any,
    stats: Stats,
    allowed: np.ndarray | None,
    paths: bool = True,
    *,
    decay: float = DECAY,
    cap: float = CAP,
    width: int | None = None,
) -> tuple[_Last, list[np.ndarray], list[int], np.ndarray, np.ndarray]:
    """Run the search up to the last level; ``allowed[b]``: may an open prefix extend by b.

    ``paths``: rank the open extensions by their path score (``decay`` x the parent's
    score + ``min(z, cap)``, ties by z) in a beam of ``WIDTH top_k``; False: by their own
    estimate in a beam of ``4 top_k`` (the level-wise rule). ``width`` (a number of
    prefixes; studies), else ``spec.keep``, overrides either width. Returns the last level's candidates (symbol rows, estimates, errors,
    null errors, z), every level's z, the candidates per level, and the evidence
    ``(M, V)`` per symbol.
    """
    counts, n, a = stats.counts, stats.n, spec.symbols
    mass, var = np.zeros(a), np.zeros(a)
    prefixes = np.zeros((1, 0), dtype=np.uint16)
    keys = empty_key(1)
    weight = np.ones(1)
    path = np.zeros(1)
    z_tested: list[np.ndarray] = []
    per_level: list[int] = []
    beam = width or spec.keep or min((WIDTH if paths else 4) * spec.top_k, 4096)
    for level in range(spec.groups):
        symbols = np.arange(a) if allowed is None or level == 0 else np.flatnonzero(allowed)
        parent, symbol = children(prefixes, level, symbols)
        child_keys, f, std, std0, z = score_level(
            spec, counts, n, level, prefixes, keys, parent, symbol
        )
        z_tested.append(z)
        grows = np.flatnonzero(symbol != 0)  # open extensions: own-group, unpooled estimates
        w = weight[parent[grows]]
        mass += np.bincount(symbol[grows], weights=w * f[grows], minlength=a)
        var += np.bincount(symbol[grows], weights=(w * std0[grows]) ** 2, minlength=a)
        per_level.append(int(child_keys.size))
        if level == spec.groups - 1:
            rows = np.hstack([prefixes[parent], symbol[:, None].astype(np.uint16)])
            return (rows, f, std, std0, z), z_tested, per_level, mass, var
        done = np.flatnonzero(symbol == 0)  # ended strings: places of their own
        if paths:  # a dip at one level is forgiven if the path is strong around it
            score = decay * path[parent] + np.minimum(z, cap)
            order = np.lexsort((-z[grows], -score[grows]))
        else:  # the level-wise rule: each extension by its own estimate
            score = z
            order = np.argsort(-f[grows], kind="stable")
        keep = np.concatenate(
            [grows[order[:beam]], done[np.argsort(-f[done], kind="stable")[: 2 * spec.top_k]]]
        )
        prefixes = np.hstack([prefixes[parent[keep]], symbol[keep, None].astype(np.uint16)])
        keys = child_keys[keep]
        weight = np.clip(f[keep], 0.0, 1.0)
        path = score[keep]
    raise AssertionError("unreachable: the last level returns")  # pragma: no cover


def learned_alphabet(mass: np.ndarray, var: np.ndarray, threshold: float) -> np.ndarray:
    """Return the symbols whose evidence ``M_b / sqrt(V_b)`` exceeds ``threshold``, and 0."""
    z = np.full(mass.shape, -np.inf)
    tested = var > 0
    z[tested] = mass[tested] / np.sqrt(var[tested])
    allowed = z > threshold
    allowed[0] = True  # the end symbol: an ended string is always a candidate
    return allowed


def utf8_rows(rows: np.ndarray) -> np.ndarray:
    """Return which symbol rows (bytes, padded with 0) are whole UTF-8 strings.

    A state machine over the positions, vectorized over the rows: the number of
    continuation bytes still owed; a lead byte 0xC2-0xF4 sets it, a continuation byte
    0x80-0xBF pays it, anything else must find it at 0 and be ASCII (or the padding).
    """
    owed = np.zeros(rows.shape[0], dtype=np.int64)
    ok = np.ones(rows.shape[0], dtype=bool)
    for col in rows.T.astype(np.int64):  # a loop over positions (at most 64)
        cont = (col >= 0x80) & (col <= 0xBF)
        lead = np.select([col >= 0xF5, col >= 0xF0, col >= 0xE0, col >= 0xC2], [-1, 3, 2, 1], 0)
        ok &= np.where(owed > 0, cont, (col < 0x80) | (lead > 0))
        owed = np.where(owed > 0, owed - 1, np.maximum(lead, 0))
    return ok & (owed == 0)


def discover_learned(
    spec: Any,
    stats: Stats,
    threshold: float = THRESHOLD,
    paths: bool = True,
    *,
    decay: float = DECAY,
    cap: float = CAP,
    width: int | None = None,
    first_width: int | None = None,
) -> HeavyHitters:
    """Search on every symbol and on the learned ones; rank both last levels together.

    ``paths=False`` ranks each level's open extensions by their own estimate (the rule
    before the path score, kept for comparison). ``decay``, ``cap``, ``width`` and the
    byte pass's ``first_width`` (numbers of prefixes) are the path rule's settings, for
    studies (``studies/discovery_paths.py``).
    """
    first, z1, per1, mass, var = _beam(
        spec, stats, None, paths, decay=decay, cap=cap, width=first_width or width
    )
    allowed = learned_alphabet(mass, var, threshold)
    lasts: list[_Last] = [first]
    z2: list[np.ndarray] = []
    per_level = per1
    if np.count_nonzero(allowed) > 1:  # some symbol has evidence: the second pass
        second, z2, per2, _, _ = _beam(
            spec, stats, allowed, paths, decay=decay, cap=cap, width=width
        )
        lasts.insert(0, second)
        per_level = [a + b for a, b in zip(per1, per2, strict=True)]  # both passes tested
    rows, f, std, std0, z = (np.concatenate(part) for part in zip(*lasts, strict=True))
    _, where = np.unique(rows, axis=0, return_index=True)  # a row in both passes: once
    where = np.sort(where)
    score = f[where].copy()
    open_ = rows[where, -1] != 0
    if open_.any():  # one group's estimate, the largest of this many: its selection bias
        score[open_] -= -special.ndtri(1.0 / max(int(open_.sum()), 2)) * std0[where][open_]
    if spec.alphabet is None:
        score[~utf8_rows(rows[where])] = -np.inf  # no device holds a row that is not UTF-8
    order = np.argsort(-score, kind="stable")
    keep = where[order[np.isfinite(score[order])][: spec.top_k]]
    keep = keep[np.argsort(-f[keep], kind="stable")]  # chosen by score, listed by frequency
    z_all = np.concatenate(z1 + z2)  # the control covers every candidate of both passes
    return select(spec, rows[keep], f[keep], std[keep], z[keep], z_all, stats.n, tuple(per_level))
