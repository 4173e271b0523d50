"""ToPS: continuous release of a numerical stream under central DP (STR21 §4).

Threshold optimizer (exponential mechanism on the first m values) + perturber (online
b-ary hierarchy with Laplace noise and online consistency) + smoother (predicts values whose
leaf is still open). See :class:`ToPS`.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from .._rng import RNGLike
from .._validation import (
    MAX_STREAM_EPSILON,
    check_bound,
    check_epsilon,
    check_integer,
    check_numeric_values,
    check_real,
)
from ._release import StreamRelease
from .online_hierarchy import OnlineHierarchy, choose_leaf_exponent
from .smoothers import Smoother, make_smoother
from .threshold import THRESHOLD_METHODS, choose_threshold

__all__ = ["ToPS", "hierarchy_levels"]

BLOCK_CORRECTIONS = ("uniform", "last")


def hierarchy_levels(length: int, leaf_size: int, branching: int) -> int:
    """``L = floor(log_b(n / g))`` (at least 1), computed in exact integer arithmetic."""
    levels, span = 0, leaf_size
    while span * branching <= length:
        span *= branching
        levels += 1
    return max(1, levels)


class ToPS(StreamRelease):
    """Threshold-Perturber-Smoother continuous release of a numerical stream (central DP).

    Values ``v`` in ``[0, bound]`` arrive in batches. The first ``threshold_size`` values
    (``m``) choose the clipping threshold ``theta`` by the exponential mechanism; every
    later value is clipped to ``[0, theta]`` and released through a b-ary hierarchy over
    time whose nodes carry ``Laplace(theta L / epsilon)`` noise. Each part satisfies
    epsilon-DP on disjoint values, so the whole release is epsilon-DP (event level).

    Parameters
    ----------
    epsilon : float
        Privacy budget (used in full by the threshold part and by the release part).
    bound : float
        Public upper bound ``B`` of the values (values must lie in ``[0, B]``).
    threshold_size : int, optional
        ``m``, the number of leading values spent on choosing theta (default 65,536, as
        the authors; 0 when ``threshold`` is given).
    length : int
        ``n``, the expected number of released values (authors: 2^20). It sets the leaf
        size, the number of levels and lambda; the stream may run longer (the hierarchy
        is a growing forest of ``levels``-high trees, so privacy holds for any length).
    branching : int
        ``b`` (authors: 16).
    leaf_size : int, optional
        ``g`` values per leaf; default ``b^s`` with ``s`` minimising
        ``2 (b-1) log_b(r/g)^3 / eps^2 + g^2 / 36`` (METHODS.md §5).
    levels : int, optional
        ``L`` noisy levels; default ``floor(log_b(n / g))`` (at least 1).
    max_range : int, optional
        ``r``, the largest query range of interest for choosing ``s`` (default ``length``).
    excess : float
        ``c`` in lambda: how far a clipped value is assumed to exceed theta (authors: 60).
    step : float
        Spacing of the candidate thresholds ``0, step, ..., bound`` (authors: 1).
    threshold_method : {"gumbel", "noisy_max"}
        Exact exponential mechanism (Gumbel-max) or the authors' Laplace report-noisy-max.
    threshold : float, optional
        A fixed public threshold: skips the threshold phase.
    smoother : str, dict or Smoother
        ``"recent"`` (default), ``"mean"``, ``"median"``, ``"moving_average"`` (w = 4),
        ``"exponential"`` (alpha = 0.6), see :mod:`ldpkit.stream.smoothers`.
    block_correction : {"uniform", "last"}
        How a completed leaf's consistent sum is spread over its values when a range cuts
        the leaf. ``"uniform"`` (default, our choice): each value gets ``u_t / g``, so a
        completed leaf is answered from its own noisy sum. ``"last"`` (authors' code): the
        values get the smoother's prediction and the leaf's last value absorbs the
        difference. Either way every completed leaf sums exactly to its consistent value.
    consistency : bool
        Run the online consistency (default True).
    rng : Generator, int, SeedSequence or None
        Source of all randomness; kept (and serialized) for the life of the stream.

    Notes
    -----
    *Threshold*: ``q(theta) = -#{v > theta} - lambda theta`` with
    ``lambda = (3m/(n c)) sqrt(2(b-1)L^3) / epsilon``; Delta = 1 and the score is monotone,
    so theta is sampled with probability ``∝ exp(epsilon q(theta))`` (see
    :mod:`ldpkit.stream.threshold` for why the factor 1/2 is not needed).

    *Positions*: queries index released values only: position 0 is the first value after
    the m threshold values (those are never released).

    *Answers*: a range ``[i, j)`` of released positions is answered from the consistent
    leaves it covers, plus the covered fraction of the leaves it cuts, plus the smoother's
    per-value prediction (``prediction / g``) for values whose leaf is still open.

    *Standard errors*: the answer is linear in the node noises (for every smoother except
    the median), so its variance is ``2 (theta L / epsilon)^2`` times the squared norm of
    its coefficients on the nodes, obtained exactly by the adjoint of the consistency map
    (see :mod:`ldpkit.stream.online_hierarchy`). They cover the privacy noise only: clipping bias
    and the prediction error of open leaves are not random given the data.

    *Cost*: each batch is processed with numpy over whole arrays; per completed node the
    work is O(1), and the online consistency recomputes each leaf at most once per level
    above it. State: the tree arrays (O(n/g) nodes) plus buffers of fixed size.

    *The state is secret* (central DP: a trusted curator): ``to_dict()`` and pickles hold
    the raw values of the threshold phase (until theta is chosen), the clipped raw values of
    the open leaf, and the Generator's full state, from which the noise can be recomputed
    and removed. Keep them like the raw data; only the answers are differentially private.
    ToPS is therefore not on the Reports/Stats contract (its own family, see
    docs/design/ARCHITECTURE.md).

    References
    ----------
    T. Wang, J. Q. Chen, Z. Zhang, D. Su, Y. Cheng, Z. Li, N. Li, S. Jha. Continuous
    Release of Data Streams under both Centralized and Local Differential Privacy.
    CCS 2021, §4 and Appendices C-D.
    M. Hay, V. Rastogi, G. Miklau, D. Suciu. Boosting the Accuracy of Differentially
    Private Histograms Through Consistency. VLDB 2010.

    Examples
    --------
    >>> import numpy as np
    >>> values = np.random.default_rng(1).poisson(5.0, 100_000).clip(0, 100)
    >>> tops = ToPS(epsilon=1.0, bound=100, threshold_size=10_000, length=90_000, rng=0)
    >>> _ = tops.update(values)
    >>> tops.threshold, tops.n_released
    (20.0, 90000)
    >>> est, se = tops.range_sum(0, 90_000)
    >>> bool(abs(est - values[10_000:].sum()) < 6 * se)  # clipping at 20 loses almost nothing
    True
    """

    def __init__(
        self,
        epsilon: float,
        bound: float,
        *,
        threshold_size: int | None = None,
        length: int = 2**20,
        branching: int = 16,
        leaf_size: int | None = None,
        levels: int | None = None,
        max_range: int | None = None,
        excess: float = 60.0,
        step: float = 1.0,
        threshold_method: Literal["gumbel", "noisy_max"] = "gumbel",
        threshold: float | None = None,
        smoother: str | dict[str, Any] | Smoother = "recent",
        block_correction: Literal["uniform", "last"] = "uniform",
        consistency: bool = True,
        rng: RNGLike = None,
    ) -> None:
        self.epsilon = check_epsilon(epsilon, high=MAX_STREAM_EPSILON)
        self.bound = check_bound(bound)
        self.length = check_integer(length, "length", low=1)
        self.branching = check_integer(branching, "branching", low=2)
        self.max_range = (
            self.length if max_range is None else check_integer(max_range, "max_range", low=1)
        )
        if leaf_size is None:
            leaf_size = self.branching ** choose_leaf_exponent(
                self.branching, self.max_range, self.epsilon
            )
        self.leaf_size = check_integer(leaf_size, "leaf_size", low=1)
        if levels is None:
            levels = hierarchy_levels(self.length, self.leaf_size, self.branching)
        self.levels = check_integer(levels, "levels", low=1)
        self.excess = check_real(excess, "excess", low=0.0, low_inclusive=False)
        self.step = check_real(step, "step", low=0.0, low_inclusive=False)
        if threshold_method not in THRESHOLD_METHODS:
            raise ValueError(
                f"threshold_method must be one of {THRESHOLD_METHODS}, got {threshold_method!r}"
            )
        self.threshold_method = threshold_method
        if block_correction not in BLOCK_CORRECTIONS:
            raise ValueError(
                f"block_correction must be one of {BLOCK_CORRECTIONS}, got {block_correction!r}"
            )
        self.block_correction = block_correction
        if not isinstance(consistency, (bool, np.bool_)):
            raise TypeError(f"consistency must be a bool, got {consistency!r}")
        self.consistency = bool(consistency)
        self.smoother = make_smoother(smoother)
        if threshold is None:
            m = (
                65_536
                if threshold_size is None
                else check_integer(threshold_size, "threshold_size", low=1)
            )
        else:
            threshold = check_real(threshold, "threshold", low=0.0, high=self.bound)
            m = (
                0
                if threshold_size is None
                else check_integer(
                    threshold_size, "threshold_size (with a fixed threshold)", low=0, high=0
                )
            )
        self._fixed_threshold = threshold
        self._tree: OnlineHierarchy | None = None
        super().__init__(m, rng)
        if threshold is not None:
            self._set_threshold(threshold)

    # ------------------------------------------------------------------ phases
    def _check_items(self, items: Any) -> np.ndarray:
        return check_numeric_values(items, 0.0, self.bound, "values")

    def _lambda_hierarchy(self) -> tuple[int, int]:
        """``(b, h)`` that enter lambda: those of the hierarchy actually used."""
        return self.branching, self.levels

    def _select_threshold(self, items: np.ndarray, rng: np.random.Generator) -> float:
        b, h = self._lambda_hierarchy()
        return choose_threshold(
            items,
            self.epsilon,
            self.bound,
            length=self.length,
            branching=b,
            levels=h,
            excess=self.excess,
            step=self.step,
            method=self.threshold_method,
            rng=rng,
        )

    @property
    def noise_scale(self) -> float | None:
        """Laplace scale of every node, ``theta L / epsilon`` (None before theta is known)."""
        return None if self._threshold is None else self._threshold * self.levels / self.epsilon

    def _start_release(self, threshold: float) -> None:
        self._tree = OnlineHierarchy(
            self.branching,
            self.levels,
            self.leaf_size,
            threshold * self.levels / self.epsilon,
            consistency=self.consistency,
        )

    def _release(self, items: np.ndarray, rng: np.random.Generator) -> None:
        assert self._tree is not None and self._threshold is not None
        self._tree.add(np.minimum(items, self._threshold), rng)

    @property
    def tree(self) -> OnlineHierarchy:
        """The perturber's hierarchy (after the threshold is known)."""
        if self._tree is None:
            raise ValueError(
                f"the threshold is chosen after {self._m} values; {self._n_seen} arrived so far"
            )
        return self._tree

    @property
    def n_released(self) -> int:
        """Number of values released so far."""
        return 0 if self._tree is None else self._tree.n_values

    # ------------------------------------------------------------------ answers
    def _prior(self) -> float:
        return 0.5 * float(self._threshold or 0.0) * self.leaf_size

    def _predict(self, leaves: np.ndarray, blocks: np.ndarray) -> np.ndarray:
        return self.smoother.predict(leaves, blocks, self._prior())

    def _range_estimates(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        if self._tree is None:
            return np.zeros(starts.shape)
        tree, g = self._tree, self.leaf_size
        leaves = tree.leaf_estimates()
        n_leaves = leaves.size
        li = -(-starts // g)
        lj = stops // g
        out = np.zeros(starts.shape)
        spans = li < lj
        if np.any(spans):
            out[spans] = tree.leaf_range_sums(li[spans], lj[spans])
        same = li > lj  # the range lies inside one block
        # front: the last (li*g - i) values of block li-1 (complete), when li <= lj
        front = ~same & (starts < li * g)
        # back: the first (j - lj*g) values of block lj (complete, or the open block)
        back = ~same & (stops > lj * g)
        blocks = np.concatenate([li[front] - 1, lj[back], lj[same]])
        pred = self._predict(leaves, blocks) if blocks.size else np.zeros(0)
        nf, nb = int(front.sum()), int(back.sum())
        p_front, p_back, p_same = pred[:nf], pred[nf : nf + nb], pred[nf + nb :]
        k = (li * g - starts)[front].astype(np.float64)
        tf = li[front] - 1
        if self.block_correction == "uniform":
            out[front] += k * leaves[tf] / g
        else:
            out[front] += leaves[tf] - (g - k) * p_front / g

        def per_block(t: np.ndarray, predicted: Any) -> Any:
            """Return a cut block's sum: its consistent leaf if complete, else the prediction."""
            if self.block_correction == "last":
                return predicted
            complete = leaves[np.minimum(t, n_leaves - 1)] if n_leaves else 0.0
            return np.where(t < n_leaves, complete, predicted)

        r = (stops - lj * g)[back].astype(np.float64)
        out[back] += r * per_block(lj[back], p_back) / g
        r = (stops - starts)[same].astype(np.float64)
        out[same] += r * per_block(lj[same], p_same) / g
        return out

    def _smoother_weights(self, t: int, coef: float, w: np.ndarray) -> bool:
        """Add ``coef * (smoother prediction for block t)`` to the leaf weights ``w``."""
        if coef == 0.0:
            return True
        if not self.smoother.linear:
            return False
        idx, c, _ = self.smoother.weights(t)
        np.add.at(w, idx, coef * c)
        return True

    def _range_variance(self, start: int, stop: int) -> float:
        if self._tree is None or self._tree.scale == 0.0 or stop == start:
            return 0.0
        tree, g = self._tree, self.leaf_size
        n_leaves = int(tree.counts[0])
        w = np.zeros(n_leaves)
        li, lj = -(-start // g), stop // g
        uniform = self.block_correction == "uniform"
        ok = True

        def partial(t: int, r: float, cut_last: bool) -> bool:
            # r values of block t: the last r of it if cut_last, else its first r
            if t < n_leaves and (uniform or (cut_last and r == g)):
                w[t] += r / g
                return True
            if t < n_leaves and cut_last:  # "last": leaf - (g - r) * prediction / g
                w[t] += 1.0
                return self._smoother_weights(t, -(g - r) / g, w)
            return self._smoother_weights(t, r / g, w)

        if li > lj:
            ok = partial(lj, float(stop - start), False)
            lo = hi = None
        else:
            lo, hi = li, lj
            if start < li * g:
                ok = partial(li - 1, float(li * g - start), True) and ok
            if stop > lj * g:
                ok = partial(lj, float(stop - lj * g), False) and ok
        if not ok:
            return float("nan")
        return tree.weights_variance(w, lo, hi)

    def value_at(self, position: int | None = None) -> float:
        """Return the smoothed estimate of one released value.

        ``position=None`` gives the current prediction: the smoother's per-value estimate
        for the leaf now being filled (the "value now" of a live dashboard). A position of
        a completed leaf gets that leaf's share (see ``block_correction``).
        """
        if self._tree is None:
            raise ValueError(f"no value is released before the first {self._m} values arrive")
        if position is None:
            t = int(self._tree.counts[0])
            return (
                float(self._predict(self._tree.leaf_estimates(), np.array([t]))[0]) / self.leaf_size
            )
        p = check_integer(position, "position", low=0, high=self.n_released - 1)
        return float(self._range_estimates(np.array([p]), np.array([p + 1]))[0])

    # ------------------------------------------------------------------ state
    def _state(self) -> dict[str, Any]:
        return self.tree.state()

    def _load_state(self, state: dict[str, Any]) -> None:
        self.tree.load_state(state)

    def __repr__(self) -> str:
        """Return a one-line summary."""
        return (
            f"{type(self).__name__}(epsilon={self.epsilon}, bound={self.bound}, "
            f"threshold={self._threshold}, b={self.branching}, g={self.leaf_size}, "
            f"L={self.levels}, n_released={self.n_released})"
        )
