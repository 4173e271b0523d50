"""Numerical distributions through a categorical frequency oracle on equal bins (SW20 4.1).

The simplest way to estimate a numerical distribution under LDP: cut [low, high] into c
equal bins, let each user report her bin through a frequency oracle (GRR when c is small,
OLH otherwise), and spread each bin's unbiased mass uniformly inside the bin; SW20 then
makes it a probability vector with Norm-Sub (``postprocess="norm_sub"``). The bin count trades noise (many bins)
against bias (few bins); SW20 evaluates c = 16, 32 and 64.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from .._constraints import FINITE_BOUND, Alternatives, Check, Size
from .._rng import RNGLike
from .._validation import check_numeric_values
from ..frequency._base import FrequencyOracle
from ..spec import (
    REPORT_COUNT,
    Mechanism,
    Reports,
    Stats,
    StatsField,
    report_count_arrays,
    with_report_count,
)
from .distribution import Distribution, bucket_index, check_bounds

__all__ = ["CFOBinning", "cfo_oracle", "bucket_index"]


def cfo_oracle(epsilon: float, domain_size: int, oracle: str | None = None) -> FrequencyOracle:
    """Return the frequency oracle SW20 uses for ``domain_size`` items: GRR or OLH.

    GRR when ``domain_size < 3 e^eps + 2``, else OLH (the variance comparison of FO17
    section 5 restricted to the two compact oracles, as SW20 section 4.1 does). ``oracle``
    names any oracle of :data:`ldpkit.frequency.ORACLES` instead.

    Examples
    --------
    >>> cfo_oracle(1.0, 8).name, cfo_oracle(1.0, 16).name, cfo_oracle(1.0, 16, "OUE").name
    ('GRR', 'OLH', 'OUE')
    """
    from ..frequency import ORACLES  # the registry imports every oracle: only when needed

    if oracle is None:
        # d < 3 e^eps + 2, without overflow for huge epsilon
        grr = epsilon > 50.0 or domain_size < 3.0 * math.exp(epsilon) + 2.0
        oracle = "GRR" if grr else "OLH"
    if oracle == "OLH":  # plain items: what a stored spec naming no key mix has always meant
        return ORACLES[oracle](epsilon=epsilon, domain_size=domain_size, mix_items=False)  # type: ignore[call-arg]
    return ORACLES[oracle](epsilon=epsilon, domain_size=domain_size)


def check_oracle_name(name: Any, allowed: tuple[str, ...] | None = None) -> str | None:
    """Validate an ``oracle=`` override (None, or a name of the oracle registry)."""
    from ..frequency import ORACLES

    choices = tuple(ORACLES) if allowed is None else allowed
    if name is None:
        return None
    if not isinstance(name, str) or name not in choices:
        raise ValueError(f"oracle must be None or one of {list(choices)}, got {name!r}")
    return name


@dataclasses.dataclass(frozen=True, kw_only=True)
class CFOBinning(Mechanism):
    """Equal-width binning + a categorical frequency oracle (SW20 section 4.1).

    A value in [low, high] is mapped to one of ``buckets`` equal buckets (SW20's bins),
    which the user reports through :attr:`frequency_oracle` with the full budget. The
    server estimates unbiased bucket frequencies and spreads each bucket's mass uniformly
    inside it; SW20 then projects them onto the probability simplex (Norm-Sub,
    ``estimate(stats, postprocess="norm_sub")``).

    Parameters
    ----------
    epsilon : float
        Privacy budget, in [1e-6, ``max_epsilon``] (per class: docs/design/THREAT_MODEL.md).
    low, high : float
        The value domain (default [0, 1]).
    buckets : int
        Number c of equal buckets (SW20's bins; >= 2; SW20 evaluates 16, 32 and 64).
        Default 32. The estimate is a Distribution on them; ``dist.rebin(k)`` spreads it
        on k buckets.
    oracle : str, optional
        Name of the frequency oracle (:data:`ldpkit.frequency.ORACLES`). Default: SW20's
        choice, GRR when ``c < 3 e^eps + 2``, else OLH (:func:`cfo_oracle`).

    Notes
    -----
    eps-LDP because the oracle is (the bin is a function of the value). Reports and Stats
    hold the oracle's own arrays (e.g. ``values`` for GRR, ``seeds`` + ``values`` for OLH;
    ``counts`` in the Stats), so they are exactly the oracle's, tagged with this spec.
    Norm-Sub is the exact Euclidean projection onto the simplex
    (:func:`ldpkit.consistency.norm_sub`, CON20 section IV).

    References
    ----------
    Z. Li, T. Wang, M. Lopuhaä-Zwakenberg, N. Li, B. Škorić. Estimating Numerical
    Distributions under Local Differential Privacy. SIGMOD 2020, section 4.1.
    T. Wang, M. Lopuhaä-Zwakenberg et al. Locally Differentially Private Frequency
    Estimation with Consistency. NDSS 2020 (Norm-Sub).

    Examples
    --------
    >>> cfo = CFOBinning(epsilon=1.0, buckets=16)
    >>> cfo.frequency_oracle.name
    'OLH'
    >>> values = np.random.default_rng(0).beta(5, 2, size=20_000)
    >>> dist = cfo.run(values, rng=0)
    >>> dist.buckets, bool(abs(dist.mean() - values.mean()) < 0.1)
    (16, True)
    """

    low: float = 0.0
    high: float = 1.0
    buckets: int = 32
    oracle: str | None = None

    def _interval_unsupported_reason(self) -> str | None:
        """Why the plain estimate has no analytic interval (None: it has one)."""
        from ._intervals import oracle_supported

        o = self.frequency_oracle
        return None if oracle_supported(o) else f"no analytic variance for oracle {o.name}"

    def _linear_query_variances(self, stats: Stats, masses: np.ndarray, w: np.ndarray) -> Any:
        """Variances of the linear queries ``w[:, i] . p`` of the plain estimate."""
        from ._intervals import cfo_query_variances

        return cfo_query_variances(self, stats, masses, w)

    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "low": [FINITE_BOUND],
        "high": [FINITE_BOUND],
        "buckets": [Size(2, small=16)],
        "oracle": [
            Check(
                lambda value, _: check_oracle_name(value),
                "one of the names of ldpkit.frequency.ORACLES",
                kind="str",
                hostile_values=["nope", 3],
            ),
            None,
        ],
    }

    def _validate(self) -> None:
        lo, hi = check_bounds(self.low, self.high)  # the pair: low < high, a usable width
        self._set("low", lo)
        self._set("high", hi)

    @property
    def frequency_oracle(self) -> FrequencyOracle:
        """The categorical oracle over the ``buckets`` buckets (same epsilon)."""
        return cfo_oracle(self.epsilon, self.buckets, self.oracle)

    # -- client ---------------------------------------------------------------------------
    def bucket_index(self, values: Any) -> np.ndarray:
        """Bucket (0 .. buckets - 1) of each value; values must lie in [low, high]."""
        v = check_numeric_values(values, self.low, self.high, "values")
        return bucket_index(v, self.low, self.high, self.buckets)

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Each user's bin, reported through the oracle (its report arrays, this spec)."""
        inner = self.frequency_oracle.randomize(self.bucket_index(values), rng=rng)
        return Reports(self, **inner.arrays)

    # -- server ---------------------------------------------------------------------------
    def _inner_reports(self, reports: Reports) -> Reports:
        reports = self.check_reports(reports)
        return Reports(self.frequency_oracle, **reports.arrays)

    def privacy_loss(self) -> float:
        """Return the oracle's loss: the bin is a function of the value, reported once."""
        return self.frequency_oracle.privacy_loss()

    def stats_schema(self) -> Mapping[str, StatsField] | None:
        """Return the oracle's Stats fields (support ``counts`` over the buckets).

        Plus the reports' ``count`` (= n) when the counts do not sum to n (OLH, OUE).
        """
        inner = self.frequency_oracle.stats_schema()
        return None if inner is None else with_report_count(inner)

    def _own_stats(self, inner: Stats) -> Stats:
        return Stats(self, inner.n, **inner.arrays, **report_count_arrays(self, inner.n))

    def empty_stats(self) -> Stats:
        """Return the oracle's Stats of no report, as this spec's."""
        return self._own_stats(self.frequency_oracle.empty_stats())

    def aggregate(self, reports: Reports) -> Stats:
        """Return the oracle's sufficient statistic (support ``counts``) over the buckets."""
        return self._own_stats(self.frequency_oracle.aggregate(self._inner_reports(reports)))

    def frequency_estimate(self, stats: Stats) -> Any:
        """Unbiased bucket frequencies with their variance (the oracle's FrequencyEstimate)."""
        stats = self.check_stats(stats, nonempty=True)
        oracle = self.frequency_oracle
        arrays = {k: v for k, v in stats.arrays.items() if k != REPORT_COUNT}
        return oracle.estimate(Stats(oracle, stats.n, **arrays))

    def estimate(self, stats: Stats, *, postprocess: str | None = None) -> Distribution:
        """Return the unbiased bucket frequencies as a Distribution (mass uniform in each bucket).

        Parameters
        ----------
        stats : Stats
            Aggregated (and possibly merged) reports of this spec.
        postprocess : {None, "norm_sub", "norm_mul", "cdf"}
            None (default): the plain estimate, the oracle's unbiased frequencies (a signed
            Distribution when some are negative). ``"norm_sub"`` gives SW20's CFO binning
            (Norm-Sub, CON20); see :meth:`Distribution.postprocess`.
        """
        est = self.frequency_estimate(stats)
        dist = Distribution.from_estimate(
            est.frequencies, self.low, self.high, n=est.n, spec=self, stats=stats
        )
        return dist if postprocess is None else dist.postprocess(postprocess)
