"""Continuous release of numerical streams (STR21): ToPS (central DP) and its baselines.

ToPL (the local-DP half) will live in ``ldpkit.stream.topl`` on the same base class
(:class:`StreamRelease`), smoothers and metrics.
"""

from ._base import STREAM_CLASSES, RangeSum, StreamRelease, stream_from_dict
from .baselines import (
    HC16,
    NME,
    PAK,
    FlatLaplace,
    pak_threshold,
    smooth_sensitivity_order_statistic,
)
from .hierarchy import OnlineHierarchy
from .metrics import METRICS, evaluate_ranges, random_ranges, range_errors
from .smoothers import (
    SMOOTHERS,
    ExponentialSmoother,
    MeanSmoother,
    MedianSmoother,
    MovingAverageSmoother,
    RecentSmoother,
    Smoother,
    make_smoother,
)
from .threshold import choose_threshold, exponential_mechanism, exponential_mechanism_probabilities
from .tops import ToPS

__all__ = [
    "ToPS",
    "PAK",
    "NME",
    "HC16",
    "FlatLaplace",
    "StreamRelease",
    "RangeSum",
    "stream_from_dict",
    "STREAM_CLASSES",
    "OnlineHierarchy",
    "Smoother",
    "RecentSmoother",
    "MeanSmoother",
    "MedianSmoother",
    "MovingAverageSmoother",
    "ExponentialSmoother",
    "SMOOTHERS",
    "make_smoother",
    "choose_threshold",
    "exponential_mechanism",
    "exponential_mechanism_probabilities",
    "pak_threshold",
    "smooth_sensitivity_order_statistic",
    "random_ranges",
    "range_errors",
    "evaluate_ranges",
    "METRICS",
]
