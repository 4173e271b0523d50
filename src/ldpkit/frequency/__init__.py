"""Categorical frequency oracles (FO17) and their helpers."""

from ._base import FrequencyOracle, PureFrequencyOracle
from .grr import GRR
from .rappor import RAPPOR, RAPPORClient, bloom_positions

__all__ = [
    "ORACLES",
    "FrequencyOracle",
    "PureFrequencyOracle",
    "GRR",
    "RAPPOR",
    "RAPPORClient",
    "bloom_positions",
]

#: Every frequency oracle by name; the contract suite runs over this registry.
ORACLES: dict[str, type[FrequencyOracle]] = {"GRR": GRR, "RAPPOR": RAPPOR}
