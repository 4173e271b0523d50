"""Random number generation: one way to turn a user's ``rng`` argument into a Generator.

Every public function that draws takes ``rng`` and passes it through :func:`as_generator`
exactly once; nothing in ldpkit touches numpy's global random state.

Two kinds of randomness (docs/design/THREAT_MODEL.md):

* ``rng=None`` (the default, what a device should use): :func:`secure_generator`, AES-128 in
  counter mode keyed from 256 bits of operating-system entropy (``randomgen.AESCounter``,
  AES-NI where the CPU has it). Its outputs are a pseudorandom function of a secret key,
  so no amount of them predicts any other.
* ``rng=<int seed>``, a ``SeedSequence`` or a ``Generator``: numpy's PCG64 (or the given
  generator), for reproducible simulations. PCG64 is a statistical generator; its state
  can be recovered from its raw output, so seeded generators are not for deployment.

Random choices whose results leave the device in different roles (an OLH report's hash
seed, sent in the clear, and its randomized-response coin, which must stay secret) come
from separate streams (:func:`independent_streams`), never from one stream in sequence.
"""

from __future__ import annotations

import secrets
from typing import TypeAlias

import numpy as np

RNGLike: TypeAlias = np.random.Generator | np.random.SeedSequence | int | None

__all__ = [
    "RNGLike",
    "as_generator",
    "spawn",
    "secure_generator",
    "is_secure",
    "derive_seeds",
    "independent_streams",
]


def secure_generator() -> np.random.Generator:
    """Return a cryptographically secure Generator, for deployment (the ``rng=None`` default).

    AES-128 in counter mode (``randomgen.AESCounter``) keyed through a SeedSequence from
    256 bits of operating-system entropy (:mod:`secrets`). Every numpy distribution method
    works on it. Its outputs are AES encryptions of a counter under a secret key: seeing
    any number of them (e.g. hash seeds sent in the clear) tells nothing about the others
    unless AES itself is broken. Throughput is close to PCG64's with AES-NI
    (studies/randomness.py).

    Examples
    --------
    >>> gen = secure_generator()
    >>> type(gen.bit_generator).__name__, 0.0 <= gen.random() < 1.0
    ('AESCounter', True)
    """
    # Imported here: randomgen costs ~0.15 s to import and only clients drawing with
    # rng=None need it.
    from randomgen.aes import AESCounter

    return np.random.Generator(AESCounter(np.random.SeedSequence(secrets.randbits(256))))


def is_secure(gen: np.random.Generator) -> bool:
    """Return True when ``gen`` draws from a cryptographically secure bit generator (ours)."""
    bit_gen = gen.bit_generator
    return type(bit_gen).__name__ == "AESCounter" and type(bit_gen).__module__.startswith(
        "randomgen"
    )


def as_generator(rng: RNGLike = None) -> np.random.Generator:
    """Return a :class:`numpy.random.Generator` for ``rng``.

    Parameters
    ----------
    rng : Generator, SeedSequence, int or None
        A Generator is returned unchanged (so the caller's stream advances); an int or a
        SeedSequence seeds a new PCG64 Generator (reproducible simulations); None returns
        a fresh :func:`secure_generator` (deployment).

    Raises
    ------
    TypeError
        If ``rng`` is of any other type (for instance the legacy ``RandomState``, which
        ldpkit does not accept because it encourages shared global state).
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return secure_generator()
    if isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, (bool, np.bool_)):
        if rng < 0:
            raise ValueError(f"rng must be a non-negative integer seed, got {int(rng)}")
        return np.random.default_rng(int(rng))
    raise TypeError(
        "rng must be a numpy.random.Generator, a SeedSequence, an int seed or None, "
        f"got {type(rng).__name__}"
    )


def independent_streams(gen: np.random.Generator, n: int) -> list[np.random.Generator]:
    """``n`` Generators whose outputs are independent of each other and of ``gen``'s.

    Children of the generator's SeedSequence (SPEC 7 spawning) when it has one, which
    advances the parent's spawn counter so that repeated calls give new streams; else
    PCG64 generators seeded with 256 bits drawn from ``gen``. A secure generator's
    children are secure generators keyed from its secret entropy.
    """
    try:
        return list(gen.spawn(int(n)))
    except (TypeError, AttributeError, NotImplementedError):  # no spawnable SeedSequence
        keys = gen.integers(0, 1 << 63, size=(int(n), 4), dtype=np.int64)
        return [np.random.default_rng(np.random.SeedSequence(k.tolist())) for k in keys]


def spawn(rng: RNGLike, n: int) -> list[np.random.Generator]:
    """Return ``n`` statistically independent Generators derived from ``rng``.

    Uses :meth:`numpy.random.Generator.spawn` (SeedSequence spawning, SPEC 7), so the
    children do not overlap with each other or with the parent. At most 2^16 of them: each
    costs ~20 us, and 2^20 took over 20 s; split a large job into batches.
    """
    from ._validation import check_integer

    return independent_streams(as_generator(rng), check_integer(n, "n", low=0, high=2**16))


def derive_seeds(rng: RNGLike, n: int) -> np.ndarray:
    """Draw ``n`` uniformly random 64-bit seeds (uint64) from ``rng``."""
    gen = as_generator(rng)
    return gen.integers(0, np.iinfo(np.uint64).max, size=n, dtype=np.uint64, endpoint=True)
