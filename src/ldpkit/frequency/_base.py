"""Shared base of categorical frequency oracles (FO17 section 3)."""

from __future__ import annotations

import dataclasses
from abc import abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from .._constraints import Alternatives, Size
from .._matrix_loss import privacy_loss as _matrix_privacy_loss
from .._validation import check_categorical_values, check_frequencies, check_integer
from ..estimate import FrequencyEstimate
from ..spec import Mechanism, Reports, Stats, StatsField

__all__ = ["FrequencyOracle", "PureFrequencyOracle", "index_dtype"]

#: Largest domain for which transition_matrix() builds a dense matrix.
MAX_DENSE_OUTPUTS = 1 << 22


def independent_support_variance(p: float, q: float, u: np.ndarray) -> np.ndarray:
    """``Var[u[:, i] . s | v]`` (rows v) when every support bit is independent.

    The true item's bit is 1 w.p. ``p``, every other item's w.p. ``q``: unary encoding, and
    local hashing under an ideal hash (each other item hashes to the reported bucket
    independently w.p. 1/g); ``p(1-p) u_v^2 + q(1-q) (U2 - u_v^2)`` with ``U2 = sum u^2``
    (FO17 section 4; the derivation is in ``ldpkit.numeric._intervals``).
    """
    sq = u * u
    return p * (1.0 - p) * sq + q * (1.0 - q) * (sq.sum(axis=0) - sq)


def postprocess_method(
    postprocess: str | None,
) -> Callable[[FrequencyEstimate], FrequencyEstimate] | None:
    """Return the consistency method called ``postprocess`` (None for None).

    The one check of every ``estimate(..., postprocess=)``: a name of
    :data:`ldpkit.consistency.METHODS`, else a ``ValueError`` listing them.
    """
    if postprocess is None:
        return None
    from ..consistency import METHODS  # server side: consistency loads scipy

    if postprocess not in METHODS:
        raise ValueError(
            f"postprocess must be None or one of {sorted(METHODS)}, got {postprocess!r}"
        )
    return METHODS[postprocess]


def index_dtype(size: int) -> np.dtype:
    """Smallest unsigned dtype holding 0..size-1 (keeps reports compact on the wire)."""
    for dt in (np.uint8, np.uint16, np.uint32):
        if size - 1 <= np.iinfo(dt).max:
            return np.dtype(dt)
    return np.dtype(np.uint64)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FrequencyOracle(Mechanism):
    """A categorical frequency oracle over the domain ``{0, ..., domain_size - 1}``.

    Parameters
    ----------
    epsilon : float
        Privacy budget, finite and > 0.
    domain_size : int
        Number of items d (>= 2).
    """

    domain_size: int

    #: True when ``privacy_loss()`` equals ``epsilon`` (up to the sampler's 2^-64
    #: quantization); False when the mechanism is strictly more private than its budget
    #: (e.g. THE, whose thresholded report discards part of what the noise protects).
    exact_epsilon: ClassVar[bool] = True
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {"domain_size": [Size(2, small=6)]}

    def check_values(self, values: Any) -> np.ndarray:
        return check_categorical_values(values, self.domain_size, "values")

    @abstractmethod
    def variance(self, n: int, f: Any = None) -> Any:
        """Variance of one item's frequency estimate from n reports (at true frequency f)."""

    def transition_matrix(self) -> np.ndarray:
        """Exact P[output | input] as an array of shape (d, n_outputs), when enumerable."""
        raise NotImplementedError(f"{self.name} has no enumerable output space")

    def output_index(self, reports: Reports) -> np.ndarray:
        """Column of :meth:`transition_matrix` that each report is (for sampler tests)."""
        raise NotImplementedError(f"{self.name} has no enumerable output space")

    def privacy_loss(self) -> float:
        """Return the exact epsilon of the mechanism, computed from its output probabilities."""
        return _matrix_privacy_loss(self.transition_matrix())


@dataclasses.dataclass(frozen=True, kw_only=True)
class PureFrequencyOracle(FrequencyOracle):
    """A *pure* protocol (FO17 Definition 2).

    Each report supports a set of items, with ``P[v in Support(y) | v] = p`` and
    ``P[v in Support(y) | v' != v] = q``.

    Subclasses provide ``p``, ``q``, ``randomize`` and ``support_counts``; this class gives
    the unbiased estimator ``f~_v = (C_v / n - q) / (p - q)`` and its variance
    (FO17 Theorem 2, eq. 2).
    """

    #: Read by :mod:`ldpkit.consistency`, which sits below the families and imports no
    #: mechanism module (this one imports it lazily, for ``estimate(postprocess=)``): the
    #: reports' support law is ``(p, q)``.
    _pure_oracle: ClassVar[bool] = True

    @property
    @abstractmethod
    def p(self) -> float:
        """P[v in Support(y) | input v]."""

    @property
    @abstractmethod
    def q(self) -> float:
        """P[v in Support(y) | input v' != v]."""

    def variance(self, n: int, f: Any = None) -> Any:
        """Var[f~_v] = (q(1-q) + f (p-q)(1-p-q)) / (n (p-q)^2)  (FO17 eq. 2).

        With ``f=None`` the f-term is dropped (FO17's Var*, eq. 3), which is what FO17
        Table 2 lists (times n).
        """
        n = check_integer(n, "n", low=1)
        p, q = self.p, self.q
        base: Any = q * (1.0 - q)
        if f is not None:
            f = check_frequencies(f, self.domain_size)
            base = base + f * (p - q) * (1.0 - p - q)
        return base / (n * (p - q) ** 2)

    @abstractmethod
    def support_counts(self, reports: Reports) -> np.ndarray:
        """C_v: number of reports whose support contains v, for every v (int64, shape (d,))."""

    def stats_schema(self) -> dict[str, StatsField]:
        """Return the Stats fields: ``counts``, support counts, each in [0, n]."""
        return {"counts": StatsField((self.domain_size,))}

    def empty_stats(self) -> Stats:
        return Stats(self, 0, counts=np.zeros(self.domain_size, dtype=np.int64))

    def aggregate(self, reports: Reports) -> Stats:
        reports = self.check_reports(reports)
        counts = np.asarray(self.support_counts(reports), dtype=np.int64)
        return Stats(self, len(reports), counts=counts)

    def _aggregate_decoded(self, arrays: dict[str, np.ndarray]) -> Stats:
        # The collector's small groups: the same report checks (Reports' dtypes, then
        # support_counts' own, e.g. OLH's value < g), without Reports.__init__'s conversion
        # passes; ldpkit's own support_counts return int64 counts in [0, n] of shape (d,)
        # (bincounts, compiled kernels), so the Stats schema check would only repeat itself.
        reports = Reports._from_decoded(self, arrays)
        counts = self.support_counts(reports)
        if (
            type(self).support_counts.__module__.startswith("ldpkit.")
            and type(counts) is np.ndarray
            and counts.dtype == np.int64
            and counts.shape == (self.domain_size,)
        ):
            return Stats._exact(self, len(reports), {"counts": counts})
        return Stats(self, len(reports), counts=np.asarray(counts, dtype=np.int64))

    def estimate(self, stats: Stats, *, postprocess: str | None = None) -> FrequencyEstimate:
        """Unbiased frequencies with plug-in variance and the spec attached.

        ``postprocess`` names a method of :data:`ldpkit.consistency.METHODS` (e.g.
        ``"ibu"``, ``"norm_sub"``) to apply to it, recorded in ``postprocessing``.
        """
        method = postprocess_method(postprocess)
        stats = self.check_stats(stats, nonempty=True)
        freq = (stats.counts / stats.n - self.q) / (self.p - self.q)
        var = self.variance(stats.n, np.clip(freq, 0.0, 1.0))
        est = FrequencyEstimate(freq, var, stats.n, spec=self)
        return est if method is None else method(est)
