"""The Bayes-optimal attacker against one device's repeated reports.

Given T reports of one device holding one value v drawn from a prior, the attacker that
maximizes its chance of naming v picks ``argmax_v prior_v P[reports | v]``; its success rate
is ``sum_reports max_v prior_v P[reports | v]``. The count vector of the reports is a
sufficient statistic (the reports are exchangeable given v, and given the permanent answer
when memoized), so the sum runs over count vectors with their multinomial law:

* fresh reports: ``P[c | v] = multinomial(c; T, M[v])`` with M the one-report matrix;
* memoized (two rounds): ``P[c | v] = sum_w P1[v, w] multinomial(c; T, P2[w])``;
* memoized (a whole report, specs without two rounds): every report is the first one.

Exact (log space, over all count vectors) when there are few enough count vectors; Monte
Carlo over simulated devices otherwise, with a Wilson interval. Unary encodings (d
independent bits) use the per-bit counts, the sufficient statistic of their product law.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any

import numpy as np

from ._rng import RNGLike, as_generator
from ._validation import check_array, check_integer, check_probability

__all__ = ["AttackResult", "attack"]

#: Largest number of count vectors summed exactly.
MAX_EXACT_VECTORS = 200_000
#: Largest one-report output space handled through the transition matrix.
MAX_OUTPUTS = 4096


@dataclasses.dataclass(frozen=True)
class AttackResult:
    """Success rate of the Bayes-optimal attacker against one device.

    Attributes
    ----------
    success : float
        P[the attacker names the device's value] (exact, or the Monte Carlo estimate).
    interval : tuple of float
        A ``1 - alpha`` interval for it (Wilson's for Monte Carlo; the point when exact).
    rounds : int
        Number of reports T the attacker sees.
    memoized : bool
        Whether the device memoized its answers (:class:`ldpkit.Device`).
    method : str
        "exact" or "monte carlo".
    samples : int
        Simulated devices (0 when exact).
    baseline : float
        Success of a guess from the prior alone (``max prior``).
    limit : float or None
        Success as T grows without bound: 1 for fresh reports of distinct rows; for
        memoized longitudinal specs, that of an attacker who knows the permanent answer
        (``e^eps_inf / (e^eps_inf + d - 1)`` for L-GRR with a uniform prior).
    """

    success: float
    interval: tuple[float, float]
    rounds: int
    memoized: bool
    method: str
    samples: int
    baseline: float
    limit: float | None


def _wilson(successes: int, n: int, alpha: float) -> tuple[float, float]:
    from statistics import NormalDist

    z = NormalDist().inv_cdf(1.0 - alpha / 2.0)
    phat = successes / n
    denom = 1.0 + z * z / n
    center = (phat + z * z / (2 * n)) / denom
    half = z * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / denom
    return max(0.0, center - half), min(1.0, center + half)


def _channels(spec: Any, memoized: bool) -> tuple[str, Any]:
    """Return the attack's view of a spec.

    One of ``("matrix", (P1, P2))``, ``("bits", (p1, q1, p2, q2))``, ``("hashed", (P1, P2,
    hash))`` or ``("whole", M)`` for a memoized whole report. A spec whose reports are not
    one draw of its ``transition_matrix()`` answers for itself through its
    ``_attack_channel(memoized)`` method (SUE/OUE, the longitudinal specs).
    """
    own = getattr(spec, "_attack_channel", None)
    view = own(memoized) if own is not None else None
    if view is not None:
        return view  # type: ignore[no-any-return]
    matrix_fn = getattr(spec, "transition_matrix", None)
    if matrix_fn is None:
        raise NotImplementedError(f"attack needs a finite law; {spec.name} has none")
    try:
        matrix = np.asarray(matrix_fn())
    except NotImplementedError:
        raise NotImplementedError(
            f"attack needs an enumerable law; {spec!r} has too many outputs"
        ) from None
    if matrix.shape[1] > MAX_OUTPUTS:
        raise NotImplementedError(
            f"attack handles up to {MAX_OUTPUTS} outputs per report, {spec!r} has {matrix.shape[1]}"
        )
    if memoized:
        return "whole", matrix
    return "matrix", (np.eye(matrix.shape[0]), matrix)


def _compositions(total: int, parts: int) -> np.ndarray:
    """All count vectors of ``parts`` non-negative integers summing to ``total``."""
    rows = []
    for bars in itertools.combinations(range(total + parts - 1), parts - 1):
        edges = (-1, *bars, total + parts - 1)
        rows.append([edges[i + 1] - edges[i] - 1 for i in range(parts)])
    return np.asarray(rows, dtype=np.int64)


def _log(m: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(m)


def _log_likelihoods(counts: np.ndarray, p1: np.ndarray, p2: np.ndarray) -> np.ndarray:
    """Return log P[counts | v] up to the multinomial coefficient, shape (n_vectors, d)."""
    from scipy.special import logsumexp

    inner = counts @ np.nan_to_num(_log(p2), neginf=-1e300).T  # (N, m1): log P[c | w]
    both = inner[:, None, :] + _log(p1)[None, :, :]  # (N, d, m1)
    out: np.ndarray = logsumexp(both, axis=2)
    return out


def _exact_matrix(p1: np.ndarray, p2: np.ndarray, rounds: int, prior: np.ndarray) -> float:
    from scipy.special import gammaln, logsumexp

    counts = _compositions(rounds, p2.shape[1])
    coef = gammaln(rounds + 1) - gammaln(counts + 1).sum(axis=1)
    ll = _log_likelihoods(counts, p1, p2) + _log(prior)[None, :]
    best = ll.max(axis=1) + coef
    return float(np.exp(logsumexp(best)))


def _pick(scores: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """Row-wise argmax with ties broken uniformly (the attacker's randomized choice)."""
    top = scores.max(axis=1, keepdims=True)
    tied = scores >= top - 1e-9 * np.maximum(1.0, np.abs(top))
    noise = np.where(tied, gen.random(scores.shape), -1.0)
    picked: np.ndarray = noise.argmax(axis=1)
    return picked


def _mc_matrix(
    p1: np.ndarray, p2: np.ndarray, rounds: int, prior: np.ndarray, n: int, gen: Any
) -> int:
    d = p1.shape[0]
    hits = 0
    for start in range(0, n, 4096):
        size = min(4096, n - start)
        v = gen.choice(d, size=size, p=prior)
        cum = np.cumsum(p1[v], axis=1)
        w = (gen.random(size)[:, None] > cum).sum(axis=1).clip(0, p1.shape[1] - 1)
        counts = gen.multinomial(rounds, p2[w])
        scores = _log_likelihoods(counts, p1, p2) + _log(prior)[None, :]
        hits += int((_pick(scores, gen) == v).sum())
    return hits


def _mc_hashed(
    hash_fn: Any, p1: np.ndarray, p2: np.ndarray, rounds: int, prior: np.ndarray, n: int, gen: Any
) -> tuple[int, int]:
    """Attack a memoized LOLOHA device: its seed is public, its reports L-GRR over [g].

    The reports are L-GRR over [g] of the hashed value. Values hashing alike are indistinguishable: the attacker picks the
    most probable value among the most probable bucket's. Returns (hits, hits of an
    attacker who sees the permanent answer itself: the limit).
    """
    d, g = prior.size, p1.shape[0]
    items = np.arange(d)
    hits = limit_hits = 0
    for start in range(0, n, 2048):
        size = min(2048, n - start)
        seeds = gen.integers(0, 2**63, size=size, dtype=np.uint64)
        hashed = hash_fn(seeds[:, None], items[None, :], g)  # (size, d)
        v = gen.choice(d, size=size, p=prior)
        x = hashed[np.arange(size), v]
        cum = np.cumsum(p1[x], axis=1)
        w = (gen.random(size)[:, None] > cum).sum(axis=1).clip(0, g - 1)
        counts = gen.multinomial(rounds, p2[w])
        bucket_ll = _log_likelihoods(counts, p1, p2)  # (size, g)
        scores = np.take_along_axis(bucket_ll, hashed, axis=1) + _log(prior)[None, :]
        hits += int((_pick(scores, gen) == v).sum())
        known = _log(p1)[:, w].T  # log P[permanent w | bucket], (size, g)
        scores = np.take_along_axis(known, hashed, axis=1) + _log(prior)[None, :]
        limit_hits += int((_pick(scores, gen) == v).sum())
    return hits, limit_hits


def _mc_bits(
    law: tuple[float, float, float, float],
    rounds: int | None,
    prior: np.ndarray,
    n: int,
    gen: Any,
) -> int:
    """Unary encodings: bit j's count of ones over the T reports, given whether j = v.

    ``rounds=None``: the attacker sees the permanent bits themselves (the limit).
    """
    from scipy.stats import binom

    p1, q1, p2, q2 = law
    d = prior.size
    if rounds is None:
        table = np.log(np.array([[1 - q1, q1], [1 - p1, p1]]))  # [true bit, seen bit]
    else:
        c = np.arange(rounds + 1)
        # P[count c | true bit b] = sum_w P1[b, w] Binom(c; T, P2[w])
        law2 = np.stack([binom.pmf(c, rounds, q2), binom.pmf(c, rounds, p2)])  # [w, c]
        law1 = np.array([[1 - q1, q1], [1 - p1, p1]])  # [b, w]
        table = _log(law1 @ law2)  # [b, c]
    gain = table[1] - table[0]  # log-likelihood ratio of "j = v" per count
    hits = 0
    for start in range(0, n, max(1, (1 << 20) // d)):
        size = min(max(1, (1 << 20) // d), n - start)
        v = gen.choice(d, size=size, p=prior)
        truth = np.zeros((size, d), dtype=bool)
        truth[np.arange(size), v] = True
        perm = gen.random((size, d)) < np.where(truth, p1, q1)
        seen = perm if rounds is None else gen.binomial(rounds, np.where(perm, p2, q2))
        scores = np.nan_to_num(gain[seen.astype(np.int64)], nan=0.0) + _log(prior)[None, :]
        hits += int((_pick(scores, gen) == v).sum())
    return hits


def _bits_limit(
    law: tuple[float, float, float, float], prior: np.ndarray, samples: int, gen: Any
) -> float:
    """Success of an attacker who sees the permanent bits themselves.

    Uniform prior, in closed form: the attacker picks uniformly among the bits set (among
    all d when none is), so with ``K ~ Bin(d - 1, q1)`` other bits set, success is ``p1
    E[1 / (1 + K)] + (1 - p1) (1 - q1)^(d-1) / d``, ``E[1 / (1 + K)] = (1 - (1 - q1)^d) /
    (d q1)``. Other priors: Monte Carlo.
    """
    p1, q1 = law[0], law[1]
    d = prior.size
    if np.ptp(prior) > 0 or not 0 < q1 < p1:
        return _mc_bits(law, None, prior, samples, gen) / samples
    mean_inverse = -math.expm1(d * math.log1p(-q1)) / (d * q1)
    return p1 * mean_inverse + (1 - p1) * math.exp((d - 1) * math.log1p(-q1)) / d


def attack(
    spec: Any,
    *,
    rounds: int,
    memoized: bool = True,
    prior: Any = None,
    samples: int = 20_000,
    alpha: float = 0.05,
    rng: RNGLike = None,
) -> AttackResult:
    """Return the Bayes-optimal attacker's success at naming one device's value from T reports.

    Parameters
    ----------
    spec : Mechanism
        A categorical spec with a finite law: GRR-like specs (``transition_matrix()``, up to
        4096 outputs), SUE / OUE, and the longitudinal specs (:mod:`ldpkit.longitudinal`;
        LOLOHA memoized only, its seed public: Monte Carlo over seeds).
    rounds : int
        Reports T of the same value the attacker sees (>= 1).
    memoized : bool
        True: the device memoized (:class:`ldpkit.Device`): a longitudinal spec's T reports
        re-randomize one permanent answer; another spec's T reports are one report
        repeated. False: T fresh, independent reports.
    prior : array_like, optional
        The attacker's prior over the d values (uniform by default).
    samples : int
        Simulated devices when the exact sum is too large.
    alpha : float
        Level of the interval.
    rng : Generator, int or None
        Randomness of the Monte Carlo.

    Returns
    -------
    AttackResult

    Examples
    --------
    >>> from ldpkit import GRR
    >>> r = attack(GRR(epsilon=1.0, domain_size=4), rounds=1)
    >>> round(r.success, 4), r.method
    (0.4754, 'exact')
    """
    from .spec import Mechanism

    if not isinstance(spec, Mechanism):
        raise TypeError(f"spec must be an ldpkit mechanism spec, got {type(spec).__name__}")
    rounds = check_integer(rounds, "rounds", low=1, high=10**6)
    if not isinstance(memoized, (bool, np.bool_)):
        raise TypeError(f"memoized must be True or False, got {memoized!r}")
    samples = check_integer(samples, "samples", low=100, high=10**7)
    alpha = check_probability(alpha, "alpha")
    d = int(getattr(spec, "domain_size", 0) or 0)
    if d < 2:
        raise NotImplementedError(f"attack needs a categorical spec, got {spec!r}")
    if prior is None:
        prior_arr = np.full(d, 1.0 / d)
    else:
        prior_arr = check_array(prior, "prior", ndim=1, low=0.0, high=1.0)
        if prior_arr.shape != (d,) or abs(float(prior_arr.sum()) - 1.0) > 1e-9:
            raise ValueError(
                f"prior must be {d} probabilities summing to 1, got shape {prior_arr.shape} "
                f"summing to {float(prior_arr.sum()):g}"
            )
    baseline = float(prior_arr.max())
    kind, law = _channels(spec, bool(memoized))
    gen = as_generator(rng)
    limit: float | None = 1.0

    def monte_carlo(hits: int, memo: bool, limit_rate: float | None) -> AttackResult:
        # the rate of ``hits`` in ``samples`` draws, with its Wilson interval
        return AttackResult(
            hits / samples,
            _wilson(hits, samples, alpha),
            rounds,
            memo,
            "monte carlo",
            samples,
            baseline,
            limit_rate,
        )

    if kind == "hashed":
        first, second, hash_fn = law
        hits, limit_hits = _mc_hashed(hash_fn, first, second, rounds, prior_arr, samples, gen)
        return monte_carlo(hits, True, limit_hits / samples)
    if kind == "whole" and isinstance(law, tuple):  # a unary report, repeated: T = 1
        hits = _mc_bits(law, 1, prior_arr, samples, gen)
        return monte_carlo(hits, True, hits / samples)
    if kind == "whole":  # one report, repeated: T = 1
        p1, p2, rounds_seen = np.eye(d), np.asarray(law), 1
        limit = None
    elif kind == "matrix":
        p1, p2 = law
        rounds_seen = rounds
        if memoized:
            limit = float((prior_arr[:, None] * p1).max(axis=0).sum())
    if kind in ("whole", "matrix"):
        vectors = math.comb(rounds_seen + p2.shape[1] - 1, p2.shape[1] - 1)
        if vectors <= MAX_EXACT_VECTORS:
            value = _exact_matrix(p1, p2, rounds_seen, prior_arr)
            value = min(max(value, 0.0), 1.0)
            if limit is None:
                limit = value
            return AttackResult(
                value, (value, value), rounds, bool(memoized), "exact", 0, baseline, limit
            )
        hits = _mc_matrix(p1, p2, rounds_seen, prior_arr, samples, gen)
    else:
        hits = _mc_bits(law, rounds, prior_arr, samples, gen)
        if memoized:
            limit = _bits_limit(law, prior_arr, samples, gen)
    return monte_carlo(hits, bool(memoized), limit)
