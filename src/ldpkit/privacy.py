"""Exact privacy accounting from output probabilities, budget splitting, shuffling."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._matrix_loss import privacy_loss  # re-exported: the mechanisms import it from below
from ._validation import (
    MIN_EPSILON,
    check_epsilon,
    check_integer,
    check_not_masked,
    check_real,
)

__all__ = ["privacy_loss", "ratio_privacy_loss", "shuffle_amplification", "split_budget"]


def ratio_privacy_loss(largest: float, smallest: float) -> float:
    """log(largest / smallest) for one output's extreme probabilities (inf if smallest = 0)."""
    largest = check_real(largest, "largest", low=0.0, high=1.0, low_inclusive=False)
    smallest = check_real(smallest, "smallest", low=0.0, high=largest)
    if smallest <= 0:
        return math.inf
    return math.log(largest) - math.log(smallest)


def split_budget(epsilon: float, parts: int | list[float]) -> list[float]:
    """Split a budget for sequential composition: evenly into ``parts`` or by weights."""
    epsilon = check_epsilon(epsilon)
    if isinstance(parts, (int, np.integer)) and not isinstance(parts, (bool, np.bool_)):
        # Every part must itself be a valid budget (>= MIN_EPSILON), never 0.
        most = max(1, int(min(epsilon / MIN_EPSILON, 2**62)))
        parts = check_integer(parts, "parts", low=1, high=most)
        return [epsilon / parts] * parts
    if isinstance(parts, (str, bytes)) or not isinstance(parts, Sequence | np.ndarray):
        raise TypeError(f"parts must be a positive int or positive finite weights, got {parts!r}")
    check_not_masked(parts, "parts")
    weights = np.asarray(parts)
    if weights.dtype.kind not in "iuf":
        raise TypeError(f"parts must be a positive int or positive finite weights, got {parts!r}")
    weights = weights.astype(np.float64)
    if (
        weights.ndim != 1
        or weights.size == 0
        or np.any(~np.isfinite(weights))
        or np.any(weights <= 0)
    ):
        raise ValueError(f"parts must be a positive int or positive finite weights, got {parts!r}")
    shares = epsilon * weights / weights.sum()
    if np.any(shares < MIN_EPSILON):
        raise ValueError(
            f"parts must give every part a budget >= {MIN_EPSILON:g} (MIN_EPSILON), got weights "
            f"whose smallest share is {float(shares.min()):g}"
        )
    return [float(s) for s in shares]


def shuffle_amplification(epsilon0: float, n: int, delta: float) -> float:
    """Central epsilon of n shuffled epsilon0-LDP reports (Feldman, McMillan, Talwar 2021).

    When each of ``n`` users sends one report from an ``epsilon0``-LDP randomizer and the
    reports reach the analyst through a shuffler (a uniformly random permutation, so the
    analyst cannot tell who sent which), the whole output is ``(epsilon, delta)``-DP with

    ``epsilon = log(1 + (e^eps0 - 1) / (e^eps0 + 1) * (8 sqrt(e^eps0 log(4/delta) / n)
    + 8 e^eps0 / n))``.

    This is the closed-form bound of Theorem 3.1, valid for
    ``epsilon0 <= log(n / (16 log(2/delta)))``; outside that range it is refused.

    Parameters
    ----------
    epsilon0 : float
        The local budget of each report (> 0).
    n : int
        Number of shuffled reports (>= 1).
    delta : float
        The central delta, in (0, 1).

    Returns
    -------
    float
        The central epsilon (always below ``epsilon0`` inside the validity range).

    Raises
    ------
    ValueError
        If ``epsilon0`` exceeds ``log(n / (16 log(2/delta)))`` (the bound does not apply).

    References
    ----------
    V. Feldman, A. McMillan, K. Talwar. Hiding Among the Clones: A Simple and Nearly
    Optimal Analysis of Privacy Amplification by Shuffling. FOCS 2021, Theorem 3.1.

    Examples
    --------
    >>> round(shuffle_amplification(1.0, 1_000_000, 1e-8), 4)
    0.0268
    """
    from ._validation import check_probability, check_real

    # Not check_epsilon: the bound holds for any positive local budget, also below the
    # smallest budget a mechanism accepts.
    epsilon0 = check_real(epsilon0, "epsilon0", low=0.0, low_inclusive=False)
    n = check_integer(n, "n", low=1)
    delta = check_probability(delta, "delta")
    limit = math.log(n / (16.0 * math.log(2.0 / delta)))
    if epsilon0 > limit:
        raise ValueError(
            f"epsilon0 must be <= log(n / (16 log(2/delta))) = {limit:.6g} for n={n} and "
            f"delta={delta:g} (the validity range of FMT21 Theorem 3.1), got {epsilon0:g}"
        )
    e0 = math.exp(epsilon0)
    # tanh(eps0/2) = (e^eps0 - 1) / (e^eps0 + 1), without cancellation at small eps0
    scale = math.tanh(epsilon0 / 2.0)
    return math.log1p(scale * (8.0 * math.sqrt(e0 * math.log(4.0 / delta) / n) + 8.0 * e0 / n))


__all__ += ["attack"]


def attack(
    spec: Any, *, rounds: int, memoized: bool = True, prior: Any = None, **options: Any
) -> Any:
    """Return the Bayes-optimal attacker's success rate against one device's T reports.

    See :func:`ldpkit._attack.attack` (``samples``, ``alpha`` and ``rng`` are the Monte
    Carlo's options); returns an :class:`ldpkit._attack.AttackResult` with its interval.

    Examples
    --------
    >>> from ldpkit.longitudinal import LGRR
    >>> r = attack(LGRR(epsilon_inf=1.0, epsilon_1=0.5, domain_size=16), rounds=1)
    >>> r.method, round(r.limit, 4)
    ('exact', 0.1534)
    """
    from ._attack import attack as _attack

    return _attack(spec, rounds=rounds, memoized=memoized, prior=prior, **options)
