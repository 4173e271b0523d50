"""Random number generation: one way to turn a user's ``rng`` argument into a Generator.

Every public function that draws takes ``rng`` and passes it through :func:`as_generator`
exactly once; nothing in ldpkit touches numpy's global random state.
"""

from __future__ import annotations

import secrets
from typing import TypeAlias

import numpy as np

RNGLike: TypeAlias = np.random.Generator | np.random.SeedSequence | int | None

__all__ = ["RNGLike", "as_generator", "spawn", "secure_generator", "derive_seeds"]


def as_generator(rng: RNGLike = None) -> np.random.Generator:
    """Return a :class:`numpy.random.Generator` for ``rng``.

    Parameters
    ----------
    rng : Generator, SeedSequence, int or None
        A Generator is returned unchanged (so the caller's stream advances); an int or a
        SeedSequence seeds a new PCG64 Generator; None draws a fresh seed from the OS.

    Raises
    ------
    TypeError
        If ``rng`` is of any other type (for instance the legacy ``RandomState``, which
        ldpkit does not accept because it encourages shared global state).
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, (bool, np.bool_)):
        if rng < 0:
            raise ValueError(f"rng must be a non-negative integer seed, got {int(rng)}")
        return np.random.default_rng(int(rng))
    raise TypeError(
        "rng must be a numpy.random.Generator, a SeedSequence, an int seed or None, "
        f"got {type(rng).__name__}"
    )


def spawn(rng: RNGLike, n: int) -> list[np.random.Generator]:
    """Return ``n`` statistically independent Generators derived from ``rng``.

    Uses :meth:`numpy.random.Generator.spawn` (SeedSequence spawning, SPEC 7), so the
    children do not overlap with each other or with the parent.
    """
    return list(as_generator(rng).spawn(int(n)))


def derive_seeds(rng: RNGLike, n: int) -> np.ndarray:
    """Draw ``n`` uniformly random 64-bit seeds (uint64) from ``rng``."""
    gen = as_generator(rng)
    return gen.integers(0, np.iinfo(np.uint64).max, size=n, dtype=np.uint64, endpoint=True)


def secure_generator() -> np.random.Generator:
    """A Generator seeded with 256 bits of operating-system entropy, for deployment.

    Notes
    -----
    PCG64 is a statistical generator, not a cryptographic one: an adversary who sees
    enough of its raw output could in principle predict later output. LDP reports reveal
    only randomized bits, far from raw generator output, and each device seeds its own
    generator from the OS, but clients with a stronger threat model should randomize with
    a generator built on a CSPRNG. This function at least guarantees an unpredictable
    seed, which ``default_rng()`` also does; use it to make that intent explicit.
    """
    return np.random.Generator(np.random.PCG64DXSM(secrets.randbits(256)))
