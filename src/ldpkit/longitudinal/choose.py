"""Choosing a longitudinal frequency protocol for (d, epsilon_inf, epsilon_1, changes).

The rule: keep every device's loss over the accounting period (a year) within
``epsilon_inf``, given how often its value may change, and among the protocols that can,
take the one with the lowest variance per window (n Var of one item's estimate at f = 0,
the closed form of each spec at its realized probabilities). A device that reveals ``k``
distinct memo keys composes ``k`` permanent answers: ``min(c + 1, d)`` keys for the
L-protocols after ``c`` changes, ``min(c + 1, g)`` for LOLOHA (its memo is per hashed
value). Each protocol's permanent round therefore runs at ``epsilon_inf / keys``, and one
that cannot stay above ``epsilon_1`` there is out. Without changes every protocol gets the
whole ``epsilon_inf`` and the rule is the variance alone (L-GRR for small d, L-OSUE
otherwise, LOLOHA's optimal g within 1% of it). The one-report laws of L-GRR, L-OSUE,
L-SUE and LOLOHA (at a given g) depend on epsilon_1 alone (their chained probabilities
are GRR's, OUE's, SUE's and GRR-over-g's at epsilon_1), so splitting epsilon_inf costs them
nothing until the per-key budget reaches epsilon_1; L-OUE and L-SOUE lose utility as it
shrinks. Hence LOLOHA when values change often: at d = 32, epsilon_inf = 4, epsilon_1 =
0.5, L-OSUE up to 6 changes a year (4 / 7 > 0.5), LOLOHA with g = 3 from 7.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .._exact import RR_MAX_EPSILON
from .._validation import check_epsilon, check_integer

__all__ = ["LongitudinalCandidate", "LongitudinalChoice", "choose_longitudinal"]

#: Largest hash range searched below the number of distinct values (LOLOHA's g); beyond
#: it the per-key budget epsilon_inf / g is far below any useful epsilon_1.
MAX_SPLIT_RANGE = 64


class LongitudinalCandidate(NamedTuple):
    """One protocol considered by :func:`choose_longitudinal`."""

    #: The protocol's name (``L-GRR``, ``L-OUE``, ``L-OSUE``, ``L-SUE``, ``L-SOUE``, ``LOLOHA``).
    name: str
    #: The spec at the per-key budget, or None when the budget cannot exceed epsilon_1.
    spec: Any
    #: Memo keys (permanent answers) a device may reveal over the period.
    memo_keys: int
    #: The permanent-round budget each key gets: epsilon_inf / memo_keys.
    key_epsilon: float
    #: n * Var of one item's estimate at f = 0 (inf when infeasible); lower is better.
    scaled_variance: float

    @property
    def feasible(self) -> bool:
        """Whether the protocol can keep the period's loss within epsilon_inf."""
        return self.spec is not None


class LongitudinalChoice(NamedTuple):
    """The chosen protocol and every candidate with its memo keys and variance."""

    spec: Any
    candidates: tuple[LongitudinalCandidate, ...]

    def __str__(self) -> str:
        """Return a table of the candidates."""
        lines = [
            f"chosen: {self.spec!r}",
            f"{'protocol':<10}{'keys':>6}{'eps/key':>10}{'n*Var':>14}",
        ]
        for c in self.candidates:
            lines.append(
                f"{c.name:<10}{c.memo_keys:>6}{c.key_epsilon:>10.4g}{c.scaled_variance:>14.4g}"
                + ("" if c.feasible else "  (key budget <= epsilon_1)")
            )
        return "\n".join(lines)


def _candidate(name: str, cls: Any, keys: int, epsilon_inf: float, epsilon_1: float, **kw: Any):
    key_epsilon = epsilon_inf / keys
    spec = None
    if key_epsilon > epsilon_1:
        try:
            spec = cls(epsilon_inf=key_epsilon, epsilon_1=epsilon_1, **kw)
        except ValueError as exc:
            # epsilon_1 too close to the key budget for an exact law: infeasible; any
            # other refusal (a domain beyond the memory budget) is the caller's to see
            if not str(exc).startswith("epsilon"):
                raise
            spec = None
    variance = math.inf if spec is None else float(spec.variance(1))
    return LongitudinalCandidate(name, spec, keys, key_epsilon, variance)


def _loloha(d: int, distinct: int, epsilon_inf: float, epsilon_1: float) -> LongitudinalCandidate:
    """Return LOLOHA at its best hash range g for ``distinct`` values.

    Tried: each ``g < distinct`` (budget epsilon_inf / g), and the variance-optimal g at
    budget epsilon_inf / distinct when it is at least ``distinct``.
    """
    from .loloha import LOLOHA, loloha_hash_range

    options = [
        _candidate("LOLOHA", LOLOHA, g, epsilon_inf, epsilon_1, domain_size=d, hash_range=g)
        for g in range(2, min(distinct, d + 1, MAX_SPLIT_RANGE + 1))
    ]
    keys = min(distinct, d)
    key_epsilon = epsilon_inf / keys
    if key_epsilon > epsilon_1:
        g = loloha_hash_range(key_epsilon, epsilon_1, d)
        if g >= keys:  # a larger g reveals no more keys than there are values
            options.append(
                _candidate("LOLOHA", LOLOHA, keys, epsilon_inf, epsilon_1, domain_size=d)
            )
    if not options:
        return LongitudinalCandidate("LOLOHA", None, keys, key_epsilon, math.inf)
    return min(options, key=lambda c: c.scaled_variance)


def choose_longitudinal(
    domain_size: int,
    epsilon_inf: float,
    epsilon_1: float,
    changes_per_year: int | None = None,
    *,
    explain: bool = False,
) -> Any:
    """Pick the longitudinal frequency protocol with the lowest variance per window.

    Every device must lose at most ``epsilon_inf`` over the period (a year) and
    ``epsilon_1`` per report. With ``changes_per_year = c`` a device reveals up to ``c +
    1`` values, hence up to ``min(c + 1, d)`` memoized permanent answers under L-GRR, L-OUE,
    L-OSUE, L-SUE, L-SOUE and ``min(c + 1, g)`` under LOLOHA (memoized per hashed value);
    each protocol runs its permanent round at ``epsilon_inf`` divided by that count (so
    its loss over the period is ``epsilon_inf``), and the feasible one with the smallest
    ``n Var*`` (its closed-form variance at f = 0, from the realized probabilities: Arcolezi
    et al. 2022 for the L-protocols, EDBT 2023 for LOLOHA, with g searched) is returned.
    Ties go to the first of L-GRR, L-OUE, L-OSUE, L-SUE, L-SOUE, LOLOHA.

    Parameters
    ----------
    domain_size : int
        Number of items d (>= 2).
    epsilon_inf : float
        The most a device may lose over the period, over all its reports and values.
    epsilon_1 : float
        The loss of one report (< epsilon_inf).
    changes_per_year : int or None
        The most times a device's value changes over the period; None (or 0): never, so
        every protocol gets the whole ``epsilon_inf`` for its one value.
    explain : bool
        If True, return a :class:`LongitudinalChoice` (the spec and every candidate; ``print``
        it for a table) instead of the spec alone.

    Returns
    -------
    LongitudinalOracle or LongitudinalChoice
        The spec, built at its per-key budget (its ``epsilon_inf`` field is that budget;
        ``longitudinal_privacy_loss(changes_per_year + 1)`` is at most ``epsilon_inf``).

    Raises
    ------
    ValueError
        If no protocol can keep the period's loss within ``epsilon_inf``: every per-key
        budget is at most ``epsilon_1`` (allow fewer changes, a larger ``epsilon_inf`` or a
        smaller ``epsilon_1``).

    Notes
    -----
    DBitFlipPM is not a candidate: its one budget covers one report and every repeat of it,
    with no separate epsilon_1. The rule is checked against the measured MSE per window of
    ``benchmarks/longitudinal.py`` in docs/design/METHODS.md.

    References
    ----------
    H. H. Arcolezi, J.-F. Couchot, B. Al Bouna, X. Xiao. Improving the Utility of Locally
    Differentially Private Protocols for Longitudinal and Multidimensional Frequency
    Estimates. arXiv:2111.04636 (2022), section 3 (variances of L-GRR and the L-UE family).
    H. H. Arcolezi, C. Pinzón, C. Palamidessi, S. Gambs. Frequency Estimation of Evolving
    Data Under Local Differential Privacy. EDBT 2023, section 4 (LOLOHA's variance, g).

    Examples
    --------
    >>> choose_longitudinal(32, epsilon_inf=1.0, epsilon_1=0.5).name
    'LOSUE'
    >>> choose_longitudinal(4, epsilon_inf=2.0, epsilon_1=1.0).name
    'LGRR'
    >>> spec = choose_longitudinal(32, epsilon_inf=4.0, epsilon_1=0.5, changes_per_year=10)
    >>> spec.name, spec.hash_range, round(spec.longitudinal_privacy_loss(11), 6)
    ('LOLOHA', 3, 4.0)
    """
    from .grr import LGRR
    from .unary import LOSUE, LOUE, LSOUE, LSUE

    d = check_integer(domain_size, "domain_size", low=2)
    epsilon_inf = check_epsilon(epsilon_inf, "epsilon_inf", high=RR_MAX_EPSILON)
    epsilon_1 = check_epsilon(epsilon_1, "epsilon_1", high=RR_MAX_EPSILON)
    if not epsilon_1 < epsilon_inf:
        raise ValueError(f"epsilon_1 must be < epsilon_inf = {epsilon_inf!r}, got {epsilon_1!r}")
    changes = 0 if changes_per_year is None else changes_per_year
    changes = check_integer(changes, "changes_per_year", low=0)
    distinct = changes + 1
    keys = min(distinct, d)
    plain = (
        ("L-GRR", LGRR),
        ("L-OUE", LOUE),
        ("L-OSUE", LOSUE),
        ("L-SUE", LSUE),
        ("L-SOUE", LSOUE),
    )
    candidates = (
        *(
            _candidate(name, cls, keys, epsilon_inf, epsilon_1, domain_size=d)
            for name, cls in plain
        ),
        _loloha(d, distinct, epsilon_inf, epsilon_1),
    )
    feasible = [c for c in candidates if c.feasible]
    if not feasible:
        raise ValueError(
            f"epsilon_inf must leave each memoized answer more than epsilon_1 = {epsilon_1!r} "
            f"at changes_per_year = {changes} and domain_size = {d} (up to {keys} memo keys: "
            f"epsilon_inf / {min(keys, 2)} at best, with LOLOHA's g = 2), got {epsilon_inf!r}"
        )
    # min() keeps the first of equal variances: the candidates' order breaks ties.
    best = min(feasible, key=lambda c: c.scaled_variance)
    return LongitudinalChoice(best.spec, candidates) if explain else best.spec
