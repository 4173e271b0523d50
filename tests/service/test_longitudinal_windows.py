"""Longitudinal collections in the collector: reports over several days, per-window estimates.

Every window's answer is the offline estimate of that window's reports (same Stats, same
estimator, same standard errors); a z-test through a live collector on 127.0.0.1 holds at
the spec's epsilon_1 and fails when the same counts are read at a wrong epsilon_1.
"""

import datetime as dt
import json
import urllib.request

import numpy as np
import pytest
from fastapi.testclient import TestClient

from ldpkit import GRR, Stats
from ldpkit.io import reports_to_dict
from ldpkit.longitudinal import LGRR, LOLOHA, LOSUE, DBitFlipPM, OneBitMean
from ldpkit.service import app_from_config, create_app

T0 = dt.datetime(2026, 3, 2, tzinfo=dt.UTC)  # a Monday, 00:00 UTC
DAY = 86_400


@pytest.fixture
def db(tmp_path):
    """Return a SQLite URL in the test's directory."""
    return f"sqlite:///{tmp_path / 'c.db'}"


def _at(app, when):
    app.state.collector.decoder.clock = lambda: when


def _day_values(day, n, d, seed):
    """Draw n values from a law over d items that moves daily (item ``day % d`` grows)."""
    weights = np.ones(d)
    weights[day % d] += 3.0
    return np.random.default_rng(seed + day).choice(d, size=n, p=weights / weights.sum())


def test_config_windows_equal_the_offline_estimate_per_day(db):
    """Serve a config naming L-OSUE: reports over four days (none on the third) in hourly buckets."""
    spec = LOSUE(epsilon_inf=2.0, epsilon_1=1.0, domain_size=4)
    app = app_from_config(
        {
            "collections": {
                "os": {
                    "mechanism": "LOSUE",
                    "params": {"epsilon_inf": 2.0, "epsilon_1": 1.0},
                    "categories": ["linux", "mac", "windows", "other"],
                }
            }
        },
        database_url=db,
    )
    assert app.state.collector.collections["os"].spec == spec
    sent = {}
    with TestClient(app) as c:
        for day in (0, 1, 3):
            values = _day_values(day, 600, 4, seed=10)
            reports = spec.randomize(values, rng=100 + day)
            sent[day] = reports
            for k, hour in enumerate((1, 9, 17)):  # three batches, in three buckets, per day
                _at(app, T0 + dt.timedelta(days=day, hours=hour, minutes=7))
                part = reports[200 * k : 200 * (k + 1)]
                r = c.post("/v1/reports/os", json=reports_to_dict(part))
                assert r.status_code == 201, r.text
        series = c.get("/v1/collections/os/windows", params={"width": "day"})
        assert series.status_code == 200, series.text
        body = series.json()
        assert (body["kind"], body["width_seconds"], body["bucket_seconds"]) == (
            "frequency",
            DAY,
            3600,
        )
        assert body["longitudinal"] == {
            "epsilon_1": spec.privacy_loss(),
            "epsilon_inf": spec.longitudinal_privacy_loss(1),
            "epsilon_change": spec.change_privacy_loss(),
            "epsilon_max": spec.longitudinal_privacy_loss(4),
        }
        windows = body["windows"]
        assert [w["since"] for w in windows] == [
            (T0 + dt.timedelta(days=k)).isoformat() for k in range(4)
        ]
        assert [w["n"] for w in windows] == [600, 600, 0, 600]
        assert windows[2]["frequencies"] is None  # an empty day: no estimate
        for day in (0, 1, 3):
            w = windows[day]
            offline = spec.estimate(spec.aggregate(sent[day]))
            assert w["labels"] == ["linux", "mac", "windows", "other"]
            assert w["batches"] == 3
            np.testing.assert_array_equal(w["frequencies"], offline.frequencies)
            np.testing.assert_array_equal(w["std_errors"], offline.std_error)
            low, high = offline.confidence_interval(0.05)
            np.testing.assert_array_equal(w["ci_low"], low)
            np.testing.assert_array_equal(w["ci_high"], high)
        # the estimate of days 0-1 through since/until: the merged offline estimate
        two = c.get(
            "/v1/collections/os/estimate",
            params={"since": T0.isoformat(), "until": (T0 + dt.timedelta(days=2)).isoformat()},
        ).json()
        both = spec.estimate(spec.aggregate(sent[0].concat(sent[1])))
        assert two["n"] == 1200
        np.testing.assert_array_equal(two["frequencies"], both.frequencies)
        np.testing.assert_array_equal(two["std_errors"], both.std_error)
        assert two["longitudinal"] == body["longitudinal"]
        # hours: the windows with reports, and the empty hours between them
        hours = c.get("/v1/collections/os/windows", params={"width": "hour"}).json()["windows"]
        assert len(hours) == 3 * 24 + 17
        assert sum(w["n"] for w in hours) == 1800
        assert [w["n"] for w in hours if w["n"]] == [200] * 9
        # a window cut by since/until: [day 1 12:00, day 3 12:00) holds day 1's last batch
        # and day 3's first two
        cut = c.get(
            "/v1/collections/os/windows",
            params={
                "width": "day",
                "since": (T0 + dt.timedelta(days=1, hours=12)).isoformat(),
                "until": (T0 + dt.timedelta(days=3, hours=12)).isoformat(),
            },
        ).json()["windows"]
        assert [(w["since"], w["n"]) for w in cut] == [
            ((T0 + dt.timedelta(days=1, hours=12)).isoformat(), 200),
            ((T0 + dt.timedelta(days=2)).isoformat(), 0),
            ((T0 + dt.timedelta(days=3)).isoformat(), 400),
        ]
        assert cut[-1]["until"] == (T0 + dt.timedelta(days=3, hours=12)).isoformat()
        info = c.get("/v1/collections/os").json()
        assert info["longitudinal"] == body["longitudinal"]


@pytest.mark.parametrize(
    "spec",
    [
        OneBitMean(epsilon=1.0, low=0.0, high=10.0, points=8),
        DBitFlipPM(epsilon=1.0, domain_size=6, sampled_bits=2),
        LOLOHA(epsilon_inf=2.0, epsilon_1=1.0, domain_size=6, hash_range=2),
        LGRR(epsilon_inf=2.0, epsilon_1=1.0, domain_size=6),
    ],
    ids=lambda s: s.name,
)
def test_every_longitudinal_family_answers_per_window(db, spec):
    """Check each family's windows (frequencies or a mean) against its offline estimates."""
    app = create_app({"x": spec}, db, bucket_seconds=DAY)
    sent = []
    with TestClient(app) as c:
        for day in range(3):
            values = _day_values(day, 300, 6, seed=3)
            if isinstance(spec, OneBitMean):
                values = values * 1.5
            reports = spec.randomize(values, rng=day)
            sent.append(reports)
            _at(app, T0 + dt.timedelta(days=day, hours=12))
            assert c.post("/v1/reports/x", json=reports_to_dict(reports)).status_code == 201
        body = c.get("/v1/collections/x/windows", params={"width": "day"}).json()
        assert body["longitudinal"]["epsilon_1"] == spec.privacy_loss()
        assert body["longitudinal"]["epsilon_inf"] == spec.longitudinal_privacy_loss(1)
        assert [w["n"] for w in body["windows"]] == [300, 300, 300]
        for w, reports in zip(body["windows"], sent):
            offline = spec.estimate(spec.aggregate(reports))
            if isinstance(spec, OneBitMean):
                assert body["kind"] == "mean"
                assert (w["mean"], w["std_error"]) == (offline.mean, offline.std_error)
            else:
                assert body["kind"] == "frequency"
                np.testing.assert_array_equal(w["frequencies"], offline.frequencies)
                np.testing.assert_array_equal(w["std_errors"], offline.std_error)
        # a two-day window (a width in seconds)
        pairs = c.get("/v1/collections/x/windows", params={"width": str(2 * DAY)}).json()
        assert [w["n"] for w in pairs["windows"]] == [600, 300]


def test_windows_refuse_bad_widths_and_queries(db):
    """Check the 422s of bad widths and queries, and a one-report spec's answers."""
    app = create_app(
        {
            "x": LGRR(epsilon_inf=2.0, epsilon_1=1.0, domain_size=4),
            "g": GRR(epsilon=1.0, domain_size=4),
        },
        db,
    )
    spec = app.state.collector.collections["x"].spec
    with TestClient(app) as c:
        for width in ("minute", "1800", "0", "-3600", "1e9"):
            r = c.get("/v1/collections/x/windows", params={"width": width})
            assert r.status_code == 422, (width, r.text)
            assert "width must be one of ['day', 'hour', 'week']" in r.json()["detail"]
        r = c.get("/v1/collections/x/windows", params={"postprocessing": "nope"})
        assert r.status_code == 422 and "postprocessing must be one of" in r.json()["detail"]
        assert c.get("/v1/collections/nope/windows").status_code == 404
        # reports 100 days apart: 2,401 hourly windows, over the cap
        for day in (0, 100):
            _at(app, T0 + dt.timedelta(days=day))
            r = c.post("/v1/reports/x", json=reports_to_dict(spec.randomize([1, 2], rng=day)))
            assert r.status_code == 201
        r = c.get("/v1/collections/x/windows", params={"width": "hour"})
        assert r.status_code == 422 and "at most 2000 windows" in r.json()["detail"]
        assert (
            len(c.get("/v1/collections/x/windows", params={"width": "week"}).json()["windows"])
            == 15
        )
        # a collection of a one-report spec has no longitudinal budgets
        assert c.get("/v1/collections/g").json()["longitudinal"] is None
        assert c.get("/v1/collections/g/windows").json() == {
            "collection": "g",
            "kind": "frequency",
            "width_seconds": DAY,
            "bucket_seconds": 3600,
            "alpha": 0.05,
            "longitudinal": None,
            "windows": [],
        }


def _z_scores(freqs, std_errors, truth):
    """Return the estimates' distances to the truth in standard errors."""
    return (np.asarray(freqs) - truth) / np.asarray(std_errors)


def test_live_collector_z_test_over_days_fails_at_a_wrong_epsilon_1(db, serve_app):
    """Check five days of L-GRR reports through a live collector on 127.0.0.1.

    Every day's estimate is within 5 standard errors of the day's true frequencies; the same counts read at a wrong
    epsilon_1 (too low or too high) are not. (L-GRR's one-report law is GRR at epsilon_1
    whatever epsilon_inf is, so a window's estimate cannot tell epsilon_inf.)
    """
    d, n = 5, 40_000
    spec = LGRR(epsilon_inf=2.0, epsilon_1=1.0, domain_size=d)
    app = create_app({"x": spec}, db)
    url = serve_app(app)
    truths = []

    def call(method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())

    for day in range(5):
        values = _day_values(day, n, d, seed=77)
        truths.append(np.bincount(values, minlength=d) / n)
        _at(app, T0 + dt.timedelta(days=day, hours=8))
        status, _ = call("POST", "/v1/reports/x", reports_to_dict(spec.randomize(values, rng=day)))
        assert status == 201
    status, body = call("GET", "/v1/collections/x/windows?width=day")
    assert status == 200 and [w["n"] for w in body["windows"]] == [n] * 5
    z = np.array(
        [_z_scores(w["frequencies"], w["std_errors"], t) for w, t in zip(body["windows"], truths)]
    )
    assert np.abs(z).max() <= 5.0, z

    wrong_specs = [
        LGRR(epsilon_inf=2.0, epsilon_1=0.8, domain_size=d),
        LGRR(epsilon_inf=2.0, epsilon_1=1.2, domain_size=d),
    ]
    for wrong in wrong_specs:
        worst = 0.0
        for day, truth in enumerate(truths):
            since = int((T0 + dt.timedelta(days=day)).timestamp())
            _, stats_dict = call(
                "GET", f"/v1/collections/x/stats?since={since}&until={since + DAY}"
            )
            stats = Stats.from_dict(stats_dict)
            assert stats.spec == spec and stats.n == n
            est = wrong.estimate(Stats(wrong, stats.n, **stats.arrays))
            worst = max(worst, np.abs(_z_scores(est.frequencies, est.std_error, truth)).max())
        assert worst > 5.0, (wrong, worst)


def test_memoized_devices_over_a_week_are_answered_per_day(db, tmp_path):
    """Send a week of memoized reports from 60 devices (a third change value mid-week).

    Each day's window is the offline estimate of that day's reports, and each device's
    spend is epsilon_inf per value it held, whatever the number of days.
    """
    from ldpkit import Device

    spec = LOLOHA(epsilon_inf=2.0, epsilon_1=1.0, domain_size=6, hash_range=2)
    app = create_app({"x": spec}, db)
    devices = [Device(secret=bytes([i]) * 32, path=tmp_path / f"device{i}.json") for i in range(60)]
    sent = []
    with TestClient(app) as c:
        for day in range(7):
            values = [i % 6 if day < 3 or i % 3 else (i + 1) % 6 for i in range(60)]
            day_reports = [
                dev.report(spec, [v], rng=1000 * day + i)
                for i, (dev, v) in enumerate(zip(devices, values))
            ]
            reports = day_reports[0].concat(*day_reports[1:])
            sent.append(reports)
            _at(app, T0 + dt.timedelta(days=day, hours=20))
            assert c.post("/v1/reports/x", json=reports_to_dict(reports)).status_code == 201
        body = c.get("/v1/collections/x/windows", params={"width": "day"}).json()
    assert [w["n"] for w in body["windows"]] == [60] * 7
    for w, reports in zip(body["windows"], sent):
        offline = spec.estimate(spec.aggregate(reports))
        np.testing.assert_array_equal(w["frequencies"], offline.frequencies)
        np.testing.assert_array_equal(w["std_errors"], offline.std_error)
    # a memoized device re-sends its permanent answer: the reports of an unchanged device
    # differ only by the instantaneous round, and it has spent epsilon_inf per hashed value
    spent = [dev.privacy_spent(spec) for dev in devices]
    one = spec.longitudinal_privacy_loss(1)
    for i, s in enumerate(spent):
        if i % 3:  # never changed: one permanent answer for the week
            assert s == pytest.approx(one)
        else:  # changed once: a second answer unless both values hash alike (g = 2)
            assert s == pytest.approx(one) or s == pytest.approx(2 * one)
    assert sum(s > 1.5 * one for s in spent) >= 5  # some changes did cost a second answer
    assert max(spent) <= body["longitudinal"]["epsilon_max"] + 1e-12


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_windows_over_closed_and_open_buckets_equal_one_estimate_per_window(db, backend, request):
    """Check the series against ``/estimate`` asked window by window.

    Batches arrive now and over the last days: the series reads closed buckets from the
    cache and open ones in one query.
    """
    if backend == "postgresql":
        db = request.getfixturevalue("fresh_postgres")
    spec = LGRR(epsilon_inf=2.0, epsilon_1=1.0, domain_size=5)
    app = create_app({"x": spec}, db, bucket_seconds=600)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    with TestClient(app) as c:
        for k, minutes in enumerate((0, 5, 15, 50, 130, 60 * 30, 60 * 50, 60 * 50 + 3)):
            _at(app, now - dt.timedelta(minutes=minutes))
            reports = spec.randomize(np.arange(40 + k) % 5, rng=k)
            assert c.post("/v1/reports/x", json=reports_to_dict(reports)).status_code == 201
        start = (now - dt.timedelta(days=3)).isoformat()
        for width, params in (
            ("hour", {}),
            ("day", {}),
            ("1800", {"since": start}),
            ("day", {"since": int(now.timestamp()) - 7200, "until": int(now.timestamp()) + 600}),
        ):
            series = c.get("/v1/collections/x/windows", params={"width": width, **params})
            assert series.status_code == 200, series.text
            windows = series.json()["windows"]
            assert windows and sum(w["n"] for w in windows) > 0
            for w in windows:
                one = c.get(
                    "/v1/collections/x/estimate", params={"since": w["since"], "until": w["until"]}
                ).json()
                assert (w["n"], w["batches"]) == (one["n"], one["batches"]), (width, w["since"])
                assert w["frequencies"] == one["frequencies"]
                assert w["std_errors"] == one["std_errors"]
        total = c.get("/v1/collections/x/windows", params={"width": "week"}).json()["windows"]
        assert sum(w["n"] for w in total) == sum(40 + k for k in range(8))


def test_open_domain_windows_answer_the_named_candidates(db):
    """Check that any kind reads per window: an open-domain sketch, with candidates."""
    from ldpkit import CMS

    spec = CMS(epsilon=2.0, width=64, depth=64)
    app = create_app({"w": spec}, db, bucket_seconds=DAY)
    sent = []
    with TestClient(app) as c:
        for day in range(2):
            words = ["apple"] * 30 + ["pear"] * (10 + 20 * day)
            reports = spec.randomize(words, rng=day)
            sent.append(reports)
            _at(app, T0 + dt.timedelta(days=day))
            assert c.post("/v1/reports/w", json=reports_to_dict(reports)).status_code == 201
        r = c.get("/v1/collections/w/windows")
        assert r.status_code == 422 and "candidates must be given" in r.json()["detail"]
        body = c.get("/v1/collections/w/windows", params={"candidates": "apple,pear,fig"}).json()
    assert body["kind"] == "open_frequency" and body["longitudinal"] is None
    for w, reports in zip(body["windows"], sent):
        offline = spec.estimate(spec.aggregate(reports), candidates=["apple", "pear", "fig"])
        assert w["labels"] == ["apple", "pear", "fig"]
        np.testing.assert_array_equal(w["frequencies"], offline.frequencies)
