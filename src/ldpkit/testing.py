"""Checks for mechanisms, usable by ldpkit's tests and by auditors of a new mechanism.

:func:`check_mechanism` checks the whole (deterministic) contract of a mechanism spec:
validation messages, seeding, round trips, merge laws, vectorized == loop, estimate shapes,
privacy loss and transition matrix. The statistical helpers return a p-value or a z-score
that callers compare against a stated alpha; they are exact where the sampling law is exact
(binomial marginals, multinomial histograms).

Neither pytest nor scipy is needed to import this module (scipy loads on first use of a
statistical helper).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "CONTRACT_CHECKS",
    "binomial_z",
    "bonferroni_z",
    "check_mechanism",
    "chisquare_gof",
    "small_spec",
    "variance_ratio_bounds",
]


def chisquare_gof(
    observed: np.ndarray, probabilities: np.ndarray, *, min_expected: float = 5.0
) -> float:
    """Pearson chi-square goodness-of-fit p-value of a histogram against probabilities.

    Bins with expected count below ``min_expected`` are pooled (smallest first) so the
    chi-square approximation holds. Bins with probability 0 must be empty, else p = 0.
    """
    from ._validation import check_array, check_real

    obs = check_array(
        observed, "observed", ndim=(1, 2), low=0.0, nonempty=True, bounded=True
    ).ravel()
    prob = check_array(probabilities, "probabilities", ndim=(1, 2), low=0.0, high=1.0).ravel()
    min_expected = check_real(min_expected, "min_expected", low=0.0, low_inclusive=False)
    if prob.sum() <= 0.0 or obs.sum() <= 0.0:
        raise ValueError("observed and probabilities must each have a positive total, got 0")
    if obs.shape != prob.shape:
        raise ValueError(
            f"observed and probabilities must have one shape, got {obs.shape}, {prob.shape}"
        )
    n = obs.sum()
    zero = prob <= 0
    if np.any(obs[zero] > 0):
        return 0.0
    obs, prob = obs[~zero], prob[~zero] / prob[~zero].sum()
    expected = n * prob
    order = np.argsort(expected)
    obs, expected = obs[order], expected[order]
    # Pool the small-expectation bins (sorted ascending) into one bin until it reaches
    # min_expected; the remaining bins already do.
    cum = np.cumsum(expected)
    k = int(np.searchsorted(cum, min_expected)) + 1 if expected[0] < min_expected else 0
    k = min(k, expected.size)
    if k > 0:
        obs = np.concatenate([[obs[:k].sum()], obs[k:]])
        expected = np.concatenate([[expected[:k].sum()], expected[k:]])
    if expected.size < 2:
        return 1.0
    stat = float(np.sum((obs - expected) ** 2 / expected))
    from scipy import stats as sps

    return float(sps.chi2.sf(stat, expected.size - 1))


def binomial_z(count: np.ndarray, n: int, prob: np.ndarray) -> np.ndarray:
    """z-scores of binomial counts against their success probabilities."""
    from ._validation import check_array, check_integer

    n = check_integer(n, "n", low=1)
    # (the message names n: counts above it are impossible for n trials)
    count = check_array(count, "count (at most n trials)", ndim=(0, 1, 2), low=0, high=n)
    prob = check_array(prob, "prob", ndim=(0, 1, 2), low=0.0, high=1.0)
    if np.any((prob <= 0.0) | (prob >= 1.0)):
        raise ValueError("prob must be probabilities strictly between 0 and 1, got 0 or 1")
    try:
        np.broadcast_shapes(count.shape, prob.shape)
    except ValueError:
        raise ValueError(
            f"count and prob must have broadcastable shapes, got {count.shape} and {prob.shape}"
        ) from None
    return (np.asarray(count, dtype=np.float64) - n * prob) / np.sqrt(n * prob * (1.0 - prob))


def bonferroni_z(alpha: float, m: int) -> float:
    """Two-sided |z| threshold for m simultaneous tests at family-wise level alpha."""
    from scipy import stats as sps

    from ._validation import check_integer, check_probability

    alpha = check_probability(alpha, "alpha")
    m = check_integer(m, "m", low=1)
    return float(sps.norm.isf(alpha / (2.0 * m)))


def variance_ratio_bounds(dof: int, alpha: float) -> tuple[float, float]:
    """Bounds for sample variance / true variance with ``dof`` degrees of freedom (normal data)."""
    from scipy import stats as sps

    from ._validation import check_integer, check_probability

    dof = check_integer(dof, "dof", low=1)
    alpha = check_probability(alpha, "alpha")
    return (
        float(sps.chi2.ppf(alpha / 2.0, dof) / dof),
        float(sps.chi2.isf(alpha / 2.0, dof) / dof),
    )


# --- the mechanism contract ------------------------------------------------------------------
#
# check_mechanism() runs deterministic checks only (fixed seeds, exact equalities), so it
# can run on every mechanism in every test session; the statistical laws of the samplers
# (chi-square against the transition matrix, unbiasedness, variance) are tested in
# tests/contract with the helpers above.

#: The checks :func:`check_mechanism` runs, in order (pass a subset as ``checks=``).
CONTRACT_CHECKS: tuple[str, ...] = (
    "validation",
    "seeding",
    "round_trips",
    "merge",
    "loop",
    "estimate",
    "privacy",
    "transition_matrix",
)

# Integer fields that set a mechanism's resolution or domain: each must refuse bad values
# with a message naming it.
_SIZE_FIELDS = ("domain_size", "buckets", "bins", "max_level", "subset_size", "hash_range")


# Small valid sizes for every size-like field, so that checks stay fast on any mechanism.
_SMALL = {
    "domain_size": 6,
    "buckets": 16,
    "bins": 8,
    "max_level": 3,
    "num_bits": 16,
    "num_cohorts": 2,
    "padding": 2,  # ldpkit.sets: the padding length of padding-and-sampling
    "max_length": 3,  # discovery specs: a 3-level prefix tree
    "domain_sizes": (3, 4),  # ldpkit.multidim: two attributes
}


def small_spec(mechanism: Any, *, epsilon: float = 1.0, **params: Any) -> Any:
    """Return a valid spec of ``mechanism`` (a registered name or class) with small sizes.

    Every size field the mechanism has (``domain_size`` 6, ``buckets`` 16, ``bins`` 8,
    ``max_level`` 3, RAPPOR's ``num_bits`` 16 and ``num_cohorts`` 2) is set small;
    ``params`` override them or set other fields.

    Examples
    --------
    >>> small_spec("GRR", epsilon=2.0)
    GRR(epsilon=2.0, domain_size=6)
    """
    import dataclasses

    from .spec import mechanism_registry

    if isinstance(mechanism, str):
        registry = mechanism_registry()
        if mechanism not in registry:
            raise ValueError(f"mechanism must be one of {sorted(registry)}, got {mechanism!r}")
        mechanism = registry[mechanism]
    from .spec import Mechanism

    if not (isinstance(mechanism, type) and issubclass(mechanism, Mechanism)):
        raise TypeError(
            f"mechanism must be a registered name or a Mechanism class, got {mechanism!r:.60}"
        )
    names = {f.name for f in dataclasses.fields(mechanism)}
    kwargs = {k: v for k, v in _SMALL.items() if k in names}
    kwargs.update(params)
    return mechanism(epsilon=epsilon, **kwargs)


def check_mechanism(
    spec: Any,
    *,
    rng: Any = 0,
    values: Any = None,
    n: int = 48,
    checks: Sequence[str] | None = None,
) -> None:
    """Check that a mechanism spec honours the ldpkit contract; raise AssertionError if not.

    The checks (``CONTRACT_CHECKS``), each deterministic given ``rng``:

    - ``validation``: a bad epsilon (0, -1, NaN, +-inf; a string, None, a bool) and a bad
      resolution field (``domain_size``, ``buckets``, ... : -1, 2.5, ``"8"``) raise
      ValueError / TypeError naming the parameter; out-of-range, NaN and 2-D values raise
      ValueError / TypeError naming ``values``; foreign Reports and Stats are refused;
      ``stats_schema()`` exists and Stats refuse arrays of the wrong shape, dtype, a value
      n reports cannot produce, NaN, a bad ``n`` and an unknown ``to_dict`` format.
    - ``seeding``: one int seed gives equal reports, another seed different ones (so use a
      moderate epsilon: at epsilon ~ 15 GRR hardly ever randomizes, whatever the seed); a
      ``Generator`` is accepted (and consumed like the int seed's); the global numpy random
      state is left untouched; report arrays are read-only with one row per user.
    - ``round_trips``: pickle and JSON (``to_dict``) of the spec, pickle of Reports and
      Stats, ``Stats.to_dict`` through ``json``, and :mod:`ldpkit.io` (npz bytes, the JSON
      dict, Parquet when pyarrow is installed) all give back equal objects, and the
      estimate of the round-tripped Stats equals the original's.
    - ``merge``: merge is associative and commutative, the empty Stats is neutral on both
      sides, and aggregating concatenated reports equals merging the batches' aggregates.
    - ``loop``: aggregating a batch equals aggregating the concatenation of its
      single-user slices and merging the single-user aggregates (vectorized == loop).
    - ``estimate``: the estimate has the expected shape and dtype (frequencies and
      variances of length ``domain_size``; a Distribution summing to 1; a finite mean),
      carries ``n`` and the spec where it has those attributes, and empty Stats are refused.
    - ``privacy``: ``privacy_loss()`` exists, is > 0 and <= epsilon, and equals epsilon
      (up to the 2^-64 quantization of integer-threshold samplers) where the mechanism
      declares ``exact_epsilon = True``.
    - ``transition_matrix``: where the mechanism defines one, it is inputs x outputs with
      rows summing to 1, and :func:`ldpkit.privacy.privacy_loss` of it equals
      ``spec.privacy_loss()``; ``output_index`` of real reports falls inside its columns.
      A ``bucket_matrix()`` (the bucketized channel of a continuous mechanism) has rows
      summing to 1 and a privacy loss <= epsilon.

    Mechanisms whose users hold something other than one item index or one real (strings,
    sets, key-value pairs, tuples of attributes) declare three optional hooks, read here:

    - ``spec._contract_values(n, gen) -> ndarray``: ``n`` valid inputs drawn with the
      Generator ``gen`` (an object array of length ``n`` where the inputs are ragged);
    - ``spec._contract_bad_values() -> (outside, wrong_type)``: lists of inputs that
      ``randomize`` must refuse with ValueError (``outside``, including the wrong shapes) and
      TypeError (``wrong_type``), each message naming ``values``;
    - ``spec._contract_check_estimate(estimate, stats)``: asserts the shape and validity of
      the mechanism's own result type (raising AssertionError), in place of the generic
      frequency / distribution / mean checks.

    Parameters
    ----------
    spec : ldpkit.Mechanism
        A valid mechanism spec. Keep its sizes small (e.g. ``domain_size=6``,
        ``buckets=16``): the checks aggregate one report at a time.
    rng : int
        Seed of the simulated users and of the randomizers (an int, so that runs repeat).
    values : array_like, optional
        ``n`` valid inputs; by default drawn uniformly: integers in ``[0, domain_size)``
        for categorical mechanisms, reals in ``[low, high]`` for numerical ones.
    n : int
        Number of simulated users (>= 6).
    checks : sequence of str, optional
        A subset of ``CONTRACT_CHECKS`` to run (default: all).

    Raises
    ------
    AssertionError
        Naming the mechanism, the check and what failed.

    Examples
    --------
    >>> from ldpkit import GRR
    >>> check_mechanism(GRR(epsilon=1.0, domain_size=5))
    """
    from .spec import Mechanism

    if not isinstance(spec, Mechanism):
        raise TypeError(f"spec must be an ldpkit mechanism spec, got {type(spec).__name__}")
    if isinstance(rng, bool) or not isinstance(rng, (int, np.integer)):
        raise TypeError(f"rng must be an int seed, got {rng!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 6:
        raise ValueError(f"n must be an integer >= 6, got {n!r}")
    selected = CONTRACT_CHECKS if checks is None else tuple(checks)
    unknown = sorted(set(selected) - set(CONTRACT_CHECKS))
    if unknown:
        raise ValueError(f"checks must be among {list(CONTRACT_CHECKS)}, got {unknown}")
    seed = int(rng)
    vals = _sample_values(spec, int(n), seed) if values is None else np.asarray(values)
    for name in selected:
        try:
            _CHECKS[name](spec, vals, seed)
        except AssertionError as exc:
            raise AssertionError(f"{spec!r} fails the {name!r} check: {exc}") from None


def _is_categorical(spec: Any) -> bool:
    """Categorical specs take item indices; numerical ones reals in [low, high]."""
    if not hasattr(spec, "low") or not hasattr(spec, "high"):
        return True
    try:  # a discrete mechanism over buckets of [low, high] still refuses reals
        spec.randomize(np.array([(spec.low + spec.high) / 2.0]), rng=0)
    except TypeError:
        return True
    return False


def _domain_size(spec: Any) -> int:
    """Return the length of a categorical estimate.

    ``domain_size`` (or ``buckets`` of a discrete numerical mechanism).
    """
    d = getattr(spec, "domain_size", None)
    return int(d if d is not None else spec.buckets)


def _input_size(spec: Any) -> int:
    """Return the number of valid inputs of a categorical mechanism."""
    if type(spec).__name__ == "SignedSubsetSelection":
        return 2 * int(spec.domain_size)  # signed one-hot codes: +e_k as k, -e_k as d + k
    return _domain_size(spec)


def _sample_values(spec: Any, n: int, seed: int) -> np.ndarray:
    gen = np.random.default_rng([seed, 0xC0FFEE])
    hook = getattr(spec, "_contract_values", None)
    if hook is not None:  # inputs that are not one item or one real per user (see CONTRACT_HOOKS)
        return np.asarray(hook(n, gen))
    if _is_categorical(spec):
        d = _input_size(spec)
        items = gen.integers(0, d, n)
        items[:2] = [0, d - 1]  # both ends of the domain
        return items
    reals = gen.uniform(spec.low, spec.high, n)
    reals[:2] = [spec.low, spec.high]
    return reals


def _raises(
    exc: type[Exception] | tuple[type[Exception], ...], words: str, what: str, fn: Any
) -> None:
    """Assert ``fn()`` raises ``exc`` with a message containing ``words``."""
    try:
        fn()
    except exc as err:
        if words not in str(err):
            raise AssertionError(f"{what}: message {str(err)!r} does not name {words!r}") from None
        return
    except Exception as err:
        raise AssertionError(f"{what}: raised {type(err).__name__}: {err}") from None
    raise AssertionError(f"{what}: no error raised")


def _check_validation(spec: Any, values: np.ndarray, seed: int) -> None:
    import dataclasses

    bad: Any
    for bad in (0, -1.0, math.nan, math.inf, -math.inf):
        _raises(
            ValueError, "epsilon must be", f"epsilon={bad!r}", lambda b=bad: spec.replace(epsilon=b)
        )
    for bad in ("1", None, True, [1.0]):
        _raises(
            TypeError, "epsilon must be", f"epsilon={bad!r}", lambda b=bad: spec.replace(epsilon=b)
        )
    fields = {f.name for f in dataclasses.fields(spec)}
    for field in _SIZE_FIELDS:
        if field not in fields or getattr(spec, field) is None:
            continue
        _raises(
            ValueError, f"{field} must be", f"{field}=-1", lambda f=field: spec.replace(**{f: -1})
        )
        for bad in (2.5, "8"):
            _raises(
                (TypeError, ValueError),
                f"{field} must be",
                f"{field}={bad!r}",
                lambda f=field, b=bad: spec.replace(**{f: b}),
            )
    outside: list[Any]
    wrong_type: list[Any]
    bad_hook = getattr(spec, "_contract_bad_values", None)
    if bad_hook is not None:
        outside, wrong_type = bad_hook()
    elif _is_categorical(spec):
        d = _input_size(spec)
        outside = [[0, d], [-1, 0]]
        wrong_type = [[0.0, math.nan], ["a", "b"]]
    else:
        span = spec.high - spec.low
        outside = [[spec.low, spec.high + span], [spec.low - span, spec.high]]
        wrong_type = [["a", "b"]]
        outside.append([spec.low, math.nan])
    for bad in outside:
        _raises(
            ValueError, "values must be", f"values={bad!r}", lambda b=bad: spec.randomize(b, rng=0)
        )
    for bad in wrong_type:
        _raises(
            TypeError, "values must be", f"values={bad!r}", lambda b=bad: spec.randomize(b, rng=0)
        )
    if bad_hook is None:  # the hook lists its own shape errors among ``outside``
        two_d = np.stack([values[:2], values[:2]])
        _raises(ValueError, "values must be", "2-D values", lambda: spec.randomize(two_d, rng=0))
    # Reports and Stats of another configuration are refused, not silently mixed.
    other = spec.replace(epsilon=spec.epsilon * 1.5)
    mine, theirs = spec.randomize(values, rng=seed), other.randomize(values, rng=seed)
    _raises(
        ValueError, "must come from", "aggregate(foreign reports)", lambda: spec.aggregate(theirs)
    )
    _raises(
        ValueError,
        "must come from",
        "estimate(foreign stats)",
        lambda: spec.estimate(other.aggregate(theirs)),
    )
    _raises(
        ValueError,
        "must come from",
        "merge(foreign stats)",
        lambda: spec.aggregate(mine).merge(other.aggregate(theirs)),
    )
    _raises(ValueError, "must come from", "concat(foreign reports)", lambda: mine.concat(theirs))
    _raises(TypeError, "reports must be", "aggregate(ndarray)", lambda: spec.aggregate(np.zeros(3)))
    _check_stats_schema(spec, spec.aggregate(mine))


def _check_stats_schema(spec: Any, stats: Any) -> None:
    """Check that Stats check their arrays against ``spec.stats_schema()``."""
    from .spec import Stats

    schema = spec.stats_schema()
    if schema is None:
        raise AssertionError("stats_schema() is None: Stats contents would go unchecked")
    if set(schema) != set(stats.fields):
        raise AssertionError(f"stats_schema() names {sorted(schema)}, Stats has {stats.fields}")
    n, arrays = stats.n, dict(stats.arrays)
    for name, field in schema.items():

        def build(value: Any, name: str = name) -> Any:
            return Stats(spec, n, **{**arrays, name: value})

        arr = arrays[name]
        _raises(
            ValueError,
            f"stats.{name}",
            f"stats.{name} reshaped",
            lambda a=arr: build(np.append(a.ravel(), a.ravel()[:1])),
        )
        big = np.array(arr)
        big.flat[0] = field.high * n + 1 if not field.integer else int(field.high * n) + 1
        _raises(
            ValueError, f"stats.{name}", f"stats.{name} above n reports", lambda b=big: build(b)
        )
        if field.integer:
            _raises(
                TypeError,
                f"stats.{name}",
                f"float stats.{name}",
                lambda a=arr: build(a.astype(np.float64)),
            )
        else:
            nan = np.array(arr)
            nan.flat[0] = math.nan
            _raises(ValueError, f"stats.{name}", f"NaN in stats.{name}", lambda b=nan: build(b))
    missing = dict(arrays)
    missing.pop(next(iter(missing)))
    _raises(ValueError, "stats fields", "a missing field", lambda: Stats(spec, n, **missing))
    for bad, exc in ((True, TypeError), (1.5, TypeError), (-1, ValueError), (2**60, ValueError)):
        _raises(exc, "n must be", f"n={bad!r}", lambda b=bad: Stats(spec, b, **arrays))
    data = stats.to_dict()
    _raises(
        ValueError,
        "stats format",
        "an unknown format version",
        lambda: Stats.from_dict({**data, "format": "ldpkit.stats/999"}),
    )


def _check_seeding(spec: Any, values: np.ndarray, seed: int) -> None:
    from .spec import Reports

    state: Any = np.random.get_state()  # noqa: NPY002 - checking the legacy global state is the point
    a = spec.randomize(values, rng=seed)
    b = spec.randomize(values, rng=seed)
    c = spec.randomize(values, rng=seed + 1)
    g1 = spec.randomize(values, rng=np.random.default_rng(seed))
    g2 = spec.randomize(values, rng=np.random.default_rng(seed))
    spec.estimate(spec.aggregate(spec.randomize(values, rng=None)))
    after: Any = np.random.get_state()  # noqa: NPY002
    assert isinstance(a, Reports), f"randomize returned {type(a).__name__}, not Reports"
    assert len(a) == len(values), f"{len(a)} reports for {len(values)} users"
    assert a.equals(b), "the same int seed gave different reports"
    if a.equals(c):  # at a large epsilon a few reports may coincide by chance: look wider
        many = np.tile(values, 20)
        base = spec.randomize(many, rng=seed)
        assert any(not base.equals(spec.randomize(many, rng=seed + k)) for k in range(1, 6)), (
            "different seeds gave identical reports"
        )
    assert g1.equals(g2), "equal Generators gave different reports"
    assert after[0] == state[0] and np.array_equal(after[1], state[1]) and after[2:] == state[2:], (
        "the global numpy random state changed"
    )
    for field, arr in a.arrays.items():
        assert arr.shape[:1] == (len(values),), f"reports.{field} has shape {arr.shape}"
        assert not arr.flags.writeable, f"reports.{field} is writeable"
    empty = spec.randomize(values[:0], rng=seed)
    assert len(empty) == 0 and spec.aggregate(empty).n == 0, "no users must give n = 0"


def _same_stats(x: Any, y: Any, exact: bool = True) -> bool:
    """Equal Stats; float sums may differ by rounding when added in another order."""
    if exact:
        return bool(x == y)
    if x.spec != y.spec or x.n != y.n or x.fields != y.fields:
        return False
    for k, v in x.arrays.items():
        w = y.arrays[k]
        if v.dtype != w.dtype or v.shape != w.shape:
            return False
        if v.dtype.kind == "f":
            if not np.allclose(v, w, rtol=1e-12, atol=1e-12 * max(1.0, float(np.abs(v).max()))):
                return False
        elif not np.array_equal(v, w):
            return False
    return True


def _same_estimate(x: Any, y: Any) -> bool:
    for attr in ("frequencies", "variance", "probabilities", "mean", "means"):
        if hasattr(x, attr):
            u, v = getattr(x, attr), getattr(y, attr)
            if callable(u):  # Distribution.mean() is a method
                u, v = u(), v()
            u, v = np.asarray(u), np.asarray(v)
            if not np.array_equal(u, v, equal_nan=True):
                return False
    return True


def _check_round_trips(spec: Any, values: np.ndarray, seed: int) -> None:
    import importlib.util
    import json
    import pickle

    from . import io as ldpio
    from .spec import Stats, spec_from_dict

    reports = spec.randomize(values, rng=seed)
    stats = spec.aggregate(reports)
    back = pickle.loads(pickle.dumps(spec))
    assert back == spec and hash(back) == hash(spec), "pickled spec differs"
    assert spec_from_dict(json.loads(json.dumps(spec.to_dict()))) == spec, "JSON spec differs"
    assert back.fingerprint == spec.fingerprint, "pickled spec has another fingerprint"
    assert pickle.loads(pickle.dumps(reports)).equals(reports), "pickled Reports differ"
    assert pickle.loads(pickle.dumps(stats)) == stats, "pickled Stats differ"
    from_json = Stats.from_dict(json.loads(json.dumps(stats.to_dict())))
    assert from_json == stats, "Stats through JSON differ"
    assert _same_estimate(spec.estimate(from_json), spec.estimate(stats)), (
        "the estimate of Stats through JSON differs"
    )
    assert ldpio.reports_from_bytes(ldpio.reports_to_bytes(reports)).equals(reports), (
        "Reports through npz bytes differ"
    )
    as_dict = json.loads(json.dumps(ldpio.reports_to_dict(reports)))
    assert ldpio.reports_from_dict(as_dict).equals(reports), "Reports through JSON differ"
    if importlib.util.find_spec("pyarrow") is not None:
        data = ldpio.reports_to_bytes(reports, format="parquet")
        assert ldpio.reports_from_bytes(data).equals(reports), "Reports through Parquet differ"


def _check_merge(spec: Any, values: np.ndarray, seed: int) -> None:
    from .spec import Stats

    r = spec.randomize(values, rng=seed)
    k1, k2 = len(r) // 4, (2 * len(r)) // 3
    a, b, c = (spec.aggregate(x) for x in (r[:k1], r[k1:k2], r[k2:]))
    whole = spec.aggregate(r)
    exact = all(v.dtype.kind != "f" for v in whole.arrays.values())
    empty = Stats.empty(spec)
    assert empty.n == 0, f"empty stats have n = {empty.n}"
    assert _same_stats(empty.merge(whole), whole) and _same_stats(whole.merge(empty), whole), (
        "the empty Stats is not neutral"
    )
    assert _same_stats(a.merge(b).merge(c), a.merge(b.merge(c)), exact), "merge is not associative"
    assert _same_stats(a.merge(b), b.merge(a), exact), "merge is not commutative"
    assert _same_stats(spec.aggregate(r[:k1].concat(r[k1:k2], r[k2:])), whole), (
        "aggregate of concatenated reports differs from aggregate of the batch"
    )
    assert _same_stats(a.merge(b, c), whole, exact), "merged aggregates differ from the whole"
    assert _same_stats(a + b + c, whole, exact), "a + b + c differs from the whole"


def _check_loop(spec: Any, values: np.ndarray, seed: int) -> None:
    from .spec import Stats

    reports = spec.randomize(values, rng=seed)
    whole = spec.aggregate(reports)
    exact = all(v.dtype.kind != "f" for v in whole.arrays.values())
    singles = [reports[i : i + 1] for i in range(len(reports))]
    assert _same_stats(spec.aggregate(singles[0].concat(*singles[1:])), whole), (
        "aggregate of the concatenated single-user reports differs from the batch's"
    )
    looped = Stats.empty(spec).merge(*(spec.aggregate(s) for s in singles))
    assert _same_stats(looped, whole, exact), (
        "merging single-user aggregates differs from aggregating the batch"
    )


def _check_estimate(spec: Any, values: np.ndarray, seed: int) -> None:
    from .spec import Stats

    stats = spec.aggregate(spec.randomize(values, rng=seed))
    est = spec.estimate(stats)
    if hasattr(est, "n"):
        assert est.n == stats.n, f"estimate.n = {est.n}, stats.n = {stats.n}"
    if hasattr(est, "spec"):
        assert est.spec == spec, f"estimate.spec is {est.spec!r}"
    est_hook = getattr(spec, "_contract_check_estimate", None)
    if est_hook is not None:  # a result type of its own (see CONTRACT_HOOKS)
        est_hook(est, stats)
    elif hasattr(est, "frequencies"):
        d = _domain_size(spec)
        for attr in ("frequencies", "variance"):
            arr = np.asarray(getattr(est, attr))
            assert arr.shape == (d,) and arr.dtype == np.float64, (
                f"estimate.{attr} has shape {arr.shape} and dtype {arr.dtype}, not ({d},) float64"
            )
            assert np.all(np.isfinite(arr)), f"estimate.{attr} is not finite"
        assert np.all(np.asarray(est.variance) >= 0), "negative variance"
    elif hasattr(est, "probabilities"):
        p = np.asarray(est.probabilities)
        assert p.ndim == 1 and p.dtype == np.float64, f"probabilities {p.shape} {p.dtype}"
        assert np.all(np.isfinite(p)), "probabilities are not finite"
        # A plain linear estimate may be a signed Distribution (negative masses, sum 1).
        assert getattr(est, "signed", False) or np.all(p >= 0), "negative masses, not signed"
        assert abs(float(p.sum()) - 1.0) < 1e-9, "not a distribution"
        assert (est.low, est.high) == (spec.low, spec.high), (
            f"estimate on [{est.low}, {est.high}], spec on [{spec.low}, {spec.high}]"
        )
        buckets = getattr(spec, "buckets", None)
        if isinstance(buckets, int):
            assert p.size == buckets, f"{p.size} probabilities for buckets = {buckets}"
    elif hasattr(est, "mean"):
        assert isinstance(est.mean, float) and math.isfinite(est.mean), f"mean {est.mean!r}"
        assert math.isfinite(est.variance) and est.variance >= 0, f"variance {est.variance!r}"
    else:
        raise AssertionError(f"unknown estimate type {type(est).__name__}")
    _raises(ValueError, "", "estimate(empty stats)", lambda: spec.estimate(Stats.empty(spec)))
    variance = getattr(spec, "variance", None)
    if variance is not None:
        v = np.asarray(variance(stats.n))
        assert np.all(np.isfinite(v)) and np.all(v >= 0), f"variance(n) = {v!r}"


def _check_privacy(spec: Any, values: np.ndarray, seed: int) -> None:
    loss_fn = getattr(spec, "privacy_loss", None)
    assert loss_fn is not None, "no privacy_loss() to audit"
    loss = float(loss_fn())
    eps = spec.epsilon
    # 1e-9 relative: the loss is computed in floating point from the real probabilities.
    assert 0 < loss <= eps * (1 + 1e-9), f"privacy_loss() = {loss!r} for epsilon = {eps!r}"
    if getattr(spec, "exact_epsilon", False):
        # Integer-threshold samplers (2^-64 units, integer grid weights): ~1e-8 short at most.
        assert abs(loss - eps) <= 1e-7 * max(1.0, eps), f"loss {loss!r} is not tight at {eps!r}"


def _check_transition_matrix(spec: Any, values: np.ndarray, seed: int) -> None:
    from .privacy import privacy_loss

    buckets_fn = getattr(spec, "bucket_matrix", None)
    if buckets_fn is not None:  # the bucketized channel EM deconvolves: inputs x outputs too
        bm = np.asarray(buckets_fn())
        brows = bm.sum(axis=1)
        assert bm.ndim == 2 and np.allclose(brows, 1.0, rtol=0, atol=1e-9), (
            f"bucket_matrix() rows sum to {brows.min():.6g}..{brows.max():.6g}, not 1"
        )
        assert privacy_loss(bm) <= spec.epsilon * (1 + 1e-9), "bucket_matrix() loss > epsilon"
    fn = getattr(spec, "transition_matrix", None)
    if fn is None:
        return
    try:
        matrix = np.asarray(fn())
    except NotImplementedError:
        return
    assert matrix.ndim == 2, f"transition matrix has shape {matrix.shape}"
    assert np.all((matrix >= 0) & (matrix <= 1)), "transition matrix entries outside [0, 1]"
    if getattr(spec, "_contract_values", None) is None and _is_categorical(spec):
        d = _input_size(spec)
        assert matrix.shape[0] == d, f"transition matrix has {matrix.shape[0]} rows, not {d} inputs"
    rows = matrix.sum(axis=1)
    assert np.allclose(rows, 1.0, rtol=0, atol=1e-9), (
        f"transition matrix rows sum to {rows.min():.6g}..{rows.max():.6g}, not 1 "
        f"(it must be inputs x outputs)"
    )
    loss = float(spec.privacy_loss())
    assert abs(privacy_loss(matrix) - loss) <= 1e-9 * max(1.0, loss), (
        f"privacy_loss(transition_matrix()) = {privacy_loss(matrix)!r} != privacy_loss() = {loss!r}"
    )
    index = getattr(spec, "output_index", None)
    if index is not None:
        idx = np.asarray(index(spec.randomize(values, rng=seed)))
        assert idx.shape == (len(values),), f"output_index shape {idx.shape}"
        assert idx.min() >= 0 and idx.max() < matrix.shape[1], "output_index outside the columns"


_CHECKS: dict[str, Any] = {
    "validation": _check_validation,
    "seeding": _check_seeding,
    "round_trips": _check_round_trips,
    "merge": _check_merge,
    "loop": _check_loop,
    "estimate": _check_estimate,
    "privacy": _check_privacy,
    "transition_matrix": _check_transition_matrix,
}
