"""Set-valued frequencies by padding-and-sampling (Wang, Li, Jha, IEEE S&P 2018, section IV).

Each user holds a set of items from ``[0, d)``; she pads it with dummy items to the padding
length ``ell``, samples one slot uniformly (:func:`ldpkit.sets._input.sample_padded`) and
reports that item (real or dummy) with a frequency oracle over the ``d + ell`` items: GRR
or OLH. The oracle's unbiased estimate, times ``ell``, estimates each item's frequency.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any, ClassVar

import numpy as np

from .._constraints import Alternatives, Options, Size
from .._exact import RR_MAX_EPSILON
from .._rng import RNGLike, as_generator
from .._validation import check_array, check_integer, check_probability
from ..estimate import FrequencyEstimate, IntervalWarning
from ..spec import Mechanism, Reports, Stats, StatsField
from ._input import SetContractHooks, UserSets, as_user_sets, sample_padded

__all__ = ["PaddingSampling", "SetFrequencyEstimate"]

_ORACLES = ("grr", "olh")


def _z(alpha: float) -> float:
    from scipy import special  # server side only

    return float(-special.ndtri(alpha / 2.0))


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class SetFrequencyEstimate(FrequencyEstimate):
    """Item frequencies from padding-and-sampling, with the padding's bias made explicit.

    ``frequencies`` estimate, without bias, the *padded frequency* ``t_v = (1/n) sum over
    users holding v of min(1, ell / L_u)``: the true share of users holding v when no set
    is longer than the padding length ``ell``, and less by at most the share of users
    whose set is longer. That share is bounded by ``P[L >= ell]``, which the dummies
    estimate for free (a dummy ``d + j`` is reported by exactly the users with ``L <= j``):
    ``true f_v`` lies in ``[t_v, t_v + P[L >= ell]]``.

    Attributes (beyond :class:`ldpkit.FrequencyEstimate`'s)
    ---------------------------------------------------------
    padding : int
        The padding length ell.
    long_share : float
        Unbiased estimate of ``P[L >= ell]``, the share of users with at least ell items
        (an upper bound on the share whose sets were sampled down).
    long_share_variance : float
        Its variance.
    length_cdf : ndarray, shape (ell,)
        Unbiased estimates of ``P[L <= j]`` for ``j = 0, ..., ell - 1``.
    """

    padding: int = 1
    long_share: float = 0.0
    long_share_variance: float = 0.0
    length_cdf: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(1))

    def bias_bound(self, alpha: float = 0.05) -> float:
        """Return a ``1 - alpha`` upper confidence bound on ``P[L >= ell]``, clipped to [0, 1].

        Every true frequency exceeds the padded frequency by at most this much.
        """
        alpha = check_probability(alpha, "alpha")
        z = _z(2.0 * alpha)  # one-sided
        return float(np.clip(self.long_share + z * math.sqrt(self.long_share_variance), 0, 1))

    def padded_interval(self, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
        """Return an interval for the *true* frequencies (not the padded ones).

        The ``1 - alpha / 2`` interval of the estimate, its upper end raised by
        :meth:`bias_bound` at ``alpha / 2`` (Bonferroni: coverage >= 1 - alpha).
        """
        alpha = check_probability(alpha, "alpha")
        lo, hi = self.confidence_interval(alpha / 2.0)
        return lo, hi + self.bias_bound(alpha / 2.0)

    def to_frame(self, alpha: float = 0.05) -> Any:
        """Return :meth:`FrequencyEstimate.to_frame` plus the padded bound's columns.

        ``ci_high_padded`` (the upper end of :meth:`padded_interval`) and ``bias_bound``
        (the same for every item).
        """
        frame = super().to_frame(alpha)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IntervalWarning)
            frame["ci_high_padded"] = self.padded_interval(alpha)[1]
        frame["bias_bound"] = self.bias_bound(alpha / 2.0)
        return frame

    def __repr__(self) -> str:
        """Return a one-line summary."""
        return (
            f"SetFrequencyEstimate(d={self.domain_size}, n={self.n}, padding={self.padding}, "
            f"long_share={self.long_share:.4g})"
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class PaddingSampling(SetContractHooks, Mechanism):
    """Padding-and-sampling frequency oracle for users who hold sets of items.

    A user with set ``S`` (``L = |S|`` items from ``[0, d)``) pads it with dummy items
    ``d + L, ..., d + ell - 1`` up to ``ell`` slots, draws one of the ``max(L, ell)`` slots
    uniformly and reports its item with GRR or OLH over ``d + ell`` items, at the full
    budget. The server multiplies the oracle's estimate by ``ell``.

    Parameters
    ----------
    epsilon : float
        Privacy budget of one report, in ``[1e-6, 40]``.
    domain_size : int
        Number of real items d (>= 2).
    padding : int
        The padding length ell (>= 1). Sets longer than ell are sampled down, which biases
        their items' frequencies downward (see :class:`SetFrequencyEstimate`); SVIM picks
        ell as the 90th percentile of the set lengths.
    oracle : {"grr", "olh"} or None
        The frequency oracle over the ``d + ell`` items; None (default) picks GRR when
        ``d + ell < 3 e^eps + 2`` and OLH otherwise (FO17 section 5), as
        :func:`ldpkit.choose_oracle` does between those two.

    Notes
    -----
    Privacy: the report is the oracle's output for one item; sampling is independent of
    the oracle's coins, so any two sets give mixtures of the oracle's rows, within its
    ratio ``e^eps``. With GRR the exact loss is smaller for ``ell > 1``: an item is
    sampled with probability at most ``1 / ell``, so ``P[y | S] / P[y | S']`` is at most
    ``(q + (p - q) / ell) / q = 1 + (e^eps - 1) / ell``; ``privacy_loss()`` returns this
    (``exact_epsilon`` is then False). With OLH the loss is the oracle's epsilon (attained
    when ell of a user's items hash to one value).

    Estimation (Wang et al. 2018, Theorem 3 / eq. 6): ``f^_v = ell (C_v / n - q) / (p - q)``
    with the oracle's p, q; ``E[f^_v] = t_v`` (the padded frequency,
    :class:`SetFrequencyEstimate`) and ``Var[f^_v] = ell^2 (q (1 - q) + (t_v / ell)
    (p - q)(1 - p - q)) / (n (p - q)^2)``.

    References
    ----------
    T. Wang, N. Li, S. Jha. Locally Differentially Private Frequent Itemset Mining. IEEE
    S&P 2018, section IV (padding-and-sampling frequency oracle, PSFO).

    Examples
    --------
    >>> ps = PaddingSampling(epsilon=2.0, domain_size=5, padding=2)
    >>> ps.oracle_name
    'grr'
    >>> reports = ps.randomize([[0, 1], [2], [0, 3, 4], []], rng=0)
    >>> len(reports), reports.fields
    (4, ('values',))
    >>> est = ps.estimate(ps.aggregate(reports))
    >>> est.frequencies.shape, est.length_cdf.shape
    ((5,), (2,))
    """

    domain_size: int
    padding: int
    oracle: str | None = None

    max_epsilon: ClassVar[float] = RR_MAX_EPSILON
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "domain_size": [Size(2, small=6)],
        "padding": [Size(1, 1 << 20, small=2)],
        "oracle": [Options(*_ORACLES), None],
    }

    def _validate(self) -> None:
        if self.domain_size + self.padding > 1 << 32:
            raise ValueError(
                f"domain_size + padding must be <= 2^32, got {self.domain_size + self.padding}"
            )

    # -- the inner oracle ----------------------------------------------------------------
    @property
    def oracle_name(self) -> str:
        """The oracle in use: ``oracle``, or FO17's pick between GRR and OLH."""
        if self.oracle is not None:
            return self.oracle
        return (
            "grr" if self.domain_size + self.padding < 3.0 * math.exp(self.epsilon) + 2 else "olh"
        )

    @property
    def inner(self) -> Any:
        """The frequency oracle over the ``d + ell`` padded items (GRR or OLH)."""
        from ..frequency.grr import GRR
        from ..frequency.hashing import OLH

        d = self.domain_size + self.padding
        if self.oracle_name == "grr":
            return GRR(epsilon=self.epsilon, domain_size=d)
        # plain items: a stored spec keeps the reports' meaning
        return OLH(epsilon=self.epsilon, domain_size=d, mix_items=False)

    @property
    def exact_epsilon(self) -> bool:
        """False for GRR with ell > 1 (the loss is below the budget, see Notes)."""
        return self.oracle_name == "olh" or self.padding == 1

    def privacy_loss(self) -> float:
        """Return the exact loss of the sent report (see Notes), from the realized weights."""
        from .. import _crmath

        inner = self.inner
        if self.oracle_name == "olh":
            return float(inner.privacy_loss())
        w_keep, w_other = inner._weights()
        # ratio (q + (p - q) / ell) / q = 1 + (w_keep - w_other) / (ell w_other), exactly
        return _crmath.log1p((w_keep - w_other) / (self.padding * w_other))

    def variance(self, n: int, f: Any = None) -> Any:
        """Return the variance of one item's estimate from n reports.

        At padded frequencies f in [0, 1], a number or an array (f = None: at 0, FO17's
        Var*): ``ell^2`` times the oracle's at ``f / ell``.
        """
        n = check_integer(n, "n", low=1)
        inner = self.inner
        p, q = inner.p, inner.q
        base: Any = q * (1.0 - q)
        if f is not None:
            f = check_array(f, "f", ndim=(0, 1), low=0.0, high=1.0)
            base = base + f / self.padding * (p - q) * (1.0 - p - q)
        return self.padding**2 * base / (n * (p - q) ** 2)

    # -- the flow ------------------------------------------------------------------------
    def check_values(self, values: Any) -> UserSets:
        """Return ``values`` as :class:`UserSets` over ``[0, domain_size)``.

        ``values`` is a list of item lists or a :class:`UserSets`; raises naming ``values``.
        """
        return as_user_sets(values, self.domain_size)

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Pad, sample one item per user, report it with the oracle (vectorized).

        ``values``: one list of item ids per user, or :class:`UserSets` (CSR, fastest).
        """
        sets = self.check_values(values)
        gen = as_generator(rng)
        slot, real = sample_padded(sets.offsets, self.padding, gen)
        picked = self.domain_size + slot  # dummies d + slot
        pos = sets.offsets[:-1][real] + slot[real]
        picked[real] = sets.items[pos]
        inner = self.inner.randomize(picked, rng=gen)
        return Reports(self, **inner.arrays)

    def stats_schema(self) -> dict[str, StatsField]:
        """Return the Stats fields: the oracle's ``counts`` over the ``d + ell`` padded items.

        GRR: one per report, summing to n.
        """
        total = 1 if self.oracle_name == "grr" else None
        return {"counts": StatsField((self.domain_size + self.padding,), total=total)}

    def empty_stats(self) -> Stats:
        """Return the Stats of no report (zero arrays): the neutral element of merge."""
        return Stats(self, 0, counts=np.zeros(self.domain_size + self.padding, dtype=np.int64))

    def aggregate(self, reports: Reports) -> Stats:
        """Reduce the reports to the oracle's counts over the padded items."""
        reports = self.check_reports(reports)
        inner = self.inner
        counts = inner.support_counts(Reports(inner, **reports.arrays))
        return Stats(self, len(reports), counts=np.asarray(counts, dtype=np.int64))

    def estimate(self, stats: Stats) -> SetFrequencyEstimate:
        """Estimate the padded frequencies (unbiased) and their variance.

        With the length information of the dummies (:class:`SetFrequencyEstimate`).
        """
        stats = self.check_stats(stats, nonempty=True)
        inner = self.inner
        p, q, ell, d = inner.p, inner.q, self.padding, self.domain_size
        slot_freq = (stats.counts / stats.n - q) / (p - q)  # P[report's item = v]
        scaled = ell * slot_freq
        var = self.variance(stats.n, np.clip(scaled, 0.0, 1.0))
        cdf = scaled[d:]
        return SetFrequencyEstimate(
            scaled[:d],
            var[:d],
            stats.n,
            spec=self,
            padding=ell,
            long_share=float(1.0 - cdf[-1]),
            long_share_variance=float(var[-1]),
            length_cdf=cdf,
        )
