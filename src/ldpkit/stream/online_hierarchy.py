"""The online b-ary hierarchy over time with Laplace noise and online consistency (STR21 §4.3).

Levels are numbered ``0`` (leaves) to ``L - 1`` (top) here; the paper's level ``l`` is our
``l - 1``. A leaf is the sum of ``g`` consecutive (clipped) values; a node at level ``k``
is the sum of ``b`` nodes of level ``k - 1``, so it covers ``g b^k`` values. Nodes are
released (true sum + ``Laplace(scale)``) the moment they complete. The top level has no
parent: the stream is a growing forest of top-level trees, so every value lies in exactly
``L`` nodes whatever the stream's length, and ``scale = theta L / epsilon`` makes the whole
release epsilon-DP (event level).

Consistency (Hay et al. 2010, in the b-ary form of STR21 App. C) runs inside each
*maximal complete subtree* (a complete node whose parent is not complete, or a top node):

* bottom-up, ``H(x) = a_l N(x) + c_l sum_{y in chd(x)} H(y)`` with
  ``a_l = (b^l - b^(l-1)) / (b^l - 1)`` and ``c_l = (b^(l-1) - 1) / (b^l - 1)`` at paper level
  ``l`` (``H = N`` at the leaves);
* top-down, ``Nbar(root) = H(root)``,
  ``Nbar(y) = H(y) + (Nbar(parent) - sum_{siblings z of y, incl. y} H(z)) / b``.

Online: ``H`` of a node depends only on its subtree, so it is computed once, when the node
completes. ``Nbar`` of a subtree changes only when the subtree's root changes, i.e. when a
parent completes and absorbs ``b`` former roots. :meth:`OnlineHierarchy.refresh` reruns the
top-down pass below every root that appeared since the last refresh and nowhere else; the
result equals the offline algorithm run on the current forest (every step is linear and
identical; STR21 App. C eq. 11-13). Each leaf is recomputed at most once per level above
it, so the total consistency work is O(L) per leaf.

Noise draws happen in a canonical order (by completion time, then level), so feeding the
same values in any batch sizes gives identical releases for the same generator.

Variance (our derivation, used for standard errors): every answer is a linear function
``sum_x w_x N(x)`` of the independent node noises, so its variance is
``2 scale^2 sum_x w_x^2``. For a query given by leaf weights ``omega`` (1 on fully covered
leaves, fractions on partly covered ones, smoother coefficients), ``w`` is obtained by the
adjoint (transpose) of the top-down and bottom-up passes, per maximal subtree. A subtree
whose leaves all carry the same weight ``c`` contributes ``c^2 Var(H(root))``, with
``Var(H_1) = 1``, ``Var(H_l) = a_l^2 + c_l^2 b Var(H_(l-1))`` in units of the node variance.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import MAX_ENTRIES, check_array, check_integer, check_memory, check_real

__all__ = ["OnlineHierarchy", "hay_weights", "subtree_root_variances", "choose_leaf_exponent"]


def hay_weights(branching: int, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(a, c)`` per level (0 = leaves) of the bottom-up average (STR21 App. C)."""
    b = float(branching)
    lv = np.arange(1, levels + 1, dtype=np.float64)  # the paper's l
    num = b**lv - 1.0
    a = (b**lv - b ** (lv - 1)) / num
    c = (b ** (lv - 1) - 1.0) / num
    return a, c


def subtree_root_variances(branching: int, levels: int) -> np.ndarray:
    """``Var(H)`` of a node at each level, in units of one node's noise variance."""
    a, c = hay_weights(branching, levels)
    v = np.empty(levels)
    v[0] = 1.0
    for k in range(1, levels):
        v[k] = a[k] ** 2 + c[k] ** 2 * branching * v[k - 1]
    return v


def choose_leaf_exponent(branching: int, max_range: int, epsilon: float) -> int:
    """``s`` minimising ``2 (b-1) log_b(r/g)^3 / eps^2 + g^2 / 36`` with ``g = b^s`` (METHODS.md §5).

    ``s`` ranges over ``0..floor(log_b r)``. The first term is the noise of a range of
    length ``r`` answered by the hierarchy above the leaves, the second the error of
    splitting a leaf (both in units of theta^2).
    """
    b = int(branching)
    best_s, best = 0, np.inf
    s, g = 0, 1
    while g <= max_range:
        h = np.log(max_range / g) / np.log(b)
        cost = 2.0 * (b - 1) * h**3 / epsilon**2 + g * g / 36.0
        if cost < best:
            best_s, best = s, cost
        s, g = s + 1, g * b
    return best_s


class _Grow:
    """A float64 array with amortized O(1) append (capacity doubling)."""

    __slots__ = ("data", "size")

    def __init__(self, data: np.ndarray | None = None) -> None:
        arr = np.zeros(0) if data is None else np.asarray(data, dtype=np.float64)
        self.data = np.empty(max(16, arr.size))
        self.data[: arr.size] = arr
        self.size = arr.size

    def reserve(self, size: int) -> None:
        if size > self.data.size:
            new = np.empty(max(size, 2 * self.data.size))
            new[: self.size] = self.data[: self.size]
            self.data = new

    def append(self, values: np.ndarray) -> None:
        self.reserve(self.size + values.size)
        self.data[self.size : self.size + values.size] = values
        self.size += values.size

    @property
    def view(self) -> np.ndarray:
        return self.data[: self.size]


class OnlineHierarchy:
    """Streaming b-ary hierarchy: noisy node sums, online consistency, range answers.

    Parameters
    ----------
    branching : int
        ``b`` (>= 2).
    levels : int
        ``L`` noisy levels (>= 1); level 0 are the leaves.
    leaf_size : int
        ``g`` values per leaf (>= 1).
    scale : float
        Laplace scale of every node (``theta L / epsilon`` for ToPS).
    consistency : bool
        Run Hay et al.'s consistency (answers from consistent leaves). Without it, ranges
        are answered from the minimal decomposition into noisy nodes (the plain tree
        mechanism, as in PAK and NM-E).

    Notes
    -----
    The only state that grows with the stream is the per-level node arrays (noisy sums
    ``N``, bottom-up estimates ``H``, consistent sums ``Nbar``): about ``n / g * b/(b-1)``
    nodes after n values. Everything else has a fixed size (a partial leaf of at most g
    values, at most b pending child sums per level).
    """

    def __init__(
        self, branching: int, levels: int, leaf_size: int, scale: float, *, consistency: bool = True
    ) -> None:
        self.branching = check_integer(branching, "branching", low=2, high=MAX_ENTRIES)
        self.levels = check_integer(levels, "levels", low=1, high=64)
        self.leaf_size = check_integer(leaf_size, "leaf_size", low=1, high=MAX_ENTRIES)
        self.scale = check_real(scale, "scale", low=0.0)
        # the fixed buffers below: one leaf and (levels x branching) children
        check_memory(
            8.0 * (self.leaf_size + self.levels * self.branching),
            "branching, levels and leaf_size",
            "OnlineHierarchy",
        )
        if self.branching ** (self.levels - 1) > 2**62:
            raise ValueError(
                f"levels must keep branching**(levels - 1) below 2**62, got levels = {self.levels}"
                f" with branching = {self.branching}"
            )
        self.consistency = bool(consistency)
        b, L, g = self.branching, self.levels, self.leaf_size
        self._a, self._c = hay_weights(b, L)
        self._root_var = subtree_root_variances(b, L)
        self._span = b ** np.arange(L, dtype=np.int64)  # leaves per node at each level
        # fixed-size buffers: the open leaf and the true sums of completed nodes whose
        # parent is still open (level k holds children of the open level-(k+1) node)
        self._leaf_buf = np.zeros(g)
        self._leaf_fill = 0
        self._child_buf = np.zeros((L, b))
        self._child_fill = np.zeros(L, dtype=np.int64)
        self._noisy = [_Grow() for _ in range(L)]
        self._hier = [_Grow() for _ in range(L)]
        self._cons = [_Grow() for _ in range(L)]
        self._done = np.zeros(L, dtype=np.int64)  # node counts at the last refresh
        self._leafcum = _Grow(np.zeros(1))  # prefix sums of the answer leaves, valid to _done[0]
        self._levelcum: list[np.ndarray] | None = None  # cache for decomposition answers

    # ------------------------------------------------------------------ ingestion
    @property
    def counts(self) -> np.ndarray:
        """Number of completed nodes per level."""
        return np.array([a.size for a in self._noisy], dtype=np.int64)

    @property
    def n_values(self) -> int:
        """Number of values ingested."""
        return int(self._noisy[0].size) * self.leaf_size + self._leaf_fill

    @property
    def node_variance(self) -> float:
        """Variance of one node's noise, ``2 scale^2``."""
        return 2.0 * self.scale**2

    def add(self, values: np.ndarray, rng: np.random.Generator) -> None:
        """Ingest clipped values (float64, 1-D); completes and releases nodes."""
        g, b, L = self.leaf_size, self.branching, self.levels
        x = check_array(values, "values")
        if x.size == 0:
            return
        fill = self._leaf_fill
        total = fill + x.size
        n_leaves = total // g
        if n_leaves == 0:
            self._leaf_buf[fill:total] = x
            self._leaf_fill = total
            return
        if fill:
            head = np.concatenate([self._leaf_buf[:fill], x[: n_leaves * g - fill]])
        else:
            head = x[: n_leaves * g]
        rest = x[n_leaves * g - fill :]
        self._leaf_buf[: rest.size] = rest
        self._leaf_fill = rest.size
        true = [head.reshape(n_leaves, g).sum(axis=1) if g > 1 else head.copy()]
        for k in range(1, L):
            below = true[k - 1]
            if below.size == 0:  # nothing completed below: nothing can complete here
                true.append(below)
                continue
            fk = int(self._child_fill[k - 1])
            if fk:
                below = np.concatenate([self._child_buf[k - 1, :fk], below])
            n_k = below.size // b
            left = below[n_k * b :]
            self._child_buf[k - 1, : left.size] = left
            self._child_fill[k - 1] = left.size
            true.append(below[: n_k * b].reshape(n_k, b).sum(axis=1))
        # the top level has no parent: nothing pends there
        old = self.counts
        sizes = np.array([t.size for t in true], dtype=np.int64)
        noise = self._draw_noise(old, sizes, rng)
        for k in range(L):
            if sizes[k] == 0:
                continue
            n_k = true[k] + noise[k]
            self._noisy[k].append(n_k)
            if k == 0:
                h_k = n_k
            else:
                lo, hi = old[k] * b, (old[k] + sizes[k]) * b
                kids = self._hier[k - 1].view[lo:hi].reshape(sizes[k], b).sum(axis=1)
                h_k = self._a[k] * n_k + self._c[k] * kids
            self._hier[k].append(h_k)
            self._cons[k].reserve(old[k] + sizes[k])
        self._levelcum = None

    def _draw_noise(
        self, old: np.ndarray, sizes: np.ndarray, rng: np.random.Generator
    ) -> list[np.ndarray]:
        """Laplace noise for the new nodes, drawn in (completion leaf, level) order."""
        sizes_l = sizes.tolist()
        if self.scale == 0.0:
            return [np.zeros(s) for s in sizes_l]
        draws = rng.laplace(0.0, self.scale, size=sum(sizes_l))
        busy = [k for k, s in enumerate(sizes_l) if s]
        if len(busy) == 1:  # only one level completed nodes: they are drawn in index order
            return [draws if s else np.zeros(0) for s in sizes_l]
        old_l = old.tolist()
        span = self._span.tolist()
        out = []
        for k, s in enumerate(sizes_l):
            if s == 0:
                out.append(np.zeros(0))
                continue
            j = np.arange(old_l[k], old_l[k] + s, dtype=np.int64)
            end = (j + 1) * span[k] - 1  # index of the last leaf of each node
            # rank among this batch's new nodes: the new nodes of every level that ended at
            # an earlier leaf (end // span - old of them; zero for levels without new
            # nodes), plus the k lower-level nodes that end at the same leaf
            pos = np.full(s, k, dtype=np.int64)
            for kk in busy:
                pos += end // span[kk] - old_l[kk]
            out.append(draws[pos])
        return out

    # ------------------------------------------------------------------ consistency
    def refresh(self) -> None:
        """Bring the consistent estimates up to date (top-down below every new root only)."""
        if not self.consistency:
            return
        b, L = self.branching, self.levels
        counts = self.counts
        if np.array_equal(counts, self._done):
            return
        parents: list[tuple[int, int]] = []  # index runs recomputed at the level above
        for k in range(L - 1, -1, -1):
            r0 = 0 if k == L - 1 else int(counts[k + 1]) * b  # first root at level k
            r1 = int(counts[k])
            nbar = self._cons[k].data
            hk = self._hier[k].view
            runs: list[tuple[int, int]] = []
            for p_lo, p_hi in parents:  # top-down below recomputed parents
                kids = hk[p_lo * b : p_hi * b].reshape(p_hi - p_lo, b)
                parent = self._cons[k + 1].data[p_lo:p_hi]
                nbar[p_lo * b : p_hi * b] = (
                    kids + ((parent - kids.sum(axis=1)) / b)[:, None]
                ).ravel()
                runs.append((p_lo * b, p_hi * b))
            new_root = max(r0, int(self._done[k]))  # older roots are unchanged
            if new_root < r1:
                nbar[new_root:r1] = hk[new_root:r1]  # a root's Nbar is its H
                runs.append((new_root, r1))
            self._cons[k].size = r1
            parents = runs
        if parents:
            self._update_leafcum(min(lo for lo, _ in parents))
        self._done = counts

    def _update_leafcum(self, lo: int) -> None:
        leaves = self._cons[0].view
        cum = self._leafcum
        cum.reserve(leaves.size + 1)
        cum.data[lo + 1 : leaves.size + 1] = cum.data[lo] + np.cumsum(leaves[lo:])
        cum.size = leaves.size + 1

    # ------------------------------------------------------------------ answers
    def leaf_estimates(self) -> np.ndarray:
        """Return the leaves the answers use: consistent ``Nbar`` (or the noisy sums)."""
        if self.consistency:
            self.refresh()
            return self._cons[0].view
        return self._noisy[0].view

    def leaf_range_sums(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Estimated sums over the complete leaves ``[lo, hi)`` (vectorized over queries)."""
        n = int(self._noisy[0].size)  # complete leaves
        lo = check_array(lo, "lo", ndim=(0, 1), integer=True, low=0, high=n)
        hi = check_array(hi, "hi", ndim=(0, 1), integer=True, low=0, high=n)
        if lo.shape != hi.shape or np.any(hi < lo):
            raise ValueError(
                f"hi must be >= lo (same shape), got lo {lo.tolist()} and hi {hi.tolist()}"
            )
        if self.consistency:
            self.refresh()
            cum = self._leafcum.view
            return cum[hi] - cum[lo]
        return self._decompose(lo, hi)[0]

    def _cumulative(self) -> list[np.ndarray]:
        if self._levelcum is None:
            self._levelcum = [np.concatenate([[0.0], np.cumsum(a.view)]) for a in self._noisy]
        return self._levelcum

    def _decompose(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, list]:
        """Minimal node decomposition of leaf ranges: (sum, node count, level-0 runs)."""
        b, L = self.branching, self.levels
        cum = self._cumulative()
        lo = lo.copy()
        hi = hi.copy()
        total = np.zeros(lo.shape)
        count = np.zeros(lo.shape, dtype=np.int64)
        runs: list[tuple[np.ndarray, np.ndarray]] = []
        for k in range(L):
            active = lo < hi
            if k == L - 1:
                take_lo, take_hi = np.where(active, lo, 0), np.where(active, hi, 0)
                total += cum[k][take_hi] - cum[k][take_lo]
                count += take_hi - take_lo
                if k == 0:
                    runs.append((take_lo, take_hi))
                break
            up = -(-lo // b) * b
            dn = hi // b * b
            whole = active & (up >= dn)  # no complete parent inside: take the run as is
            split = active & ~whole
            a1 = np.where(whole, lo, np.where(split, lo, 0))
            a2 = np.where(whole, hi, np.where(split, up, 0))
            b1 = np.where(split, dn, 0)
            b2 = np.where(split, hi, 0)
            total += cum[k][a2] - cum[k][a1] + cum[k][b2] - cum[k][b1]
            count += (a2 - a1) + (b2 - b1)
            if k == 0:
                runs = [(a1, a2), (b1, b2)]
            lo = np.where(split, up // b, 0)
            hi = np.where(split, dn // b, 0)
        return total, count, runs

    # ------------------------------------------------------------------ variance
    def roots(self) -> list[tuple[int, int, int]]:
        """Maximal complete subtrees as ``(level, first index, stop index)`` runs."""
        counts = self.counts
        out = []
        for k in range(self.levels - 1, -1, -1):
            r0 = 0 if k == self.levels - 1 else int(counts[k + 1]) * self.branching
            if counts[k] > r0:
                out.append((k, r0, int(counts[k])))
        return out

    def weights_variance(
        self, leaf_weights: np.ndarray, lo: int | None = None, hi: int | None = None
    ) -> float:
        """Variance of ``sum_t leaf_weights[t] * leaf_t + [sum over complete leaves lo..hi]``.

        ``leaf_weights`` (dense, one per complete leaf) weighs the answer leaves (consistent
        or noisy). ``lo, hi`` add a leaf range answered by :meth:`leaf_range_sums`; with
        consistency it is folded into the weights, without it the decomposition's nodes
        are counted (and their overlap with the weights on level 0).
        """
        w = np.asarray(leaf_weights, dtype=np.float64)
        if self.consistency:
            self.refresh()
            if lo is not None and hi is not None and hi > lo:
                w = w.copy()
                w[lo:hi] += 1.0
            return self.node_variance * self._consistent_weight_norm(w)
        total = float(np.dot(w, w))
        if lo is not None and hi is not None and hi > lo:
            _, count, runs = self._decompose(np.array([lo]), np.array([hi]))
            total += float(count[0])
            cw = np.concatenate([[0.0], np.cumsum(w)])
            for r_lo, r_hi in runs:
                total += 2.0 * float(cw[r_hi[0]] - cw[r_lo[0]])
        return self.node_variance * total

    def _consistent_weight_norm(self, w: np.ndarray) -> float:
        """``||M^T w||^2`` for the consistency map M from node noises to answer leaves."""
        b = self.branching
        total = 0.0
        for k, r0, r1 in self.roots():
            span = int(self._span[k])
            seg = w[r0 * span : r1 * span].reshape(r1 - r0, span)
            hi, lo = seg.max(axis=1), seg.min(axis=1)
            const = hi == lo
            # a uniformly weighted subtree answers c * H(root)
            total += float(np.sum(hi[const] ** 2)) * self._root_var[k]
            for r in np.flatnonzero(~const).tolist():
                total += self._adjoint_norm(seg[r], k, b)
        return total

    def _adjoint_norm(self, w: np.ndarray, top: int, b: int) -> float:
        """Squared norm of the node coefficients of ``w . Nbar_leaves`` in one subtree."""
        g_nbar = w
        t_grad = []  # gradient w.r.t. H from the top-down pass, per level 0..top
        for _ in range(top):
            grouped = g_nbar.reshape(-1, b)
            mean = grouped.mean(axis=1)
            t_grad.append((grouped - mean[:, None]).ravel())
            g_nbar = mean  # d Nbar(child) / d Nbar(parent) = 1/b, summed over b children
        t_grad.append(g_nbar)  # at the root Nbar = H
        total = 0.0
        g_h = t_grad[top]
        for k in range(top, -1, -1):
            total += float(np.dot(g_h, g_h)) * self._a[k] ** 2
            if k > 0:
                g_h = t_grad[k - 1] + self._c[k] * np.repeat(g_h, b)
        return total

    # ------------------------------------------------------------------ state
    def state(self) -> dict[str, Any]:
        """Arrays and scalars that reproduce this hierarchy exactly (see :meth:`from_state`)."""
        self.refresh()
        # fixed-size buffers, zeroed past their fill so equal streams give equal states
        leaf_buf = np.zeros_like(self._leaf_buf)
        leaf_buf[: self._leaf_fill] = self._leaf_buf[: self._leaf_fill]
        child_buf = np.zeros_like(self._child_buf)
        for k, f in enumerate(self._child_fill.tolist()):
            child_buf[k, :f] = self._child_buf[k, :f]
        out: dict[str, Any] = {
            "leaf_buffer": leaf_buf,
            "leaf_fill": int(self._leaf_fill),
            "child_buffer": child_buf,
            "child_fill": self._child_fill.copy(),
        }
        for k in range(self.levels):
            out[f"tree_noisy_{k}"] = self._noisy[k].view.copy()
            out[f"tree_bottom_up_{k}"] = self._hier[k].view.copy()
            out[f"tree_consistent_{k}"] = self._cons[k].view.copy()
        out["tree_leaf_prefix"] = self._leafcum.view.copy()
        return out

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state` output; every array's shape is checked against the others."""
        b, L, g = self.branching, self.levels, self.leaf_size

        def arr(key: str, shape: tuple[int, ...] | None = None, integer: bool = False) -> Any:
            if key not in state:
                raise ValueError(f"state must hold {key!r} (OnlineHierarchy.state() output)")
            out = check_array(
                state[key], f"state {key}", ndim=len(shape) if shape else 1, integer=integer
            )
            if shape is not None and out.shape != shape:
                raise ValueError(f"state {key} must have shape {shape}, got {out.shape}")
            return out

        leaf_buf = arr("leaf_buffer", (g,))
        leaf_fill = check_integer(state.get("leaf_fill"), "state leaf_fill", low=0, high=g - 1)
        child_buf = arr("child_buffer", (L, b))
        child_fill = arr("child_fill", (L,), integer=True)
        if child_fill.size and (child_fill.min() < 0 or child_fill.max() >= b):
            raise ValueError(f"state child_fill must be in [0, {b - 1}], got {child_fill.tolist()}")
        n_nodes = arr("tree_noisy_0").size  # complete leaves; level k has n_nodes // b**k
        levels = []
        for k in range(L):
            size = n_nodes // b**k
            levels.append(
                (
                    arr(f"tree_noisy_{k}", (size,)),
                    arr(f"tree_bottom_up_{k}", (size,)),
                    arr(f"tree_consistent_{k}"),
                )
            )
            if levels[-1][2].size > size:
                raise ValueError(f"state tree_consistent_{k} must have at most {size} entries")
        self._leaf_buf, self._leaf_fill = leaf_buf, leaf_fill
        self._child_buf, self._child_fill = child_buf, child_fill
        for k, (noisy, hier, cons) in enumerate(levels):
            self._noisy[k] = _Grow(noisy)
            self._hier[k] = _Grow(hier)
            self._cons[k] = _Grow(cons)
        if self.consistency:
            self._done = np.array([c.size for c in self._cons], dtype=np.int64)
            self._leafcum = _Grow(arr("tree_leaf_prefix", (n_nodes + 1,)))
        self._levelcum = None
