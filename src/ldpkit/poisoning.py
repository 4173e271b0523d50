"""Data poisoning of frequency oracles: the maximal-gain attack and cheap defences.

LDP hides each user's value, so the collector cannot tell a crafted report from an honest
one: whoever may send reports may send fake users. Cao, Jia & Gong, "Data Poisoning
Attacks to Local Differential Privacy Protocols" (USENIX Security 2021), give the
*maximal-gain attack* (MGA): ``m`` fake users, a fraction ``beta = m / (n + m)`` of all
reports, craft the report that raises the estimated frequencies of ``r`` target items the
most. This module builds those reports for GRR, unary encoding (OUE, SUE) and local hashing
(OLH, BLH), gives the expected frequency gain in closed form, and implements two detectors
the paper discusses. ``benchmarks/poisoning.py`` measures them
(docs/design/THREAT_MODEL.md has the table).

The frequency gain is ``G = E[sum_{t in T} (f~_t(after) - f~_t(before))]``; the estimator
of every oracle here is ``f~ = (C / N - q) / (p - q)`` over ``N`` reports, so with a
target frequency ``f_T = sum_{t in T} f_t`` among the genuine users and ``S`` the number
of targets one fake report supports (derived here from that estimator; it is the paper's
Theorems 1-3 with the realized ``p``, ``q``)::

    G = beta * ((E[S] - r q) / (p - q) - f_T)

* GRR: a fake user reports one target (chosen at random), ``S = 1``:
  ``G = beta ((1 - r q)/(p - q) - f_T)``;
* OUE/SUE: a fake report sets every target bit, ``S = r``:
  ``G = beta (r (1 - q)/(p - q) - f_T)``; the *evasive* variant also sets
  ``round(p + (d - 1) q) - r`` random other bits, so that its number of ones is the genuine
  mean (the gain does not depend on them);
* OLH/BLH: a fake user picks a hash seed mapping many targets to one value ``y`` and
  reports ``(seed, y)``. The paper assumes a seed mapping all ``r`` targets together
  (``S = r``). ldpkit's family (:mod:`ldpkit.frequency.hashing`) hashes ``a v + b`` with
  ``a`` a bijective mix of the seed, so an attacker can invert the mix and pick a seed whose
  ``a`` is a small odd number: then ``a v + b`` barely moves over the domain and *every*
  item, all targets included, lands in one bucket, ``S = r`` for any target set (the
  report then supports about ``d`` items instead of about ``d / g``, which
  :func:`support_size_outliers` catches). With mixed item keys (``OLH(mix_items=True)``,
  the default) the keys fill ``[0, 2^32)``, and a multiplier below ``2^32 / (64 g)`` still
  moves ``a k + b`` by less than a 64th of a bucket over them: the same attack. The *evasive* variant tries ``search`` random
  seeds per fake user and keeps the best: ``S`` is then the largest of ``search`` maximum
  loads of ``r`` balls in ``g`` bins (:func:`max_load_distribution`, exact for a hash
  uniform and independent over the targets; the real family is only pairwise
  independent and gives the attacker somewhat more, measured in the benchmark).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ._rng import RNGLike, as_generator
from ._validation import (
    check_categorical_values,
    check_integer,
    check_memory,
    check_probability,
    check_real,
)
from .frequency import _bits
from .frequency.grr import GRR
from .frequency.hashing import LocalHashing
from .frequency.unary import UnaryEncoding
from .spec import Reports

__all__ = [
    "itemset_outliers",
    "max_load_distribution",
    "mga_expected_gain",
    "mga_reports",
    "support_size_outliers",
]

_U64_MAX = np.iinfo(np.uint64).max
_MAX_TARGETS = 64
_MAX_SEARCH = 1 << 20
# Candidate seeds x targets hashed at a time by the OLH search (bounded memory).
_SEARCH_CHUNK = 1 << 22
_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_INV1 = np.uint64(pow(0xBF58476D1CE4E5B9, -1, 1 << 64))
_INV2 = np.uint64(pow(0x94D049BB133111EB, -1, 1 << 64))
_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)


def _check_spec(spec: Any) -> None:
    if not isinstance(spec, (GRR, UnaryEncoding, LocalHashing)):
        raise TypeError(
            "spec must be a GRR, UnaryEncoding (OUE, SUE) or LocalHashing (OLH, BLH) spec, "
            f"got {type(spec).__name__}"
        )


def _check_targets(spec: Any, targets: Any, name: str = "targets") -> np.ndarray:
    t = check_categorical_values(targets, spec.domain_size, name)
    if t.shape[0] < 1 or t.shape[0] > min(_MAX_TARGETS, spec.domain_size):
        raise ValueError(
            f"targets must hold 1 to {min(_MAX_TARGETS, spec.domain_size)} items, got {t.shape[0]}"
        )
    if np.unique(t).shape[0] != t.shape[0]:
        raise ValueError(f"targets must be distinct items, got {t.tolist()}")
    return t


def max_load_distribution(r: int, g: int, search: int = 1) -> np.ndarray:
    """Law of the best of ``search`` maximum loads of ``r`` balls in ``g`` bins.

    ``P[L <= k] = r! / g^r [x^r] (sum_{j<=k} x^j / j!)^g`` for one throw of ``r``
    independent uniform balls (the exponential generating function of bin loads), computed
    in exact rational arithmetic; the best of ``search`` independent throws has
    ``P[S <= k] = P[L <= k]^search``.

    Parameters
    ----------
    r : int
        Balls (target items), 1 to 64.
    g : int
        Bins (the hash range), >= 2.
    search : int
        Independent throws (hash seeds tried), 1 to 2^20.

    Returns
    -------
    numpy.ndarray
        ``P[S = k]`` for ``k = 0..r`` (float64, sums to 1).

    Examples
    --------
    >>> max_load_distribution(2, 2).tolist()  # two balls share a bin half of the time
    [0.0, 0.5, 0.5]
    """
    r = check_integer(r, "r", low=1, high=_MAX_TARGETS)
    g = check_integer(g, "g", low=2, high=2**32)
    search = check_integer(search, "search", low=1, high=_MAX_SEARCH)
    factorials = [Fraction(math.factorial(j)) for j in range(r + 1)]
    cdf = []
    for k in range(r + 1):
        base = [1 / factorials[j] if j <= k else Fraction(0) for j in range(r + 1)]
        power, result, e = base, [Fraction(1)] + [Fraction(0)] * r, g
        while e:  # (sum_{j<=k} x^j/j!)^g truncated at degree r, by squaring
            if e & 1:
                result = _poly_mul(result, power, r)
            power = _poly_mul(power, power, r)
            e >>= 1
        cdf.append(float(result[r] * factorials[r] / Fraction(g) ** r))
    best = np.array(cdf) ** search
    best[-1] = 1.0
    return np.diff(best, prepend=0.0)


def _poly_mul(a: list[Fraction], b: list[Fraction], degree: int) -> list[Fraction]:
    out = [Fraction(0)] * (degree + 1)
    for i, x in enumerate(a):
        if x:
            for j in range(degree + 1 - i):
                out[i + j] += x * b[j]
    return out


def _supported_targets(spec: Any, r: int, evasive: bool, search: int) -> tuple[float, float]:
    """Mean and variance of S, the number of targets one fake report supports."""
    if isinstance(spec, LocalHashing) and evasive:
        pmf = max_load_distribution(r, spec.range_size, search)
        k = np.arange(r + 1)
        mean = float(pmf @ k)
        return mean, float(pmf @ (k - mean) ** 2)
    return (1.0 if isinstance(spec, GRR) else float(r)), 0.0


def mga_expected_gain(
    spec: Any,
    r: int,
    beta: float,
    *,
    target_frequency: float = 0.0,
    evasive: bool = False,
    search: int = 1000,
) -> float:
    """Return the expected frequency gain of the maximal-gain attack on ``r`` targets.

    ``G = beta ((E[S] - r q) / (p - q) - f_T)`` with the spec's realized ``p`` and ``q``
    (module docstring; Cao, Jia & Gong, USENIX Security 2021, Theorems 1-3, where OLH
    assumes ``S = r``).

    Parameters
    ----------
    spec : GRR, UnaryEncoding or LocalHashing
        The attacked frequency oracle.
    r : int
        Number of target items (1 to min(64, d)).
    beta : float
        Fraction of fake users among all reports, in [0, 1).
    target_frequency : float
        ``f_T``: the targets' summed frequency among genuine users, in [0, 1].
    evasive : bool
        The variant of :func:`mga_reports` (it changes the gain for OLH/BLH only).
    search : int
        Evasive OLH/BLH: seeds each fake user tries (1 to 2^20).

    Returns
    -------
    float
        The expected sum over targets of (estimate after - estimate before).

    Examples
    --------
    >>> from ldpkit import OUE
    >>> round(mga_expected_gain(OUE(epsilon=1.0, domain_size=1024), 10, 0.01), 2)
    0.32
    """
    _check_spec(spec)
    r = check_integer(r, "r", low=1, high=min(_MAX_TARGETS, spec.domain_size))
    beta = check_real(beta, "beta", low=0.0, high=1.0, high_inclusive=False)
    f_t = check_real(target_frequency, "target_frequency", low=0.0, high=1.0)
    if not isinstance(evasive, bool):
        raise TypeError(f"evasive must be True or False, got {evasive!r}")
    search = check_integer(search, "search", low=1, high=_MAX_SEARCH)
    mean, _ = _supported_targets(spec, r, evasive, search)
    return beta * ((mean - r * spec.q) / (spec.p - spec.q) - f_t)


def mga_reports(
    spec: Any,
    n_fake: int,
    targets: Any,
    *,
    evasive: bool = False,
    search: int = 1000,
    rng: RNGLike = None,
) -> Reports:
    """Return the reports of ``n_fake`` fake users running the maximal-gain attack.

    Parameters
    ----------
    spec : GRR, UnaryEncoding or LocalHashing
        The attacked frequency oracle (the reports are valid reports of it).
    n_fake : int
        Number of fake users (>= 0).
    targets : array_like of int
        The distinct target items (1 to min(64, d)).
    evasive : bool
        Unary encoding: also set ``round(p + (d - 1) q) - r`` random non-target bits, so a
        fake report has the genuine mean number of ones. Local hashing: random seeds
        (the best of ``search``) instead of crafted ones whose hash maps the whole domain
        to one value. Either way the report passes :func:`support_size_outliers`, at a
        lower gain for local hashing. GRR: no difference.
    search : int
        Evasive local hashing: seeds each fake user tries before keeping the one mapping
        the most targets to one value (1 to 2^20).
    rng : numpy.random.Generator, int, or None
        The attacker's randomness (targets for GRR, padding bits, candidate seeds).

    Returns
    -------
    Reports
        ``n_fake`` reports of ``spec``.

    Examples
    --------
    >>> from ldpkit import GRR
    >>> spec = GRR(epsilon=1.0, domain_size=100)
    >>> fake = mga_reports(spec, 5, [3, 7], rng=0)
    >>> set(fake.values.tolist()) <= {3, 7}
    True
    """
    _check_spec(spec)
    n_fake = check_integer(n_fake, "n_fake", low=0, high=2**40)
    t = _check_targets(spec, targets)
    if not isinstance(evasive, bool):
        raise TypeError(f"evasive must be True or False, got {evasive!r}")
    search = check_integer(search, "search", low=1, high=_MAX_SEARCH)
    # the reports, plus a unary report's unpacked bits while it is built
    per_report = spec.domain_size + 16 if isinstance(spec, UnaryEncoding) else 16
    check_memory(float(n_fake) * per_report, f"n_fake={n_fake}", "mga_reports")
    gen = as_generator(rng)
    if isinstance(spec, GRR):
        return Reports(spec, values=t[gen.integers(0, t.shape[0], size=n_fake)])
    if isinstance(spec, UnaryEncoding):
        return Reports(spec, bits=_unary_fake(spec, n_fake, t, evasive, gen))
    if not evasive:
        return _crafted_hashing_fake(spec, n_fake, t, gen)
    return _hashing_fake(spec, n_fake, t, search, gen)


def _unary_fake(
    spec: UnaryEncoding, n_fake: int, t: np.ndarray, pad: bool, gen: np.random.Generator
) -> np.ndarray:
    d = spec.domain_size
    bits = np.zeros((n_fake, d), dtype=bool)
    bits[:, t] = True
    extra = max(0, round(spec.p + (d - 1) * spec.q) - t.shape[0]) if pad else 0
    extra = min(extra, d - t.shape[0])
    if extra:
        others = np.setdiff1d(np.arange(d), t)
        rows = max(1, _SEARCH_CHUNK // others.shape[0])
        for start in range(0, n_fake, rows):  # blocks of reports, not one per user
            block = slice(start, min(n_fake, start + rows))
            keys = gen.random((block.stop - block.start, others.shape[0]))
            pick = np.argpartition(keys, extra - 1, axis=1)[:, :extra]
            bits[np.arange(block.start, block.stop)[:, None], others[pick]] = True
    return _bits.pack_bits(bits)


def _unmix64(z: np.ndarray) -> np.ndarray:
    # inverse of hashing._mix64 (the splitmix64 finalizer is a bijection of 64-bit words)
    z = z ^ (z >> np.uint64(31)) ^ (z >> np.uint64(62))
    z = z * _INV2
    z = z ^ (z >> np.uint64(27)) ^ (z >> np.uint64(54))
    z = z * _INV1
    return z ^ (z >> np.uint64(30)) ^ (z >> np.uint64(60))


def _crafted_hashing_fake(
    spec: LocalHashing, n_fake: int, t: np.ndarray, gen: np.random.Generator
) -> Reports:
    # Seeds whose multiplier a is a small odd number: a v + b moves by < 2^32 over the
    # targets, so their top 32 bits differ by at most one and they share a bucket unless
    # a bucket boundary falls between (rare; such seeds are drawn again).
    g = spec.range_size
    span = max(1, int(t.max()))
    bits = max(1, min(31, 31 - span.bit_length()))
    if spec._mixes_items:
        # mixed keys spread over [0, 2^32): a v + b then moves by about a top-32-bit units,
        # so a below 2^32 / (64 g) keeps the targets in one bucket for ~63 seeds in 64
        bits = max(1, 25 - (g - 1).bit_length())
    seeds_out = np.empty(0, dtype=np.uint64)
    y_out = np.empty(0, dtype=np.int64)
    for _ in range(64):  # each round keeps most seeds; 64 rounds is a failure
        if seeds_out.shape[0] >= n_fake:
            break
        want = n_fake - seeds_out.shape[0]
        a = gen.integers(0, 1 << bits, size=want, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        seeds = _unmix64(a) - _GAMMA
        hashed = spec.hash_items(seeds[:, None], t[None, :])
        same = np.all(hashed == hashed[:, :1], axis=1)
        seeds_out = np.concatenate([seeds_out, seeds[same]])
        y_out = np.concatenate([y_out, hashed[same, 0]])
    else:
        raise ValueError(f"targets must be items a crafted seed can map together, got {t}")
    dtype = np.uint8 if g <= 256 else np.uint16 if g <= 65536 else np.uint32
    return Reports(spec, seeds=seeds_out[:n_fake], values=y_out[:n_fake].astype(dtype))


def _hashing_fake(
    spec: LocalHashing, n_fake: int, t: np.ndarray, search: int, gen: np.random.Generator
) -> Reports:
    g, r = spec.range_size, t.shape[0]
    seeds_out = np.empty(n_fake, dtype=np.uint64)
    y_out = np.empty(n_fake, dtype=np.int64)
    users = max(1, _SEARCH_CHUNK // (search * r))
    for start in range(0, n_fake, users):  # blocks of fake users, vectorized inside
        m = min(n_fake, start + users) - start
        seeds = gen.integers(0, _U64_MAX, size=(m * search,), dtype=np.uint64, endpoint=True)
        hashed = np.sort(spec.hash_items(seeds[:, None], t[None, :]), axis=1)
        # longest run of equal hashed values in each sorted row = the seed's max load
        run = np.ones(m * search, dtype=np.int64)
        load, value = run.copy(), hashed[:, 0].astype(np.int64)
        for j in range(1, r):  # over targets (r <= 64), not users
            run = np.where(hashed[:, j] == hashed[:, j - 1], run + 1, 1)
            better = run > load
            load = np.where(better, run, load)
            value = np.where(better, hashed[:, j], value)
        best = np.argmax(load.reshape(m, search), axis=1) + np.arange(m) * search
        seeds_out[start : start + m] = seeds[best]
        y_out[start : start + m] = value[best]
    dtype = np.uint8 if g <= 256 else np.uint16 if g <= 65536 else np.uint32
    return Reports(spec, seeds=seeds_out, values=y_out.astype(dtype))


def _check_support_spec(spec: Any) -> None:
    """Refuse a spec whose reports do not support items bit by bit (the detectors' specs)."""
    if not isinstance(spec, (UnaryEncoding, LocalHashing)):
        raise TypeError(
            "spec must be a UnaryEncoding (OUE, SUE) or LocalHashing (OLH, BLH) spec, "
            f"got {type(spec).__name__}"
        )


def support_size_outliers(spec: Any, reports: Reports, alpha: float = 1e-6) -> np.ndarray:
    """Return the reports that support a number of items a genuine user would rarely produce.

    A genuine unary-encoding report has ``Bernoulli(p) + Binomial(d - 1, q)`` ones; a
    genuine local-hashing report supports its user's item with probability ``p`` and each
    other item with probability ``1/g`` (pairwise independent), taken here as the same
    law with ``q = 1/g``. A report outside the central ``1 - alpha`` of that law is
    flagged (each tail at most ``alpha / 2``). It catches fake reports that set only the
    target bits (OUE; Cao, Jia & Gong 2021, section 6, on detecting fake users by their
    number of ones) and crafted hash seeds that support the whole domain (OLH); the evasive
    variants of :func:`mga_reports` pass it.

    Parameters
    ----------
    spec : UnaryEncoding or LocalHashing
        OUE, SUE, OLH or BLH.
    reports : Reports
        Reports of ``spec``.
    alpha : float
        False-positive rate on genuine reports, in (0, 1): exact for unary encoding; not
        for local hashing, where the family's support sizes are not binomial (the map
        ``v -> a v + b`` is affine: a multiplier close to a fraction of ``2^64`` with a
        small denominator makes some buckets far larger), so 0.3-1% of genuine OLH
        reports at d = 1024 are flagged whatever ``alpha`` (benchmarks/poisoning.py).

    Returns
    -------
    numpy.ndarray
        Boolean mask, True for a flagged report.
    """
    from scipy import stats as st

    _check_support_spec(spec)
    alpha = check_probability(alpha, "alpha")
    reports = spec.check_reports(reports)
    d = spec.domain_size
    if isinstance(spec, UnaryEncoding):
        size = _POPCOUNT[_bits.check_packed(reports.bits, d)].sum(axis=1)
    else:
        seeds, y = spec._report_arrays(reports)
        size = np.zeros(seeds.shape[0], dtype=np.int64)
        items = max(1, _SEARCH_CHUNK // max(1, seeds.shape[0]))
        for start in range(0, d, items):  # blocks of items: memory n x block
            block = np.arange(start, min(d, start + items))
            size += (spec.hash_items(seeds[:, None], block[None, :]) == y[:, None]).sum(axis=1)
    k = np.arange(d + 1)
    base = st.binom.pmf(k, d - 1, spec.q)
    pmf = (1 - spec.p) * base + spec.p * np.concatenate(([0.0], base[:-1]))
    low = int(np.searchsorted(np.cumsum(pmf), alpha / 2, side="right"))  # P[X < low] small
    tail = np.cumsum(pmf[::-1])[::-1]  # P[X >= k]
    high = int(np.argmax(tail <= alpha / 2)) if np.any(tail <= alpha / 2) else d + 1
    return (size < low) | (size >= high)


def itemset_outliers(spec: Any, reports: Reports, items: Any, alpha: float = 1e-3) -> np.ndarray:
    """Return the reports that support more of ``items`` than a genuine user plausibly would.

    A genuine report supports each item other than its user's with probability ``q``
    independently (unary bits; OLH for a hash independent over the items), and its
    user's item with probability ``p``, so the number of ``items`` it supports is at most
    ``Bernoulli(p) + Binomial(k - 1, q)`` in law. Reports reaching the smallest count
    whose tail is ``<= alpha`` are flagged. Cao, Jia & Gong (2021, section 6) mine the
    itemsets that many reports support together; this is that test for one candidate
    itemset, e.g. the top ``r`` estimated items, which the attack's targets become.

    Parameters
    ----------
    spec : UnaryEncoding or LocalHashing
        OUE, SUE, OLH or BLH (a GRR report supports one item: nothing to mine).
    reports : Reports
        Reports of ``spec``.
    items : array_like of int
        The candidate itemset (distinct items, 1 to min(64, d)).
    alpha : float
        Largest tail probability flagged for a genuine report, in (0, 1).

    Returns
    -------
    numpy.ndarray
        Boolean mask, True for a flagged report.
    """
    from scipy import stats as st

    _check_support_spec(spec)
    t = _check_targets(spec, items, "items")
    alpha = check_probability(alpha, "alpha")
    reports = spec.check_reports(reports)
    if isinstance(spec, UnaryEncoding):
        packed = _bits.check_packed(reports.bits, spec.domain_size)
        support = (packed[:, t // 8] >> (7 - t % 8)) & 1
    else:
        seeds, y = spec._report_arrays(reports)
        support = spec.hash_items(seeds[:, None], t[None, :]) == y[:, None]
    count = support.sum(axis=1)
    k = t.shape[0]
    x = np.arange(k + 2)
    # P[Bernoulli(p) + Binomial(k - 1, q) >= x]
    tail = spec.p * st.binom.sf(x - 2, k - 1, spec.q) + (1 - spec.p) * st.binom.sf(
        x - 1, k - 1, spec.q
    )
    threshold = int(np.argmax(tail <= alpha)) if np.any(tail <= alpha) else k + 1
    return count >= threshold
