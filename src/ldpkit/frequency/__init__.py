"""Categorical frequency oracles (FO17) and their helpers."""

from ._base import FrequencyOracle, PureFrequencyOracle
from .grr import GRR
from .histogram import SHE, THE
from .unary import OUE, SUE, UnaryEncoding

__all__ = [
    "ORACLES",
    "FrequencyOracle",
    "PureFrequencyOracle",
    "GRR",
    "UnaryEncoding",
    "SUE",
    "OUE",
    "SHE",
    "THE",
]

#: Every frequency oracle by name; the contract suite runs over this registry.
ORACLES: dict[str, type[FrequencyOracle]] = {
    "GRR": GRR,
    "SUE": SUE,
    "OUE": OUE,
    "SHE": SHE,
    "THE": THE,
}
