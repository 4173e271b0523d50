"""Analytic variances of linear queries of the plain numerical estimates (server side).

A linear query of a Distribution is ``w . p`` for a weight vector ``w`` on its B bucket
masses: ``cdf(x)`` (w_j = the fraction of bucket j below x), ``range(a, b)`` and ``mean()``
(w_j = bucket centers). For the mechanisms whose plain estimate is a linear function of
per-user reports (CFO binning, the hierarchical histogram with constrained inference,
HaarHRR) the variance of ``w . p`` is propagated exactly from the per-level oracles:

* a pure frequency oracle's estimate is ``f^ = (1/n) sum_u y_u``, ``y = (s - q) / (p - q)``
  with ``s`` the support indicator of the report (FO17 section 4); for iid users
  ``Var[u . f^] = (sum_v f_v E[(u . y)^2 | v] - (u . f)^2) / n`` with
  ``E[(u . y)^2 | v] = Var[u . s | v] / (p - q)^2 + u_v^2``. ``Var[u . s | v]`` is
  ``p u_v^2 + q (U2 - u_v^2) - (p u_v + q (U1 - u_v))^2`` for GRR (one item reported), and
  ``p(1-p) u_v^2 + q(1-q) (U2 - u_v^2)`` for unary encoding (independent bits) and local
  hashing (an ideal hash puts every other item in the support independently with
  probability 1/g; over plain item indices the family's triple collisions add a term,
  :meth:`ldpkit.frequency.hashing.LocalHashing._support_variance`), with ``U1 = sum u``,
  ``U2 = sum u^2``;
* constrained inference (Hay et al. 2010) is linear in the level estimates: the query is
  pulled back to the levels by the adjoint of its two passes (:func:`ci_adjoint`);
* HaarHRR: a depth-t report adds ``s' (H u)_j / (2p - 1)`` to ``u . D~_t``, whose square is
  ``||u||^2 / (2p - 1)^2`` on average over the uniform column j (``H H = K I``), so
  ``Var[u . D~_t] = (||u||^2 / (2p-1)^2 - (u . D_t)^2) / n_t``.

The unknown true frequencies are replaced by the estimate (negatives clipped): a plug-in
that changes the variance only through its small frequency-dependent part.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "ci_adjoint",
    "cfo_query_variances",
    "haar_query_variances",
    "oracle_query_variances",
    "oracle_supported",
    "oracles_reason",
    "tree_query_variances",
]


def _plugin(masses: np.ndarray, size: int) -> np.ndarray:
    """Non-negative masses summing to 1, zero-padded to ``size``."""
    f = np.zeros(size)
    m = np.maximum(np.asarray(masses, dtype=np.float64), 0.0)
    total = m.sum()
    f[: m.size] = m / total if total > 0 else 1.0 / m.size
    return f


def oracle_query_variances(oracle: Any, n: int, f: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``Var[u[:, i] . f^]`` for every column i, f^ the oracle's estimate from n iid users.

    ``f`` are the true (plug-in) item frequencies, ``u`` has shape (d, m).
    """
    if not oracle_supported(oracle):  # pragma: no cover - guarded by the specs' reasons
        raise TypeError(f"no analytic query variance for oracle {type(oracle).__name__}")
    p, q = float(oracle.p), float(oracle.q)
    sq = u * u  # u_v^2, (d, m)
    var_s = oracle._support_variance(u)  # Var[u . s | v], the oracle's own law
    second = f @ (var_s / (p - q) ** 2 + sq)
    first = f @ u
    return np.maximum(second - first * first, 0.0) / n


def oracle_supported(oracle: Any) -> bool:
    """Whether ``oracle`` states the variance of its support indicator (``_support_variance``)."""
    return callable(getattr(oracle, "_support_variance", None))


def _ci_coefficients(variances: np.ndarray, branching: int) -> tuple[np.ndarray, np.ndarray]:
    """Return per level k < h the coefficients of z[k] = a_k x[k] + b_k S z[k+1].

    The bottom-up pass of :func:`~ldpkit.numeric.hierarchy.constrained_inference`.
    """
    h = variances.size - 1
    prec = np.where(np.isinf(variances), 0.0, 1.0 / variances)
    a, b = np.zeros(h), np.zeros(h)
    p_below = prec[h]
    for k in range(h - 1, -1, -1):
        p_sum = p_below / branching
        total = prec[k] + p_sum
        if total > 0:
            a[k], b[k] = prec[k] / total, p_sum / total
        else:
            a[k], b[k] = 0.0, 1.0
        p_below = total
    return a, b


def ci_adjoint(w: np.ndarray, variances: Any, branching: int) -> list[np.ndarray]:
    """Pull leaf weights back through constrained inference with a fixed root.

    ``constrained_inference(levels, B, variances=v, root=r)[-1]`` is affine in
    ``levels[1:]``; returns ``g[k]`` (k = 0..h, ``g[0]`` zero) with
    ``w . leaves = sum_k g[k] . levels[k] + const``. ``w`` has shape (B^h, m).
    """
    var = np.asarray(variances, dtype=np.float64)
    h = var.size - 1
    a, b = _ci_coefficients(var, branching)

    def s(x: np.ndarray) -> np.ndarray:  # sum of children
        return x.reshape(-1, branching, x.shape[1]).sum(axis=1)

    def r(x: np.ndarray) -> np.ndarray:  # repeat to children
        return np.repeat(x, branching, axis=0)

    g_z = [np.zeros((branching**k, w.shape[1])) for k in range(h + 1)]
    g_out = np.asarray(w, dtype=np.float64)
    # top-down pass: out[k] = z[k] - R S z[k] / B + R out[k - 1] / B
    for k in range(h, 0, -1):
        sg = s(g_out)
        g_z[k] += g_out - r(sg) / branching
        g_out = sg / branching
    # bottom-up pass (z[0] is replaced by the known root): z[k] = a_k x[k] + b_k S z[k+1]
    g_x = [np.zeros_like(g) for g in g_z]
    for k in range(1, h):
        g_x[k] = a[k] * g_z[k]
        g_z[k + 1] += b[k] * r(g_z[k])
    if h >= 1:
        g_x[h] = g_z[h]
    return g_x


def oracles_reason(oracles: Any) -> str | None:
    """Why the given frequency oracles have no analytic query variance (None when all do)."""
    bad = sorted({o.name for o in oracles if not oracle_supported(o)})
    return f"no analytic variance for oracles {bad}" if bad else None


def _centered(w: Any) -> np.ndarray:
    """Return the weights the raw leaves see: ``w - mean(w)``.

    The estimate is ``m + (1 - sum m) / B`` for the raw leaves m
    (:meth:`Distribution.from_estimate`).
    """
    w = np.asarray(w, dtype=np.float64)
    return w - w.mean(axis=0)


def cfo_query_variances(spec: Any, stats: Any, masses: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Variance of ``w[:, i] . p`` for CFO binning: one oracle over the B buckets.

    ``masses`` is the estimate itself (for the plug-in frequencies); ``w`` has shape (B, m).
    """
    f = _plugin(masses, spec.buckets)
    return oracle_query_variances(spec.frequency_oracle, stats.n, f, _centered(w))


def _leaf_weights(spec: Any, w: np.ndarray) -> np.ndarray:
    w = _centered(w)
    wl = np.zeros((spec.leaves, w.shape[1]))
    wl[: w.shape[0]] = w
    return wl


def haar_query_variances(spec: Any, stats: Any, masses: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Variance of ``w[:, i] . p`` for HaarHRR (one depth per user, see the module notes)."""
    wl = _leaf_weights(spec, w)
    total = np.zeros(wl.shape[1])
    h = spec.height
    signal = spec.signal
    node_w = wl  # weight sums per node, from the leaves up
    node_f = _plugin(masses, spec.leaves)
    for t in range(h - 1, -1, -1):
        pairs = node_w.reshape(-1, 2, wl.shape[1])
        fpairs = node_f.reshape(-1, 2)
        u = (pairs[:, 0] - pairs[:, 1]) / 2.0 ** (h - t)
        d_true = fpairs[:, 0] - fpairs[:, 1]
        n_t = int(stats.level_n[t])
        if n_t > 0:
            uu = (u * u).sum(axis=0)
            ud = d_true @ u
            total += np.maximum(uu / signal**2 - ud * ud, 0.0) / n_t
        node_w = pairs.sum(axis=1)
        node_f = fpairs.sum(axis=1)
    return total


def tree_query_variances(spec: Any, stats: Any, masses: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Variance of ``w[:, i] . p`` for the hierarchical histogram with constrained inference."""
    wl = _leaf_weights(spec, w)
    f_leaves = _plugin(masses, spec.leaves)
    total = np.zeros(wl.shape[1])
    var = spec.level_variances(stats)
    var[0] = 1.0
    g = ci_adjoint(wl, var, spec.branching)
    for k in range(1, spec.height + 1):
        n_k = int(stats.level_n[k - 1])
        if n_k == 0:
            continue
        f_k = f_leaves.reshape(spec.level_size(k), -1).sum(axis=1)
        total += oracle_query_variances(spec.level_oracle(k), n_k, f_k, g[k])
    return total


def normal_quantile(alpha: float) -> float:
    """``z_{1 - alpha/2}``, the two-sided normal critical value."""
    from scipy import special

    return float(-special.ndtri(alpha / 2.0))
