"""Categorical frequency oracles (FO17) and their helpers."""

from ._base import FrequencyOracle, PureFrequencyOracle
from .grr import GRR
from .hadamard import HRR, HadamardResponse, fwht
from .subset import SubsetSelection

__all__ = [
    "ORACLES",
    "FrequencyOracle",
    "PureFrequencyOracle",
    "GRR",
    "SubsetSelection",
    "HadamardResponse",
    "HRR",
    "fwht",
]

#: Every frequency oracle by name; the contract suite runs over this registry.
ORACLES: dict[str, type[FrequencyOracle]] = {
    "GRR": GRR,
    "SubsetSelection": SubsetSelection,
    "HadamardResponse": HadamardResponse,
    "HRR": HRR,
}
