"""Categorical frequency oracles (FO17) and their helpers."""

from ._base import FrequencyOracle, PureFrequencyOracle
from .grr import GRR

__all__ = ["ORACLES", "FrequencyOracle", "PureFrequencyOracle", "GRR"]

#: Every frequency oracle by name; the contract suite runs over this registry.
ORACLES: dict[str, type[FrequencyOracle]] = {"GRR": GRR}
