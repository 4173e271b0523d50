"""ldpkit: local differential privacy, fast, exact and tested."""

from ._rng import as_generator, secure_generator, spawn
from .aggregator import Aggregator
from .encoder import Encoder
from .estimate import FrequencyEstimate
from .frequency import (
    BLH,
    GRR,
    HRR,
    OLH,
    FrequencyOracle,
    HadamardResponse,
    PureFrequencyOracle,
    SubsetSelection,
    choose_oracle,
    heavy_hitters,
)
from .privacy import privacy_loss, split_budget
from .spec import Mechanism, Reports, Stats

__version__ = "0.1.0"

__all__ = [
    "Aggregator",
    "as_generator",
    "secure_generator",
    "spawn",
    "Encoder",
    "FrequencyEstimate",
    "FrequencyOracle",
    "PureFrequencyOracle",
    "GRR",
    "SubsetSelection",
    "HadamardResponse",
    "HRR",
    "BLH",
    "OLH",
    "choose_oracle",
    "heavy_hitters",
    "privacy_loss",
    "split_budget",
    "Mechanism",
    "Reports",
    "Stats",
]
