"""Open-vocabulary discovery: the frequent strings nobody listed in advance.

Devices answer one question about their own string (one round); every round of candidate
extension runs on the server, over mergeable Stats of ``max_length x H x g`` integers:

* :class:`PEM` - prefix extension, the ``keep`` largest prefixes per level (Wang, Li, Jha,
  IEEE TDSC 2021);
* :class:`TreeHist` - prefix tree pruned by a noise threshold (Bassily, Nissim, Stemmer,
  Thakurta, NeurIPS 2017);
* :class:`SFP` - Apple's sequence fragment puzzle: fragments tied by a hash of the whole
  string, assembled and scored with a second sketch (Apple 2017, section 4);
* :class:`InteractivePEM` - PEM over rounds of users: the server publishes the next
  round's candidates (:class:`PEMRound`, one round's spec; :class:`DiscoveryRounds`, the
  server's state; :class:`RoundEstimate`, a round's estimates);
* :class:`HeavyHitters` - their result: items, frequencies, intervals (with optional
  family-wise or false-discovery control over every tested candidate).
"""

from __future__ import annotations

from .fragments import SFP
from .interactive import DiscoveryRounds, InteractivePEM, PEMRound, RoundEstimate
from .prefix import PEM, TreeHist
from .result import HeavyHitters

__all__ = ["PEM", "TreeHist", "HeavyHitters", "SFP"]
__all__ += ["InteractivePEM", "PEMRound", "DiscoveryRounds", "RoundEstimate"]
