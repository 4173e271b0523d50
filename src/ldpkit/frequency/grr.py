"""Generalized randomized response (GRR, a.k.a. direct encoding / k-RR), FO17 section 4.1."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .. import _parallel
from .._exact import RR_MAX_EPSILON, ratio_loss, rr_probabilities, rr_weights
from .._rng import RNGLike, as_generator
from ..spec import Reports, StatsField
from ._base import PureFrequencyOracle, index_dtype

__all__ = ["GRR", "grr_sample"]

#: Users from which :func:`grr_sample` maps its uniforms by the compiled pass when numba
#: is installed (its import costs more than the numpy passes below).
COMPILED_MIN_USERS = 1 << 18


class OneItemReports:
    """Reports of one item each, ``P[y = v | v] = p`` and ``q`` for every other y.

    The report law of GRR and of L-GRR's chained rounds (:class:`ldpkit.longitudinal.LGRR`):
    ``reports.values`` holds one item per user, the support of a report is that item.
    Mixed in before the spec's base class, which provides ``domain_size``, ``p``, ``q`` and
    ``check_reports``.
    """

    if TYPE_CHECKING:  # provided by the spec's base class
        domain_size: int

        @property
        def p(self) -> float: ...

        @property
        def q(self) -> float: ...

        def check_reports(self, reports: Reports) -> Reports: ...

    def stats_schema(self) -> dict[str, StatsField]:
        """Return the schema: ``counts``, one supported item per report, summing to n."""
        return {"counts": StatsField((self.domain_size,), total=1)}

    def support_counts(self, reports: Reports) -> np.ndarray:
        """Return the count of reports of every item (the support is the reported item)."""
        y = reports.values
        if y.ndim != 1 or y.dtype.kind not in "iu" or (y.size and int(y.max()) >= self.domain_size):
            raise ValueError(f"reports.values must be items in [0, {self.domain_size})")
        return np.bincount(y, minlength=self.domain_size)

    def transition_matrix(self) -> np.ndarray:
        """Return ``P[report | value]``, d x d: ``p`` on the diagonal, ``q`` elsewhere."""
        d = self.domain_size
        m = np.full((d, d), self.q)
        np.fill_diagonal(m, self.p)
        return m

    def output_index(self, reports: Reports) -> np.ndarray:
        """Return each report's output index: the reported item."""
        return np.asarray(self.check_reports(reports).values, dtype=np.int64)


def grr_sample(
    values: np.ndarray, domain_size: int, weights: tuple[int, int], rng: np.random.Generator
) -> np.ndarray:
    """Sample GRR with integer weights.

    Report each value w.p. ``w_keep / T``, each other one w.p. ``w_other / T``,
    ``T = w_keep + (d - 1) w_other <= 2^62`` (exactly).

    One uniform integer ``u`` in ``[0, T)`` per user (numpy's bounded integers are exactly
    uniform): ``u < w_keep`` keeps; otherwise ``(u - w_keep) // w_other`` is uniform over
    the d - 1 other values. Shared by GRR and the hashing oracles (no float
    coin, whose probability would be rounded to 2^-53 and vanish at large epsilon).
    """
    w_keep, w_other = int(weights[0]), int(weights[1])
    total = w_keep + (domain_size - 1) * w_other
    u = np.asarray(rng.integers(0, total, size=values.shape[0], dtype=np.int64))
    if (
        values.ndim == 1
        and np.can_cast(values.dtype, np.int64)
        and _parallel.use_compiled(values.shape[0], COMPILED_MIN_USERS)
    ):
        from ._kernels_hashing import grr_from_uniform  # numba: loaded on first use

        return grr_from_uniform(values, u, w_keep, w_other)  # the same map, one pass
    keep = u < w_keep
    other = (u - w_keep) // w_other  # negative where kept: replaced by the value below
    other += other >= values
    return np.where(keep, values, other)


@dataclasses.dataclass(frozen=True, kw_only=True)
class GRR(OneItemReports, PureFrequencyOracle):
    """Generalized randomized response over d items.

    Each user reports her true item with probability ``p = e^eps / (e^eps + d - 1)`` and
    any other given item with probability ``q = 1 / (e^eps + d - 1)``.

    Sampling is exact: the law is the integer weights ``w_keep`` (true item)
    and ``w_other`` (each other item) of :func:`ldpkit._exact.rr_weights`, with
    ``w_keep / w_other <= e^eps`` and a total below 2^62, drawn with one uniform integer
    per user. ``p``, ``q``, the estimator and ``privacy_loss()`` (``log(w_keep /
    w_other)``, within 1e-15 of epsilon) use these realized probabilities.

    Parameters
    ----------
    epsilon : float
        Privacy budget, in ``[1e-6, 40]`` (``max_epsilon``: where ``e^eps`` integer weights
        still fit the 2^62 total).
    domain_size : int
        Number of items d (>= 2).

    Notes
    -----
    ``P[y | v] / P[y | v'] <= p / q = e^eps``, so GRR is eps-LDP, tightly. The estimator
    ``(C_v/n - q)/(p - q)`` has ``n Var* = (d - 2 + e^eps) / (e^eps - 1)^2`` (FO17 eq. 4-5).
    GRR beats OUE/OLH when ``d < 3 e^eps + 2`` (FO17 section 5).

    References
    ----------
    T. Wang, J. Blocki, N. Li, S. Jha. Locally Differentially Private Protocols for
    Frequency Estimation. USENIX Security 2017, section 4.1 ("Direct Encoding").

    Examples
    --------
    >>> grr = GRR(epsilon=1.0, domain_size=4)
    >>> reports = grr.randomize([0, 1, 2, 3, 3], rng=0)
    >>> len(reports), reports.values.dtype
    (5, dtype('uint8'))
    """

    max_epsilon: ClassVar[float] = RR_MAX_EPSILON

    def _weights(self) -> tuple[int, int]:
        return rr_weights(self.epsilon, self.domain_size - 1)

    @property
    def p(self) -> float:
        """Realized P[report = v | v]: ``w_keep / T`` (the paper's e^eps / (e^eps + d - 1))."""
        return rr_probabilities(self.epsilon, self.domain_size - 1)[0]

    @property
    def q(self) -> float:
        """Realized P[report = v' | v] for each v' != v: ``w_other / T``."""
        return rr_probabilities(self.epsilon, self.domain_size - 1)[1]

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Perturb each user's item; ``reports.values`` holds the reported items."""
        v = self.check_values(values)
        y = grr_sample(v, self.domain_size, self._weights(), as_generator(rng))
        return Reports(self, values=y.astype(index_dtype(self.domain_size)))

    def _support_variance(self, u: np.ndarray) -> np.ndarray:
        """``Var[u[:, i] . s | v]`` for every true item v (rows): one item is reported.

        ``p u_v^2 + q (U2 - u_v^2) - (p u_v + q (U1 - u_v))^2`` with ``U1 = sum u``,
        ``U2 = sum u^2`` (FO17 section 4); used by the numeric intervals
        (``ldpkit.numeric._intervals``) for linear queries of a GRR-based estimate.
        """
        p, q = float(self.p), float(self.q)
        sq = u * u
        mean_s = p * u + q * (u.sum(axis=0) - u)
        return p * sq + q * (sq.sum(axis=0) - sq) - mean_s * mean_s

    def privacy_loss(self) -> float:
        # Every output column holds p once and q elsewhere: the ratio is w_keep / w_other.
        """Return the exact epsilon of one report, from the integer weights."""
        return ratio_loss(*reversed(self._weights()))
