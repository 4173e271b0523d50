"""Users who hold sets of items or key-value pairs.

Padding-and-sampling frequencies (:class:`PaddingSampling`, Wang, Li, Jha, IEEE S&P 2018),
PrivSet's k-subset mechanism (:class:`PrivSet`, Wang et al., INFOCOM 2018)
and key-value collection (:class:`PCKV`, Gu et al., USENIX Security 2020). Users are given
as lists (one list of item ids, or of ``(key, value)`` pairs, per user) or in CSR layout
(:class:`UserSets`, :class:`UserPairs`: flat arrays + offsets, the fast path).

Each name loads its own module on first use (see :mod:`ldpkit._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

__all__ = [
    "UserSets",
    "UserPairs",
    "PaddingSampling",
    "SetFrequencyEstimate",
    "PrivSet",
    "PCKV",
    "PrivKV",
    "privkvm",
    "KeyValueEstimate",
    "svim",
    "sample_one_item",
    "restrict_sets",
    "TopItems",
    "svsm",
    "TopItemsets",
]

__getattr__, __dir__ = attach(__name__, __file__)

if TYPE_CHECKING:  # what type checkers and IDEs see; runtime imports are lazy
    from ._input import UserPairs, UserSets
    from .keyvalue import PCKV, KeyValueEstimate, PrivKV, privkvm
    from .padding import PaddingSampling, SetFrequencyEstimate
    from .privset import PrivSet
    from .svim import TopItems, TopItemsets, restrict_sets, sample_one_item, svim, svsm
