"""The collector's dashboard and the JavaScript client in a real browser (Debian's chromium).

One run (about 20-40 s): a collector on 127.0.0.1 with bearer tokens and CORS for the test
page's origin; a static server on 127.0.0.1 serves ``tests/browser/sender.html``, which uses
``clients/js`` (``fetchSpec`` + ``send``) to randomize and POST 33,000 reports to five
collections (GRR, OLH, OUE, Square Wave, PM); then the dashboard (``GET /``) is loaded, given a read token through its token
field, and read back from the DOM. Checked:

- the dashboard shows every collection with the right n and batches, and its estimates are
  the server's (same numbers) with the truth inside each 95% interval (seeded coins:
  reproducible) or within 5.5 standard errors (crypto.getRandomValues coins);
- the JS reports decoded by the Python server are unbiased (z-tests on the merged Stats),
  and the same test fails when they are decoded with epsilon x 1.3;
- distribution and mean collections (Square Wave, PM: numbers randomized by clients/js in
  the page too) render their density, quantiles and interval, the mean within 5.5 standard
  errors of the truth; an empty collection says so, and a batch POSTed while the page is open
  shows up by polling, without a reload;
- a heavy-hitter collection (PEM: strings randomized by clients/js in the page) shows its
  discovered top-k as horizontal bars with interval whiskers, the server's numbers, the
  frequent strings found; an open-domain collection (HCMS) does the same for the candidates
  named in the dashboard's URL (``?candidates.NAME=``), the truth within 5.5 standard errors;
- the token is asked for (401), kept in sessionStorage across a reload, and ``?alpha=``
  gives simultaneous (Bonferroni, family-wise 1e-6) intervals that hold the truth of every item;
- the pages load nothing from another origin (works offline) and log no errors;
- a screenshot is saved as ``results/dashboard.png``.

Needs node, ``/usr/bin/chromium`` (or ``$CHROMIUM``) and ``npm ci`` in tests/browser
(playwright-core). Skips without them, except in CI (``CI`` set), where it fails:
``.ci/run`` installs chromium and nodejs and ``make test`` runs ``npm ci``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import socket
import subprocess
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from _chromium import BROWSER, CHROMIUM, NODE, PLAYWRIGHT_MISSING, needs_playwright
from ldpkit.frequency import GRR

ROOT = Path(__file__).resolve().parents[1]
pytestmark = needs_playwright

READ_TOKEN = "dashboard-read-token"
PAGE_TOKEN = "sender-page-token"
# (collection, spec, counts, seed, labels): seeded coins make the checks reproducible;
# seed None exercises crypto.getRandomValues. Skewed counts give the epsilon x 1.3 check
# power: over 20 simulated runs of each its max |z| was >= 7.5 (mean 9.3-10.7), against
# <= 3.7 under the right epsilon.
SEED = 20261123
# Bonferroni over the 19 items of the three collections: intervals that hold all at once
# with probability >= 1 - 1e-6 (95% intervals item by item miss ~1 item in 20 by design, and
# the OUE collection's coins come from crypto.getRandomValues, so a family-wise 95% level
# would fail about one CI run in 80 by chance).
SIMULTANEOUS = 1e-6 / 19


def _plan() -> list[tuple[str, Any, np.ndarray, int | None, bool]]:
    from ldpkit.frequency import OLH, OUE

    return [
        (
            "grr",
            GRR(epsilon=1.0, domain_size=6),
            np.array([7000, 1500, 750, 500, 200, 50]),
            SEED,
            True,
        ),
        (
            "olh",
            OLH(epsilon=1.0, domain_size=8, hash_range=4),
            np.array([6000, 1500, 1000, 700, 400, 250, 100, 50]),
            SEED + 1,
            False,
        ),
        (
            "oue",
            OUE(epsilon=1.0, domain_size=5),
            np.array([3500, 700, 400, 300, 100]),
            None,
            False,
        ),
    ]


LIVE = GRR(epsilon=1.0, domain_size=3)


def _numerical() -> dict[str, tuple[Any, np.ndarray]]:
    """Collections of the other two kinds (numbers randomized by clients/js in the page):
    their charts and numbers must render too."""
    from ldpkit.numeric import PiecewiseMechanism, SquareWave

    # three decimals: the values travel in the page's URL fragment as JSON
    values = (np.random.default_rng(SEED).beta(2.0, 5.0, 4000) * 100.0).round(3)
    return {
        "sw": (SquareWave(epsilon=1.0, low=0.0, high=100.0, buckets=32), values),
        "pm": (PiecewiseMechanism(epsilon=1.0, low=0.0, high=100.0), values),
    }


WORDS = ["hello", "help", "world", "zoë", "🙂"]
WORD_COUNTS = [1600, 1000, 700, 400, 300]  # n = 4000
CANDIDATES = ["hello", "zoë", "🙂", "nobody"]


def _strings() -> dict[str, Any]:
    """Return the open-vocabulary collections' specs.

    Their strings are randomized by clients/js in the page: WORDS[v] sent WORD_COUNTS[v]
    times.
    """
    from ldpkit.discovery import PEM
    from ldpkit.frequency import HCMS

    return {
        "words": PEM(epsilon=4.0, max_length=8, top_k=3),
        "sketch": HCMS(epsilon=2.0, width=64, depth=256),
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def static_server() -> Iterator[str]:
    """The repository over HTTP on 127.0.0.1 (the sender page imports clients/js from it)."""
    handler = functools.partial(_QuietHandler, directory=str(ROOT))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(SimpleHTTPRequestHandler):
    extensions_map: ClassVar[dict[str, str]] = {
        **SimpleHTTPRequestHandler.extensions_map,
        ".js": "text/javascript",
        ".mjs": "text/javascript",
    }

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def collector(tmp_path: Path, static_server: str, serve_app: Any) -> str:
    """Serve every test collection on 127.0.0.1 with tokens and CORS for the sender page."""
    pytest.importorskip("uvicorn")
    from ldpkit import Encoder
    from ldpkit.service import Collection, create_app
    from ldpkit.service.auth import parse_tokens

    collections = {}
    for name, spec, _counts, _seed, labels in _plan():
        encoder = Encoder([f"item-{c}" for c in "abcdef"]) if labels else None
        collections[name] = Collection(spec, encoder=encoder)
    for name, (spec, _values) in _numerical().items():
        collections[name] = Collection(spec)
    for name, spec in _strings().items():
        collections[name] = Collection(spec)
    collections["live"] = Collection(LIVE)  # empty until the browser POSTs to it
    tokens = parse_tokens(
        [
            {
                "name": "page",
                "scopes": ["ingest", "read"],
                "sha256": hashlib.sha256(PAGE_TOKEN.encode()).hexdigest(),
            },
            {
                "name": "analyst",
                "scopes": ["read"],
                "sha256": hashlib.sha256(READ_TOKEN.encode()).hexdigest(),
            },
        ]
    )
    app = create_app(
        collections,
        f"sqlite:///{tmp_path / 'collector.db'}",
        tokens=tokens,
        cors_origins=[static_server],
    )
    return serve_app(app)


def _get(url: str, token: str = READ_TOKEN) -> Any:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _max_z(spec: Any, stats: Any, truth: np.ndarray) -> float:
    from ldpkit.spec import Stats

    # the same sufficient statistics read under ``spec`` (which may not be the one used)
    est = spec.estimate(Stats(spec, stats.n, **stats.arrays))
    return float(np.max(np.abs((est.frequencies - truth) / np.sqrt(est.variance))))


def _tick_value(text: str) -> float:
    """A tick label of charts.js's fmt ("750", "12.3k", "2.50M") as a number."""
    scale = {"k": 1e3, "M": 1e6}.get(text[-1:], 1.0)
    return float(text[:-1] if scale != 1.0 else text) * scale


@pytest.mark.slow  # ~30 s: chromium start, 25,000 reports, three page loads
def test_dashboard_shows_js_reports(collector: str, static_server: str) -> None:
    """Show the JS clients' reports on the dashboard, as the module docstring lists."""
    assert not PLAYWRIGHT_MISSING, (
        f"CI must have {', '.join(PLAYWRIGHT_MISSING)} (.ci/run installs them)"
    )
    assert NODE is not None
    from ldpkit.io import reports_to_dict
    from ldpkit.spec import Stats

    plan = _plan()
    steps = [
        {
            "collection": name,
            "counts": counts.tolist(),
            "seed": seed,
            "labels": labels,
            "batch": 1000,
        }
        for name, _spec, counts, seed, labels in plan
    ]
    steps += [
        {"collection": name, "values": values.tolist(), "seed": SEED + 7, "batch": 1000}
        for name, (_spec, values) in _numerical().items()
    ]
    steps += [
        {
            "collection": name,
            "counts": WORD_COUNTS,
            "words": WORDS,
            "seed": SEED + 9,
            "batch": 1000,
        }
        for name in _strings()
    ]
    query = urllib.parse.urlencode({"collector": collector, "token": PAGE_TOKEN})
    fragment = urllib.parse.urlencode({"plan": json.dumps(steps)})
    screenshot = ROOT / "results" / "dashboard.png"
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    args = {
        "chromium": CHROMIUM,
        "senderUrl": f"{static_server}/tests/browser/sender.html?{query}#{fragment}",
        "dashboardUrl": f"{collector}/?refresh=1&"
        + urllib.parse.urlencode({"candidates.sketch": ",".join(CANDIDATES)}),
        "readToken": READ_TOKEN,
        "expected": {
            **{name: int(counts.sum()) for name, _s, counts, _seed, _l in plan},
            **{name: values.size for name, (_spec, values) in _numerical().items()},
            **{name: sum(WORD_COUNTS) for name in _strings()},
            "live": 0,
        },
        "screenshot": str(screenshot),
        "alpha": SIMULTANEOUS,
        "live": {
            "collection": "live",
            "body": reports_to_dict(LIVE.randomize(np.arange(300) % 3, rng=SEED)),
            "token": PAGE_TOKEN,
            "nAfter": 300,
        },
    }
    done = subprocess.run(
        [NODE, "drive.mjs", json.dumps(args)],
        cwd=BROWSER,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout)
    print("sent from chromium:", json.dumps(out["sent"]))  # per collection: n, batches, seconds
    assert out["foreignRequests"] == [], "the pages must not load anything from another origin"
    assert out["consoleErrors"] == []
    assert "bearer token" in out["authPrompt"] and out["stored"], "token field (sessionStorage)"
    assert out["authMessageAfterReload"] == "token set for this tab"
    assert out["docsTitle"].startswith(("GET ", "POST ", "DELETE ")), "GET /docs lists routes"
    assert screenshot.stat().st_size > 10_000 and screenshot.read_bytes()[:4] == b"\x89PNG"

    table = {row["collection"]: row for row in out["table"]}
    assert [row["collection"] for row in out["table"]] == [
        "grr",
        "olh",
        "oue",
        "sw",
        "pm",
        "words",
        "sketch",
        "live",
    ]
    # an empty collection, then live polling (?refresh=1): a new batch shows without reload
    assert out["liveBefore"] == "no reports yet"
    assert out["liveBars"] == 3 and out["liveSeconds"] < 20
    for name, spec, counts, _seed, _labels in plan:
        n = int(counts.sum())
        batches = -(-n // 1000)
        assert out["sent"][name] == {**out["sent"][name], "stored": n, "batches": batches}
        assert (table[name]["n"], table[name]["batches"]) == (n, batches)
        shown = out["estimates"][name]
        assert shown["kind"] == "frequency" and shown["n"] == n
        rows = sorted(shown["rows"], key=lambda r: r["index"])
        assert [r["index"] for r in rows] == list(range(counts.size))
        est = np.array([r["estimate"] for r in rows])
        se = np.array([r["stdError"] for r in rows])
        low = np.array([r["ciLow"] for r in rows])
        high = np.array([r["ciHigh"] for r in rows])
        truth = counts / n
        # the dashboard shows the server's estimate and its 95% intervals
        api = _get(f"{collector}/v1/collections/{name}/estimate")
        np.testing.assert_allclose(est, api["frequencies"], rtol=1e-12)
        np.testing.assert_allclose(low, api["ci_low"], rtol=1e-12)
        np.testing.assert_allclose(high, est + 1.959964 * se, rtol=1e-5, atol=1e-12)
        assert np.max(np.abs(est - truth) / se) <= 5.5, (name, est, truth, se)
        # the dashboard reloaded with ?alpha=: simultaneous intervals hold the truth
        at = out["estimatesAtAlpha"][name]
        assert at["alpha"] == pytest.approx(SIMULTANEOUS)
        lo = np.array([r["ciLow"] for r in sorted(at["rows"], key=lambda r: r["index"])])
        hi = np.array([r["ciHigh"] for r in sorted(at["rows"], key=lambda r: r["index"])])
        assert np.all((lo <= truth) & (truth <= hi)), (name, est, lo, hi, truth)
        assert np.all(lo < low) and np.all(hi > high)  # wider than the 95% ones
        chart = out["charts"][name]
        assert chart["bars"] == counts.size and chart["errorBars"] == 3 * counts.size
        assert chart["seriesPoints"] >= 1
        # the time series has labelled scales: counts on the right (from 0, up to at least
        # the bucket's n), the estimate on the left, bucket starts below
        count_ticks = [_tick_value(t) for t in chart["seriesCountTicks"]]
        most = max(b["n"] for b in _get(f"{collector}/v1/collections/{name}/buckets")["buckets"])
        assert count_ticks[0] == 0 and count_ticks[-1] >= most and len(count_ticks) >= 2
        assert chart["seriesTimeTicks"] >= 1
        left, right, bottom = chart["seriesAxisTitles"]
        assert (left, right) == ("frequency per bucket", "reports per bucket")
        assert bottom.startswith("bucket start (UTC, ")

        # unbiased decoding of the JS reports by the Python server, with power: the
        # same statistics read with epsilon x 1.3 fail the test
        stats = Stats.from_dict(_get(f"{collector}/v1/collections/{name}/stats"))
        assert stats.n == n
        assert _max_z(spec, stats, truth) <= 5.5
        assert _max_z(spec.replace(epsilon=1.3), stats, truth) > 6.0, name

    for name, (_spec, values) in _numerical().items():
        assert out["sent"][name]["stored"] == values.size
    # a distribution: density with quantile lines, and the server's numbers
    shown = out["estimates"]["sw"]
    api = _get(f"{collector}/v1/collections/sw/estimate")["distribution"]
    assert shown["kind"] == "distribution" and shown["n"] == 4000
    numbers = {r["stat"]: r["value"] for r in shown["rows"]}
    assert numbers["mean"] == pytest.approx(api["mean"], rel=1e-12)
    assert numbers["q0.5"] == pytest.approx(api["quantiles"]["0.5"], rel=1e-12)
    assert (out["charts"]["sw"]["areas"], out["charts"]["sw"]["quantileLines"]) == (1, 5)
    # a mean: its interval, with the truth within 5.5 standard errors
    (row,) = out["estimates"]["pm"]["rows"]
    api = _get(f"{collector}/v1/collections/pm/estimate")
    assert (row["estimate"], row["ciLow"], row["ciHigh"]) == pytest.approx(
        (api["mean"], api["ci_low"][0], api["ci_high"][0]), rel=1e-12
    )
    assert abs(row["estimate"] - _numerical()["pm"][1].mean()) <= 5.5 * row["stdError"]
    assert out["charts"]["pm"]["intervals"] == 1
    # heavy hitters: the discovered top-k, the server's numbers, as bars with whiskers
    shown = out["estimates"]["words"]
    api = _get(f"{collector}/v1/collections/words/estimate")
    assert shown["kind"] == "heavy_hitters" and shown["n"] == sum(WORD_COUNTS)
    assert [r["label"] for r in shown["rows"]] == api["labels"] == WORDS[:3]
    np.testing.assert_allclose([r["estimate"] for r in shown["rows"]], api["frequencies"])
    np.testing.assert_allclose([r["ciHigh"] for r in shown["rows"]], api["ci_high"])
    assert out["charts"]["words"]["bars"] == 3 and out["charts"]["words"]["errorBars"] == 9
    truth = np.array(WORD_COUNTS[:3]) / sum(WORD_COUNTS)
    se = np.array([r["stdError"] for r in shown["rows"]])
    assert np.max(np.abs(np.array(api["frequencies"]) - truth) / se) <= 5.5
    # an open domain: the candidates named in the URL, ranked, with their intervals
    shown = out["estimates"]["sketch"]
    assert shown["kind"] == "open_frequency" and shown["n"] == sum(WORD_COUNTS)
    request = urllib.request.Request(
        f"{collector}/v1/collections/sketch/estimate?top_k=20",
        data=json.dumps({"candidates": CANDIDATES}).encode(),
        headers={"Authorization": f"Bearer {READ_TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        top = json.loads(response.read())["top"]
    assert [r["label"] for r in shown["rows"]] == [t["item"] for t in top]
    assert [t["item"] for t in top][:3] == ["hello", "zoë", "🙂"]
    np.testing.assert_allclose(
        [r["estimate"] for r in shown["rows"]], [t["frequency"] for t in top]
    )
    truth = {w: c / sum(WORD_COUNTS) for w, c in zip(WORDS, WORD_COUNTS)}
    for r in shown["rows"]:
        assert abs(r["estimate"] - truth.get(r["label"], 0.0)) <= 5.5 * r["stdError"], r
    assert out["charts"]["sketch"]["bars"] == 4 and out["charts"]["sketch"]["errorBars"] == 12


# -- longitudinal collections: the per-day chart ---------------------------------------------
T0 = 1_772_409_600  # 2026-03-02 00:00 UTC
DAY = 86_400


def _post(url: str, body: Any) -> None:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 201


@pytest.mark.slow  # ~10 s: chromium start, one page load
def test_dashboard_draws_longitudinal_windows(tmp_path: Path, serve_app: Any) -> None:
    """A line per top item (frequency per day with its band), or the mean per day."""
    assert not PLAYWRIGHT_MISSING, (
        f"CI must have {', '.join(PLAYWRIGHT_MISSING)} (.ci/run installs them)"
    )
    import datetime as dt

    from ldpkit import Encoder
    from ldpkit.io import reports_to_dict
    from ldpkit.longitudinal import LOSUE, OneBitMean
    from ldpkit.service import Collection, create_app

    labels = ["linux", "mac", "windows", "bsd", "other", "none"]
    freq = LOSUE(epsilon_inf=2.0, epsilon_1=1.0, domain_size=6)
    mean = OneBitMean(epsilon=1.0, low=0.0, high=10.0, points=16)
    app = create_app(
        {
            "os": Collection(freq, encoder=Encoder(labels)),
            "usage": Collection(mean),
            "plain": Collection(GRR(epsilon=1.0, domain_size=3)),
        },
        f"sqlite:///{tmp_path / 'collector.db'}",
    )
    url = serve_app(app)
    decoder = app.state.collector.decoder
    real_clock = decoder.clock
    rng = np.random.default_rng(SEED)
    sent = {"os": 0, "usage": 0, "plain": 0}
    try:
        for day in (0, 1, 3):  # day 2 has no report: a gap in every line
            decoder.clock = lambda day=day: dt.datetime.fromtimestamp(T0 + day * DAY + 3600, dt.UTC)
            weights = np.ones(6)
            weights[day % 6] += 4.0
            items = rng.choice(6, size=800, p=weights / weights.sum())
            _post(f"{url}/v1/reports/os", reports_to_dict(freq.randomize(items, rng=day)))
            values = rng.uniform(2.0 + day, 6.0 + day, 600)
            _post(f"{url}/v1/reports/usage", reports_to_dict(mean.randomize(values, rng=day)))
            sent["os"] += 800
            sent["usage"] += 600
        _post(
            f"{url}/v1/reports/plain",
            reports_to_dict(GRR(epsilon=1.0, domain_size=3).randomize([0, 1, 2], rng=0)),
        )
        sent["plain"] = 3
    finally:
        decoder.clock = real_clock
    args = {
        "chromium": CHROMIUM,
        "dashboardUrl": f"{url}/?refresh=1",
        "expected": sent,
        "screenshot": str(tmp_path / "windows.png"),
    }
    done = subprocess.run(
        [NODE or "node", "windows.mjs", json.dumps(args)],
        cwd=BROWSER,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout)
    assert out["consoleErrors"] == [] and out["foreignRequests"] == []
    assert (tmp_path / "windows.png").read_bytes()[:4] == b"\x89PNG"
    (ROOT / "results").mkdir(exist_ok=True)
    shutil.copy(tmp_path / "windows.png", ROOT / "results" / "dashboard-windows.png")
    charts = out["charts"]
    days = [dt.datetime.fromtimestamp(T0 + k * DAY, dt.UTC).date().isoformat() for k in range(4)]

    # frequency: the 5 items with the largest overall estimate, in that order, each a line
    # with its band broken at the empty day, its points the server's per-day numbers
    api = _get(f"{url}/v1/collections/os/windows?width=day")
    overall = np.asarray(_get(f"{url}/v1/collections/os/estimate")["frequencies"])
    os_chart = charts["os"]
    assert not os_chart["titleHidden"] and (os_chart["windows"], os_chart["lines"]) == (4, 5)
    assert os_chart["xticks"] == days
    assert "ε∞ = 2" in os_chart["hint"]
    top = [labels[i] for i in np.argsort(-overall, kind="stable")[:5]]
    assert [s["label"] for s in os_chart["series"]] == top
    for s in os_chart["series"]:
        i = labels.index(s["label"])
        assert s["legend"] == s["label"] and s["bands"] == 2 and s["lines"] == 2
        assert [p["day"] for p in s["points"]] == [days[0], days[1], days[3]]
        for p, w in zip(s["points"], [api["windows"][k] for k in (0, 1, 3)], strict=True):
            assert (p["value"], p["low"], p["high"]) == pytest.approx(
                (w["frequencies"][i], w["ci_low"][i], w["ci_high"][i]), rel=1e-12, abs=1e-15
            )
    # the mean per day: one line, the server's means and intervals, moving up day by day
    api = _get(f"{url}/v1/collections/usage/windows?width=day")
    (line,) = charts["usage"]["series"]
    assert charts["usage"]["lines"] == 1 and line["label"] == "mean" and line["bands"] == 2
    for p, k in zip(line["points"], (0, 1, 3), strict=True):
        w = api["windows"][k]
        assert p["day"] == days[k]
        assert (p["value"], p["low"], p["high"]) == pytest.approx(
            (w["mean"], w["ci_low"][0], w["ci_high"][0]), rel=1e-12
        )
        assert (
            p["low"] <= 4.0 + k <= p["high"] or abs(p["value"] - (4.0 + k)) < 5.5 * (w["std_error"])
        )
    # a collection that is not longitudinal has no per-day chart
    assert charts["plain"]["titleHidden"] and charts["plain"]["lines"] == -1


def test_dashboard_heat_map_of_a_two_way_marginal(tmp_path: Path, serve_app: Any) -> None:
    """A CALM collection's card is the heat map of its (0, 1) marginal, cell for cell.

    Each shaded cell carries the server's ``?marginal=0,1`` estimate and its interval, the
    truth of every cell within 5 standard errors; ``?marginal.NAME=2,0`` shows another pair;
    an SPL collection shows per-attribute bars, a GroupMean collection its means, a TDG
    collection how to ask a range query; no error and nothing from another origin.
    """
    from ldpkit.io import reports_to_dict
    from ldpkit.multidim import CALM, SPL, TDG, GroupMean
    from ldpkit.service import create_app

    sizes, n = (3, 4, 2), 30_000
    gen = np.random.default_rng(7)
    a = gen.choice(3, size=n, p=[0.5, 0.3, 0.2])
    b = (a + gen.choice(4, size=n, p=[0.55, 0.25, 0.15, 0.05])) % 4
    x = np.stack([a, b, gen.integers(0, 2, n)], axis=1)
    specs = {
        "flights": CALM(epsilon=3.0, domain_sizes=sizes, oracle="grr"),
        "shares": SPL(epsilon=3.0, domain_sizes=sizes),
        "delays": GroupMean(epsilon=2.0, domain_size=3, low=0.0, high=60.0, oracle="grr"),
        "boxes": TDG(epsilon=2.0, low=(0.0, 0.0), high=(1.0, 1.0), g2=4),
    }
    data = {
        "flights": x,
        "shares": x,
        "delays": np.stack([a, gen.uniform(0.0, 60.0, n)], axis=1),
        "boxes": gen.random((n, 2)),
    }
    app = create_app(specs, f"sqlite:///{tmp_path / 'collector.db'}")
    url = serve_app(app)
    for name, spec in specs.items():
        body = json.dumps(reports_to_dict(spec.randomize(data[name], rng=1))).encode()
        request = urllib.request.Request(
            f"{url}/v1/reports/{name}", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            assert response.status == 201

    def drive(page: str) -> Any:
        args = {"chromium": CHROMIUM, "url": page, "collections": list(specs)}
        done = subprocess.run(
            [NODE, "heatmap.mjs", json.dumps(args)],
            cwd=BROWSER,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        seen = json.loads(done.stdout)
        assert seen["consoleErrors"] == [] and seen["foreignRequests"] == []
        return seen["cards"]

    cards = drive(f"{url}/?refresh=60")
    heat = cards["flights"]
    assert heat["marginal"] == "0,1" and len(heat["heat"]) == 12
    answer = _get(f"{url}/v1/collections/flights/estimate?marginal=0,1")["multidim"]["marginal"]
    assert [c["estimate"] for c in heat["heat"]] == answer["estimates"]
    assert [(c["row"], c["col"]) for c in heat["heat"]] == [
        (i, j) for i in range(3) for j in range(4)
    ]
    assert [r["estimate"] for r in heat["rows"]] == answer["estimates"]
    assert [r["low"] for r in heat["rows"]] == answer["ci_low"]
    truth = np.zeros((3, 4))
    np.add.at(truth, (x[:, 0], x[:, 1]), 1.0 / n)
    z = (np.array(answer["estimates"]) - truth.ravel()) / np.array(answer["std_errors"])
    assert float(np.max(np.abs(z))) <= 5.0
    assert heat["heat"][0]["title"].startswith("0, 0: ")
    assert cards["shares"]["bars"] == sum(sizes) and len(cards["shares"]["rows"]) == sum(sizes)
    assert cards["delays"]["bars"] == 3 and cards["delays"]["rows"][0]["cell"] == "group 0"
    assert "range=" in cards["boxes"]["hint"]

    other = drive(f"{url}/?refresh=60&marginal.flights=2,0")["flights"]
    assert other["marginal"] == "2,0" and len(other["heat"]) == 6


def test_dashboard_range_form_answers_as_the_api(tmp_path: Path, serve_app: Any) -> None:
    """A range collection's card has a form whose answer is the API's, cell for cell.

    An HDG collection over three attributes and a UniformGrid over two: the form lists every
    attribute with its domain; a box typed into it (one side left empty: up to the domain's
    end) gives the same estimate, standard error and interval as ``GET .../estimate?range=``,
    which equal the offline ``range_query`` of the same reports; the answer is asked again
    when the page polls; no error and nothing from another origin.
    """
    from ldpkit.io import reports_to_dict
    from ldpkit.multidim import HDG, UniformGrid
    from ldpkit.service import create_app

    n = 30_000
    gen = np.random.default_rng(11)
    x = np.column_stack([gen.beta(2, 5, n), gen.uniform(0, 24, n), gen.uniform(-30, 120, n)])
    specs = {
        "trips": HDG(epsilon=2.0, low=(0.0, 0.0, -30.0), high=(1.0, 24.0, 120.0), population=n),
        "cells": UniformGrid(epsilon=2.0, low=(0.0, 0.0), high=(1.0, 24.0), population=n),
    }
    data = {"trips": x, "cells": x[:, :2]}
    app = create_app(specs, f"sqlite:///{tmp_path / 'collector.db'}")
    url = serve_app(app)
    offline = {}
    for name, spec in specs.items():
        reports = spec.randomize(data[name], rng=3)
        offline[name] = spec.estimate(spec.aggregate(reports))
        body = json.dumps(reports_to_dict(reports)).encode()
        request = urllib.request.Request(
            f"{url}/v1/reports/{name}", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            assert response.status == 201
    queries = {"trips": {"1": [6, 12], "2": [15, None]}, "cells": {"0": [None, 0.3]}}
    args = {"chromium": CHROMIUM, "url": f"{url}/?refresh=1", "queries": queries}
    done = subprocess.run(
        [NODE, "rangeform.mjs", json.dumps(args)],
        cwd=BROWSER,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    assert seen["consoleErrors"] == [] and seen["foreignRequests"] == []
    forms = seen["forms"]
    assert forms["trips"]["attributes"] == 3 and forms["cells"]["attributes"] == 2
    assert forms["trips"]["domains"] == ["[0, 1]", "[0, 24]", "[-30, 120]"]
    # the empty sides become the domain's ends
    assert forms["trips"]["range"] == "1:6:12,2:15:120"
    assert forms["cells"]["range"] == "0:0:0.3"
    boxes = {"trips": {1: (6.0, 12.0), 2: (15.0, 120.0)}, "cells": {0: (0.0, 0.3)}}
    for name, form in forms.items():
        api = _get(f"{url}/v1/collections/{name}/estimate?range={form['range']}")
        answer = api["multidim"]["range"]
        shown = (form["estimate"], form["stdError"], form["ciLow"], form["ciHigh"])
        assert shown == (
            answer["estimate"],
            answer["std_error"],
            answer["ci_low"],
            answer["ci_high"],
        )
        assert form["n"] == n and "95% interval" in form["text"]
        assert answer["estimate"] == pytest.approx(
            offline[name].range_query(boxes[name]), rel=1e-12, abs=1e-15
        )
        assert answer["ci_low"] <= answer["estimate"] <= answer["ci_high"]
    assert seen["afterRefresh"] == forms["trips"]["estimate"]
