"""Continuous release of numerical streams (STR21).

ToPS (central DP), ToPL (local DP) and their baselines, on one base class
(:class:`StreamRelease`), with shared metrics.
"""

from ._release import STREAM_CLASSES, RangeSum, StreamRelease, stream_from_dict
from .baselines import (
    HC16,
    NME,
    PAK,
    FlatLaplace,
    pak_threshold,
    smooth_sensitivity_order_statistic,
)
from .errors import METRICS, evaluate_ranges, random_ranges, range_errors
from .local_baselines import FixedDomainLDP, SWOnly, square_wave_mean_constants
from .online_hierarchy import OnlineHierarchy
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
from .threshold import (
    TailTest,
    ThresholdObjective,
    choose_threshold,
    choose_topl_threshold,
    cut_tail,
    exponential_mechanism,
    exponential_mechanism_probabilities,
    extend_tail,
    heldout_tail_test,
    square_wave_detection_floor,
    topl_threshold_objective,
)
from .topl import ToPL
from .topl_client import client_randomize
from .tops import ToPS
from .windows import (
    WindowedStats,
    WindowEstimates,
    aggregate_windows,
    count_windows,
    window_frequencies,
    window_keys,
    window_means,
    window_sums,
)

__all__ = [
    "ToPS",
    "PAK",
    "NME",
    "HC16",
    "FlatLaplace",
    "ToPL",
    "SWOnly",
    "FixedDomainLDP",
    "client_randomize",
    "topl_threshold_objective",
    "choose_topl_threshold",
    "cut_tail",
    "extend_tail",
    "heldout_tail_test",
    "TailTest",
    "square_wave_detection_floor",
    "ThresholdObjective",
    "square_wave_mean_constants",
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
    "WindowedStats",
    "WindowEstimates",
    "aggregate_windows",
    "count_windows",
    "window_keys",
    "window_means",
    "window_sums",
    "window_frequencies",
]
