"""ldpkit: local differential privacy, fast, exact and tested."""

from ._rng import as_generator, secure_generator, spawn
from .encoder import Encoder
from .estimate import FrequencyEstimate
from .frequency import GRR, RAPPOR, FrequencyOracle, PureFrequencyOracle, RAPPORClient
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
    "RAPPOR",
    "RAPPORClient",
    "privacy_loss",
    "split_budget",
    "Mechanism",
    "Reports",
    "Stats",
]
