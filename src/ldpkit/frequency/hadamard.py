"""Hadamard-matrix frequency oracles.

Hadamard response (HR) and Hadamard randomized response (HRR), with the fast Walsh-Hadamard
transform both aggregate through.

Throughout, ``H`` is the K x K Sylvester Hadamard matrix (K a power of two) in natural
order, ``H[i, j] = (-1)^popcount(i & j)``: row 0 is all ones and any two distinct rows
``a != b`` agree on exactly K/2 columns (their product is row ``a ^ b``, which is
balanced). Both oracles rest on that balance.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from .._exact import RR_MAX_EPSILON, coin, ratio_loss, rr_weights
from .._rng import RNGLike, as_generator
from .._validation import _show, check_epsilon, check_integer, check_not_masked
from ..spec import Reports
from ._base import MAX_DENSE_OUTPUTS, PureFrequencyOracle, index_dtype

__all__ = [
    "HadamardResponse",
    "HRR",
    "fwht",
    "hadamard_sign",
    "hrr_perturb_signs",
    "hrr_signed_sums",
]


# ---------------------------------------------------------------------------------------
# The transform and matrix entries
# ---------------------------------------------------------------------------------------
def fwht(x: Any, axis: int = -1) -> np.ndarray:
    """Unnormalized fast Walsh-Hadamard transform along one axis.

    Computes ``H @ x`` along ``axis`` for the Sylvester (natural-order) Hadamard matrix
    ``H[i, j] = (-1)^popcount(i & j)`` of size K = ``x.shape[axis]``, in O(K log K)
    operations per transformed vector. ``H @ H = K I``, so ``fwht(fwht(x)) == K * x`` and
    ``fwht(x) / K`` is the inverse.

    Parameters
    ----------
    x : array_like
        Integer, boolean, real or complex data; the length along ``axis`` must be a power
        of two (1 is allowed).
    axis : int, default -1
        The axis to transform.

    Returns
    -------
    ndarray
        A new array of ``x``'s shape. Boolean and integer input is transformed exactly in
        int64 (no rounding, and no wrap-around of small or unsigned types); floating and
        complex input keeps its dtype.

    Raises
    ------
    TypeError
        If ``x`` is not numeric.
    ValueError
        If the length along ``axis`` is not a power of two, or ``axis`` is out of range.

    Notes
    -----
    One butterfly stage per bit: entries whose indices differ only in bit ``b`` are
    replaced by their sum and difference, which applies the 2 x 2 Hadamard matrix along
    that bit; the product over all bits is the Kronecker power, i.e. Sylvester's ``H``.

    Examples
    --------
    >>> fwht([1, 0, 0, 0])
    array([1, 1, 1, 1])
    >>> fwht([1, 2, 3, 4])
    array([10, -2, -4,  0])
    """
    check_not_masked(x, "x")
    arr = np.asarray(x)
    if arr.dtype.kind in "biu":
        dtype = np.dtype(np.int64)
    elif arr.dtype.kind in "fc":
        dtype = arr.dtype
        if not np.all(np.isfinite(arr)):
            raise ValueError("x must hold finite numbers, got NaN or inf")
    else:
        raise TypeError(f"x must be a numeric array, got an array of dtype {arr.dtype}")
    axis = check_integer(axis, "axis")
    if arr.ndim == 0:
        raise ValueError("x must have at least one dimension, got a scalar")
    if not -arr.ndim <= axis < arr.ndim:
        raise ValueError(f"axis must be in [{-arr.ndim}, {arr.ndim}), got {axis}")
    size = arr.shape[axis]
    if size < 1 or size & (size - 1):
        raise ValueError(f"x must have a power-of-two length along axis {axis}, got {size}")
    moved = np.moveaxis(arr, axis, -1)
    lead = moved.shape[:-1]
    out = np.array(moved, dtype=dtype, order="C").reshape(-1, size)
    half = 1
    while half < size:
        # view the vectors as blocks [a-part (half) | b-part (half)] and butterfly them
        blocks = out.reshape(out.shape[0], size // (2 * half), 2, half)
        a = blocks[:, :, 0, :]
        b = blocks[:, :, 1, :]
        diff = a - b
        a += b
        b[...] = diff
        half *= 2
    return np.moveaxis(out.reshape(*lead, size), -1, axis)


def hadamard_sign(rows: Any, columns: Any) -> np.ndarray:
    """Entries ``H[rows, columns] = (-1)^popcount(rows & columns)`` as int8 (+1 or -1).

    ``rows`` and ``columns`` are non-negative integer arrays that broadcast together;
    the entries do not depend on K (Sylvester matrices are nested), only on the indices.

    Examples
    --------
    >>> hadamard_sign([0, 1, 3], 3)
    array([ 1, -1,  1], dtype=int8)
    """
    r = np.asarray(rows)
    c = np.asarray(columns)
    for name, a in (("rows", r), ("columns", c)):
        if a.dtype.kind not in "iu":
            raise TypeError(f"{name} must be non-negative integers, got {_show(a)}")
        if a.size and a.min() < 0:
            raise ValueError(f"{name} must be non-negative integers, got a negative value")
    return _sign(r, c)


def _sign(rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """hadamard_sign without input checks (hot path)."""
    parity = (np.bitwise_count(np.bitwise_and(rows, columns)) & 1).astype(np.int8)
    return 1 - 2 * parity


def _keep_flip(epsilon: float) -> tuple[float, float]:
    """Realized ``(P[keep], P[flip])`` of the binary coin, ~ ``(e/(e+1), 1/(e+1))``.

    The coin is the integer law ``(w_keep, w_flip)`` of :func:`ldpkit._exact.rr_weights`
    (ratio ``<= e^eps``, total below 2^62), drawn exactly by :func:`_flip_coins`; both
    probabilities come from the integers, so 1 - p never cancels.
    """
    w_keep, w_flip = rr_weights(epsilon, 1)
    return w_keep / (w_keep + w_flip), w_flip / (w_keep + w_flip)


def _coin_loss(epsilon: float) -> float:
    """``log(w_keep / w_flip)``: the exact loss of one binary coin of :func:`_keep_flip`."""
    w_keep, w_flip = rr_weights(epsilon, 1)
    return ratio_loss(w_flip, w_keep)


def _flip_coins(epsilon: float, n: int, gen: np.random.Generator, *, keep: bool) -> np.ndarray:
    """``n`` exact coins: True w.p. ``P[keep]`` (``keep=True``) or ``P[flip]``."""
    w_keep, w_flip = rr_weights(epsilon, 1)
    return coin(gen, n, w_keep if keep else w_flip, w_keep + w_flip)


def hrr_perturb_signs(signs: Any, epsilon: float, *, rng: RNGLike = None) -> np.ndarray:
    """Binary randomized response on signs: keep each w.p. e^eps/(e^eps+1), else flip.

    This is HRR's randomizer on its own, vectorized over users: given each user's
    sampled coefficient index ``j`` and her true sign ``H[v, j]`` (or, for a signed
    one-hot vector such as a Haar level, ``sign * H[index, j]``), the report is
    ``(j, hrr_perturb_signs(true_sign, epsilon))``. The index carries no information
    about the input, so ``P[report | v] / P[report | v'] <= e^eps`` (Cormode et al. 2018).

    Parameters
    ----------
    signs : array_like of int
        True signs, each -1 or +1, one per user (1-D).
    epsilon : float
        Privacy budget, in [1e-6, ``max_epsilon``] (per class: docs/design/THREAT_MODEL.md).
    rng : Generator, SeedSequence, int or None
        Randomness source (see :func:`ldpkit.as_generator`).

    Returns
    -------
    ndarray of int8
        The randomized signs.

    Examples
    --------
    >>> noisy = hrr_perturb_signs(np.ones(100_000, dtype=np.int8), 2.0, rng=0)
    >>> noisy.dtype, round(float(np.mean(noisy == -1)), 2)  # 1 / (e^2 + 1) = 0.119
    (dtype('int8'), 0.12)
    """
    epsilon = check_epsilon(epsilon, high=RR_MAX_EPSILON)
    s = _check_signs(signs, "signs")
    # An exact integer coin: P[flip] = w_flip / (w_keep + w_flip), no 2^-53 floor.
    flip = _flip_coins(epsilon, s.shape[0], as_generator(rng), keep=False)
    return np.where(flip, -s, s).astype(np.int8)


def hrr_signed_sums(columns: Any, signs: Any, size: int) -> np.ndarray:
    """Per-column sums of signs: ``w[j] = sum_{i: columns_i = j} signs_i`` (int64, length size).

    ``fwht(w)[v] = sum_i H[v, columns_i] signs_i`` is then the aggregate HRR needs for
    every row v at once, in O(n + K log K).
    """
    j = np.asarray(columns)
    s = _check_signs(signs, "signs")
    if j.ndim != 1 or j.dtype.kind not in "iu" or j.shape != s.shape:
        raise ValueError(f"columns must be a 1-D integer array matching signs, got {_show(j)}")
    if j.size and (int(j.min()) < 0 or int(j.max()) >= size):
        raise ValueError(f"columns must be integers in [0, {size}), got a value outside it")
    # one bincount over 2K bins keeps the counts exact integers (weights would give floats)
    both = np.bincount(2 * j.astype(np.int64) + (s > 0), minlength=2 * size).reshape(size, 2)
    return both[:, 1] - both[:, 0]


def _check_signs(signs: Any, name: str) -> np.ndarray:
    """Return ``signs`` as 1-D int8 of -1/+1, validated.

    A non-integer dtype is a TypeError for a function argument; report arrays (``name``
    starting with "reports.") get ValueError, as GRR's.
    """
    s = np.asarray(signs)
    if s.ndim == 0:
        s = s.reshape(1)
    if s.dtype.kind not in "iu" and not name.startswith("reports."):
        raise TypeError(f"{name} must be integers, -1 or +1, got {_show(s)}")
    if s.dtype.kind not in "iu" or s.ndim != 1:
        raise ValueError(f"{name} must be a 1-D integer array of -1 and +1, got {_show(s)}")
    if s.size and not np.all((s == 1) | (s == -1)):
        raise ValueError(f"{name} must contain only -1 and +1")
    return s.astype(np.int8, copy=False)


def _check_outputs(values: np.ndarray, size: int, name: str) -> np.ndarray:
    if (
        values.ndim != 1
        or values.dtype.kind not in "iu"
        or (values.size and (int(values.min()) < 0 or int(values.max()) >= size))
    ):
        raise ValueError(f"{name} must be a 1-D integer array of values in [0, {size})")
    return values


def _check_dense(rows: int, columns: int) -> None:
    if rows * columns > MAX_DENSE_OUTPUTS:
        raise ValueError(
            f"transition_matrix must have at most {MAX_DENSE_OUTPUTS} entries, "
            f"got {rows} x {columns}: use a smaller domain_size"
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class _HadamardCoin(PureFrequencyOracle):
    """What HR and HRR share: one exact keep coin (:func:`_keep_flip`) and ``q* = 1/2``.

    The true item is supported exactly when the coin keeps (``p* = P[keep]``, the realized
    value); any other item with probability 1/2, as two rows of H agree on half the
    columns (see each class).
    """

    max_epsilon: ClassVar[float] = RR_MAX_EPSILON

    @property
    def p(self) -> float:
        return _keep_flip(self.epsilon)[0]

    @property
    def q(self) -> float:
        return 0.5


# ---------------------------------------------------------------------------------------
# Hadamard response
# ---------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class HadamardResponse(_HadamardCoin):
    """Hadamard response (HR): one index in [K] per user, aggregated by one FWHT.

    With ``K = 2^ceil(log2(d + 1))`` (the smallest power of two above d), item v owns
    the set ``C_v = {j : H[v + 1, j] = +1}`` of K/2 outputs (row 0 is skipped because it
    is all ones). A user with item v reports ``y`` uniform in ``C_v`` with probability
    ``e^eps / (e^eps + 1)`` and uniform outside ``C_v`` otherwise; ``reports.values``
    holds y (smallest unsigned dtype).

    Parameters
    ----------
    epsilon : float
        Privacy budget, in [1e-6, ``max_epsilon``] (per class: docs/design/THREAT_MODEL.md).
    domain_size : int
        Number of items d (>= 2).

    Notes
    -----
    ``P[y | v] = 2 e^eps / ((e^eps + 1) K)`` on ``C_v`` and ``2 / ((e^eps + 1) K)`` off
    it, so every output's probability ratio is at most ``e^eps``; it is exactly
    ``e^eps`` at y = 1, which lies outside ``C_0`` and inside ``C_1`` (eps-LDP, tight).

    Support(y) = {v : y in C_v}, a pure protocol (FO17 Definition 2) with
    ``p* = e^eps / (e^eps + 1)`` and ``q* = 1/2``: for ``v' != v`` the rows v+1 and
    v'+1 agree on exactly half the columns, so ``C_v'`` covers half of ``C_v`` and half
    of its complement. Hence ``n Var* = (e^eps + 1)^2 / (e^eps - 1)^2`` (FO17 eq. 3),
    as BLH, but with O(log K)-bit reports and O(n + K log K) aggregation:
    ``C_v = (n + (H h)[v + 1]) / 2`` with ``h`` the histogram of the reports.

    The coin is exact: integer weights with ratio ``<= e^eps`` (p and
    ``privacy_loss()`` are the realized values, within 1e-15 of the paper's), epsilon in
    ``[1e-6, 40]`` (``max_epsilon``).

    Sampling is loop-free: draw j uniform in [K] and, when it lands on the wrong side of
    ``C_v``, flip the lowest set bit of v+1 in j. That flip changes the parity of
    ``popcount((v+1) & j)``, so it is a bijection between ``C_v`` and its complement;
    every point of the chosen side is thus hit by exactly two of the K equally likely
    draws, i.e. uniformly.

    References
    ----------
    J. Acharya, Z. Sun, H. Zhang. Hadamard Response: Estimating Distributions Privately,
    Efficiently, and with Little Communication. AISTATS 2019, section 4.
    T. Wang et al. Locally Differentially Private Protocols for Frequency Estimation.
    USENIX Security 2017 (pure protocols, eq. 1-3).

    Examples
    --------
    >>> hr = HadamardResponse(epsilon=1.0, domain_size=6)
    >>> hr.hadamard_size
    8
    >>> reports = hr.randomize([0, 1, 2, 3, 4, 5], rng=0)
    >>> reports.values.dtype, len(reports)
    (dtype('uint8'), 6)
    >>> hr.aggregate(reports).n
    6
    """

    @property
    def hadamard_size(self) -> int:
        """K = 2^ceil(log2(d + 1)), the number of possible reports."""
        return 1 << self.domain_size.bit_length()

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Each user's report y in [K]; ``reports.values`` holds y."""
        v = self.check_values(values)
        gen = as_generator(rng)
        size = self.hadamard_size
        row = v + 1
        y = np.asarray(gen.integers(0, size, size=v.shape[0]))
        want_inside = _flip_coins(self.epsilon, v.shape[0], gen, keep=True)
        inside = (np.bitwise_count(row & y) & 1) == 0
        lowest_bit = row & -row
        y ^= np.where(inside != want_inside, lowest_bit, 0)
        return Reports(self, values=y.astype(index_dtype(size)))

    def support_counts(self, reports: Reports) -> np.ndarray:
        """Count, for every item v, the reports whose Hadamard support contains v."""
        size = self.hadamard_size
        y = _check_outputs(reports.values, size, "reports.values")
        hist = np.bincount(y, minlength=size)
        # (H hist)[v+1] = #reports in C_v - #reports outside C_v
        balance = fwht(hist)[1 : self.domain_size + 1]
        return (y.shape[0] + balance) // 2

    def transition_matrix(self) -> np.ndarray:
        """Return the exact P[output | input], shape (d, n_outputs)."""
        d, size = self.domain_size, self.hadamard_size
        _check_dense(d, size)
        keep, flip = _keep_flip(self.epsilon)
        signs = _sign(np.arange(1, d + 1)[:, None], np.arange(size)[None, :])
        return np.where(signs > 0, 2.0 * keep / size, 2.0 * flip / size)

    def output_index(self, reports: Reports) -> np.ndarray:
        """Return the column of :meth:`transition_matrix` that each report is."""
        y = self.check_reports(reports).values
        return np.asarray(_check_outputs(y, self.hadamard_size, "reports.values"), dtype=np.int64)

    def privacy_loss(self) -> float:
        # Every column holds 2p/K (on C_v) or 2(1-p)/K (off it); column 1 holds both
        # (H[1,1] = -1, H[2,1] = +1, and rows 1, 2 exist for d >= 2): loss = log(p/(1-p)).
        """Return the exact epsilon of one report, from the integer coin."""
        return _coin_loss(self.epsilon)


# ---------------------------------------------------------------------------------------
# Hadamard randomized response
# ---------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class HRR(_HadamardCoin):
    """Hadamard randomized response: one random Hadamard coefficient, one noisy sign.

    With ``K = 2^ceil(log2 d)``, a user with item v draws a column j uniform in [K] and
    reports ``(j, s)`` where ``s = H[v, j]`` is kept with probability
    ``p = e^eps / (e^eps + 1)`` and flipped otherwise (:func:`hrr_perturb_signs`).
    ``reports.values`` holds j (smallest unsigned dtype), ``reports.signs`` holds s
    (int8, -1 or +1).

    Parameters
    ----------
    epsilon : float
        Privacy budget, in [1e-6, ``max_epsilon``] (per class: docs/design/THREAT_MODEL.md).
    domain_size : int
        Number of items d (>= 2).

    Notes
    -----
    ``P[(j, s) | v] = p / K`` if ``s = H[v, j]`` else ``(1 - p) / K``: the ratio is at
    most ``e^eps``, exactly ``e^eps`` at column 1 (``H[0, 1] = 1``, ``H[1, 1] = -1``).
    The flip is an exact integer coin (p is the realized keep probability,
    ``privacy_loss()`` its exact loss), epsilon in ``[1e-6, 40]`` (``max_epsilon``).

    Each report is an unbiased, scaled estimate of one Hadamard coefficient of the
    user's one-hot vector: ``E[H[v', j] s] = (2p - 1) [v' = v]``, so
    ``f~_v = sum_i H[v, j_i] s_i / (n (2p - 1))`` (Cormode et al. 2018). The same
    estimator is the pure-protocol one (FO17 Definition 2) with
    ``Support(j, s) = {v : H[v, j] = s}``: the true item is supported exactly when the
    sign is kept (``p* = p``), and any other item ``v'`` when ``H[v', j] = s``, which
    for a uniform j has probability ``q* = 1/2`` whether or not s was flipped (rows v
    and v' agree on half the columns). With ``C_v = (n + sum_i H[v, j_i] s_i) / 2``,
    ``(C_v/n - 1/2) / (p - 1/2)`` is the estimator above, and
    ``n Var* = (e^eps + 1)^2 / (e^eps - 1)^2``. Aggregation is one FWHT of the
    per-column signed sums: O(n + K log K).

    References
    ----------
    G. Cormode, T. Kulkarni, D. Srivastava. Marginal Release Under Local Differential
    Privacy. SIGMOD 2018, section 4 (Hadamard randomized response);
    T. Kulkarni, G. Cormode, D. Srivastava. Answering Range Queries Under Local
    Differential Privacy. VLDB 2019 (HaarHRR).

    Examples
    --------
    >>> hrr = HRR(epsilon=1.0, domain_size=5)
    >>> hrr.hadamard_size
    8
    >>> reports = hrr.randomize([0, 1, 2, 3, 4], rng=0)
    >>> reports.values.dtype, reports.signs.dtype
    (dtype('uint8'), dtype('int8'))
    """

    @property
    def hadamard_size(self) -> int:
        """K = 2^ceil(log2 d), the number of Hadamard coefficients."""
        return 1 << (self.domain_size - 1).bit_length()

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Each user's ``(j, s)``; ``reports.values`` holds j and ``reports.signs`` s."""
        v = self.check_values(values)
        gen = as_generator(rng)
        size = self.hadamard_size
        j = np.asarray(gen.integers(0, size, size=v.shape[0]))
        s = hrr_perturb_signs(_sign(v, j), self.epsilon, rng=gen)
        return Reports(self, values=j.astype(index_dtype(size)), signs=s)

    def support_counts(self, reports: Reports) -> np.ndarray:
        """Count, for every item v, the reports whose sign supports v (one Walsh-Hadamard pass)."""
        size = self.hadamard_size
        j = _check_outputs(reports.values, size, "reports.values")
        sums = hrr_signed_sums(j, _check_signs(reports.signs, "reports.signs"), size)
        # fwht(sums)[v] = sum_i H[v, j_i] s_i = #supporting - #not supporting
        return (j.shape[0] + fwht(sums)[: self.domain_size]) // 2

    def transition_matrix(self) -> np.ndarray:
        """Columns ``2 j + (s > 0)`` for the 2K outputs ``(j, s)``."""
        d, size = self.domain_size, self.hadamard_size
        _check_dense(d, 2 * size)
        keep, flip = _keep_flip(self.epsilon)
        signs = _sign(np.arange(d)[:, None], np.arange(size)[None, :])
        m = np.empty((d, size, 2))
        m[:, :, 1] = np.where(signs > 0, keep, flip) / size  # s = +1
        m[:, :, 0] = np.where(signs < 0, keep, flip) / size  # s = -1
        return m.reshape(d, 2 * size)

    def output_index(self, reports: Reports) -> np.ndarray:
        """Return the column of :meth:`transition_matrix` that each report is."""
        reports = self.check_reports(reports)
        j = _check_outputs(reports.values, self.hadamard_size, "reports.values")
        s = _check_signs(reports.signs, "reports.signs")
        return 2 * j.astype(np.int64) + (s > 0)

    def privacy_loss(self) -> float:
        # Every column holds p/K or (1-p)/K; column (1, +1) holds both (rows 0 and 1).
        """Return the exact epsilon of one report, from the integer coin."""
        return _coin_loss(self.epsilon)
