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
