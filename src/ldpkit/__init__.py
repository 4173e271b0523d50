"""ldpkit: local differential privacy, fast, exact and tested."""

from . import metrics, numeric
from ._rng import as_generator, secure_generator, spawn
from .encoder import Encoder
from .estimate import FrequencyEstimate
from .frequency import GRR, FrequencyOracle, PureFrequencyOracle
from .privacy import privacy_loss, split_budget
from .spec import Mechanism, Reports, Stats

__version__ = "0.1.0"

__all__ = [
    "as_generator",
    "secure_generator",
    "spawn",
    "Encoder",
    "FrequencyEstimate",
    "FrequencyOracle",
    "PureFrequencyOracle",
    "GRR",
    "privacy_loss",
    "split_budget",
    "Mechanism",
    "Reports",
    "Stats",
    "metrics",
    "numeric",
]
