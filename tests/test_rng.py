import numpy as np
import pytest

from ldpkit import as_generator, secure_generator, spawn
from ldpkit._rng import derive_seeds


def test_as_generator_accepts_the_documented_types():
    g = np.random.default_rng(0)
    assert as_generator(g) is g
    assert as_generator(5).random() == np.random.default_rng(5).random()
    assert as_generator(np.random.SeedSequence(3)).random() == np.random.default_rng(3).random()
    assert isinstance(as_generator(None), np.random.Generator)


@pytest.mark.parametrize("bad", [1.5, "0", np.random.RandomState(0), True])
def test_as_generator_rejects_other_types(bad):
    with pytest.raises(TypeError, match="rng must be"):
        as_generator(bad)


def test_negative_seed_rejected():
    with pytest.raises(ValueError, match="rng must be a non-negative integer seed"):
        as_generator(-1)


def test_spawn_gives_independent_reproducible_streams():
    a = [g.random() for g in spawn(1, 3)]
    b = [g.random() for g in spawn(1, 3)]
    assert a == b and len(set(a)) == 3


def test_derive_seeds_and_secure_generator():
    s = derive_seeds(0, 1000)
    assert s.dtype == np.uint64 and np.unique(s).size == 1000
    assert secure_generator().random() != secure_generator().random()


def test_no_global_state_touched():
    np.random.seed(123)  # noqa: NPY002 - deliberately seeding the legacy global state
    before = np.random.get_state()[1].copy()  # noqa: NPY002
    from ldpkit import GRR

    GRR(epsilon=1.0, domain_size=5).randomize(np.arange(5), rng=None)
    assert np.array_equal(np.random.get_state()[1], before)  # noqa: NPY002


def test_default_is_the_secure_generator_and_seeds_stay_reproducible():
    from ldpkit._rng import independent_streams, is_secure

    # rng=None is AES-CTR keyed from OS entropy, a seed is a reproducible PCG64
    assert is_secure(as_generator(None)) and is_secure(secure_generator())
    assert not is_secure(as_generator(0))
    assert type(as_generator(0).bit_generator).__name__ == "PCG64"
    # a secure generator's children are secure; a seeded one's are reproducible
    assert all(is_secure(g) for g in independent_streams(secure_generator(), 2))
    a = [g.random() for g in independent_streams(np.random.default_rng(5), 2)]
    b = [g.random() for g in independent_streams(np.random.default_rng(5), 2)]
    assert a == b and a[0] != a[1]


def test_olh_seeds_are_not_the_coin_generators_raw_output():
    """OLH's seeds used to be default_rng(0).bit_generator.random_raw(n), the very
    stream that then drew the coins. Now seeds and coins come from independent children."""
    from ldpkit import OLH

    n = 2000
    raw = np.random.default_rng(0).bit_generator.random_raw(2 * n)
    olh = OLH(epsilon=1.0, domain_size=16)
    reports = olh.randomize(np.zeros(n, dtype=np.int64), rng=0)
    assert not np.isin(reports.seeds, raw).any()
    again = olh.randomize(np.zeros(n, dtype=np.int64), rng=0)
    assert np.array_equal(reports.seeds, again.seeds)  # still reproducible from a seed
    assert np.array_equal(reports.values, again.values)
