"""Several attributes per user: a tuple of categorical attributes under one budget.

Users hold one item of each of d categorical attributes (an ``(n, d)`` array of item
indices; the schema is the spec's ``domain_sizes``, declared once). Mechanisms:

* :class:`SPL` (budget splitting) and :class:`SMP` (attribute sampling), the single-spec
  forms of :class:`ldpkit.Survey`'s two splits for categorical attributes with GRR;
* :class:`RSFD` (random sampling plus fake data, Arcolezi et al. CIKM 2021) with GRR or
  OUE-z;
* :class:`CALM` (k-way marginals, Zhang et al. CCS 2018, with its consistency step) and the
  :class:`FullDomain` and :class:`Fourier` (Cormode et al. SIGMOD 2018) baselines, whose
  :class:`MarginalsEstimate` answers any marginal they
  contain (``result.marginal((i, j))``: a :class:`MarginalTable` with error bars per cell,
  ``to_frame()``, a heat-map ``plot()``).

SPL, SMP and RSFD return a :class:`MultiFrequencyEstimate` (one
:class:`ldpkit.FrequencyEstimate` per attribute, ``to_frame()`` in long format).
:class:`GroupMean` gives the mean of a value per group (with intervals). :class:`HDG`,
:class:`TDG` (Yang et al. VLDB 2020) and the :class:`UniformGrid` baseline answer range
queries over 1 to d numerical attributes (``result.range_query(((lo, hi), None, ...))``,
a :class:`RangeEstimate`). Numerical attributes: :class:`AttributeSampling` (k of d
attributes per user with PM/HM or GRR at ``epsilon / k``, Wang et al. ICDE 2019, numerical
and categorical columns in one tuple) and :class:`DuchiMean` (Duchi et al. JASA 2018's
hypercube-vertex mechanism) and the :class:`LaplaceMean` baseline (the budget split over
the attributes, discrete Laplace), all returning a :class:`TupleMeans` with intervals.
:func:`auto` picks the spec from the declared attributes and the query. A :class:`Schema`
declares the tuple once as :class:`ldpkit.Question` s (categorical with an encoder,
numerical with bounds) and builds any of these specs, with named results.

Each name loads its own module on first use (see :mod:`ldpkit._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

__all__ = [
    "AttributeSampling",
    "auto",
    "CALM",
    "DuchiMean",
    "Fourier",
    "FullDomain",
    "GroupMean",
    "GroupMeans",
    "HDG",
    "LaplaceMean",
    "MarginalTable",
    "MarginalsEstimate",
    "MultiAttributeMechanism",
    "MultiFrequencyEstimate",
    "NamedEstimate",
    "RSFD",
    "RangeEstimate",
    "Schema",
    "SchemaSpec",
    "SMP",
    "SPL",
    "TDG",
    "TupleMeans",
    "UniformGrid",
]

__getattr__, __dir__ = attach(__name__, __file__)

if TYPE_CHECKING:  # what type checkers and IDEs see; runtime imports are lazy
    from ._base import MultiAttributeMechanism, MultiFrequencyEstimate
    from ._tuples import TupleMeans
    from .auto import auto
    from .calm import CALM, FullDomain
    from .duchi import DuchiMean
    from .fourier import Fourier
    from .groupby import GroupMean, GroupMeans
    from .laplace import LaplaceMean
    from .marginals import MarginalsEstimate, MarginalTable
    from .ranges import HDG, TDG, RangeEstimate, UniformGrid
    from .rsfd import RSFD
    from .sampling import AttributeSampling
    from .schema import NamedEstimate, Schema, SchemaSpec
    from .split import SMP, SPL
