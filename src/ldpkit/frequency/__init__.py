"""Categorical frequency oracles (FO17) and their helpers."""

from ._base import FrequencyOracle, PureFrequencyOracle
from .grr import GRR
from .hashing import BLH, OLH, LocalHashing

__all__ = ["ORACLES", "FrequencyOracle", "PureFrequencyOracle", "GRR", "LocalHashing", "BLH", "OLH"]

#: Every frequency oracle by name; the contract suite runs over this registry.
ORACLES: dict[str, type[FrequencyOracle]] = {"GRR": GRR, "BLH": BLH, "OLH": OLH}
