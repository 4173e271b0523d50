"""Multi-attribute collections (ldpkit.multidim) at the collector.

Every spec's reports go in as JSON and npz, the roll-up's Stats do not grow with n, and
``/estimate`` answers the offline estimate of the same reports: per-attribute marginals,
the ``?marginal=`` asked for, a ``?range=`` box, group means, each cell with its standard
error and interval. A z-test through a live collector on 127.0.0.1 holds at the true
epsilon and fails at a wrong one.
"""

import json
import urllib.request

import numpy as np
import pytest
from fastapi.testclient import TestClient

from ldpkit import Stats
from ldpkit.io import reports_to_bytes, reports_to_dict
from ldpkit.multidim import (
    CALM,
    HDG,
    RSFD,
    SMP,
    SPL,
    TDG,
    Fourier,
    FullDomain,
    GroupMean,
    UniformGrid,
)
from ldpkit.service import create_app
from ldpkit.service.multidim import parse_marginal, parse_range

SPECS = {
    "spl": SPL(epsilon=2.0, domain_sizes=(3, 4)),
    "smp": SMP(epsilon=2.0, domain_sizes=(3, 4)),
    "rsfd": RSFD(epsilon=2.0, domain_sizes=(3, 4)),
    "rsfd_oue": RSFD(epsilon=2.0, domain_sizes=(3, 4), protocol="oue-z"),
    "calm": CALM(epsilon=2.0, domain_sizes=(3, 4, 2), ell=2),
    # 2-way answers projected from the collected 3-way table (exact variance)
    "calm3": CALM(epsilon=2.0, domain_sizes=(3, 4, 2), ell=3),
    "full": FullDomain(epsilon=2.0, domain_sizes=(3, 4)),
    "fourier": Fourier(epsilon=2.0, domain_sizes=(3, 4)),
    "hdg": HDG(epsilon=2.0, low=(0.0, 0.0, 0.0), high=(1.0, 1.0, 1.0)),
    "tdg": TDG(epsilon=2.0, low=(0.0, 10.0), high=(1.0, 20.0)),
    "grid": UniformGrid(epsilon=2.0, low=(0.0, 0.0), high=(1.0, 1.0)),
    "groups": GroupMean(epsilon=2.0, domain_size=3, low=0.0, high=60.0),
}
JOINT = ("calm", "calm3", "full", "fourier")
GRIDS = ("hdg", "tdg", "grid")


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    """Two batches per collection (one JSON, one npz) and the offline estimate of both."""
    db = tmp_path_factory.mktemp("multidim") / "collector.db"
    app = create_app(dict(SPECS), f"sqlite:///{db}")
    sent = {}
    with TestClient(app) as client:
        for name, spec in SPECS.items():
            gen = np.random.default_rng(len(name))
            a = spec.randomize(spec._contract_values(700, gen), rng=gen)
            b = spec.randomize(spec._contract_values(500, gen), rng=gen)
            assert client.post(f"/v1/reports/{name}", json=reports_to_dict(a)).status_code == 201
            r = client.post(
                f"/v1/reports/{name}",
                content=reports_to_bytes(b, format="npz"),
                headers={"Content-Type": "application/x-npz"},
            )
            assert r.status_code == 201, r.text
            sent[name] = a.concat(b)
        yield client, sent


def _offline(name, sent):
    spec = SPECS[name]
    return spec.estimate(spec.aggregate(sent[name]))


def _check_table(answer, table, alpha=0.05):
    """The answer's cells are the table's, exactly, with its intervals."""
    low, high = table.confidence_interval(alpha)
    assert answer["attributes"] == list(table.attributes)
    assert answer["shape"] == list(table.table.shape)
    assert answer["estimates"] == table.table.ravel().tolist()
    assert answer["std_errors"] == table.std_error.ravel().tolist()
    assert answer["ci_low"] == low.ravel().tolist()
    assert answer["ci_high"] == high.ravel().tolist()


@pytest.mark.parametrize("name", ["spl", "smp", "rsfd", "rsfd_oue"])
def test_per_attribute_marginals_equal_the_offline_estimate(collected, name):
    client, sent = collected
    body = client.get(f"/v1/collections/{name}/estimate").json()
    assert body["kind"] == "multidim" and body["n"] == 1200 and body["batches"] == 2
    est = _offline(name, sent)
    answers = body["multidim"]["attributes"]
    assert len(answers) == len(est)
    for j, (answer, e) in enumerate(zip(answers, est)):
        low, high = e.confidence_interval(0.05)
        assert answer["attributes"] == [j]
        assert answer["estimates"] == e.frequencies.tolist()
        assert answer["std_errors"] == e.std_error.tolist()
        assert answer["ci_low"] == low.tolist() and answer["ci_high"] == high.tolist()
    one = client.get(f"/v1/collections/{name}/estimate", params={"marginal": "1"}).json()
    assert one["multidim"]["marginal"] == answers[1]


@pytest.mark.parametrize("name", JOINT)
def test_requested_marginal_equals_the_offline_marginal(collected, name):
    client, sent = collected
    est = _offline(name, sent)
    body = client.get(
        f"/v1/collections/{name}/estimate", params={"marginal": "1,0", "alpha": 0.1}
    ).json()
    _check_table(body["multidim"]["marginal"], est.marginal((1, 0)), alpha=0.1)
    for j, answer in enumerate(body["multidim"]["attributes"]):
        _check_table(answer, est.marginal((j,)), alpha=0.1)


def test_reconstructed_marginal_equals_the_offline_one(collected):
    """A 3-way marginal of 2-way CALM (max-entropy, bootstrap error bars) is the offline one."""
    client, sent = collected
    est = _offline("calm", sent)
    body = client.get("/v1/collections/calm/estimate", params={"marginal": "2,0,1"}).json()
    table = est.marginal((2, 0, 1))
    assert table.method == "max_entropy" == body["multidim"]["marginal"]["method"]
    _check_table(body["multidim"]["marginal"], table)


@pytest.mark.parametrize("name", GRIDS)
def test_range_query_equals_the_offline_answer(collected, name):
    client, sent = collected
    est = _offline(name, sent)
    spec = SPECS[name]
    lo1, hi1 = spec.low[1], spec.high[1]
    box = {0: (0.1, 0.6), 1: (lo1 + 0.2 * (hi1 - lo1), lo1 + 0.9 * (hi1 - lo1))}
    text = ",".join(f"{a}:{lo!r}:{hi!r}" for a, (lo, hi) in box.items())
    body = client.get(f"/v1/collections/{name}/estimate", params={"range": text}).json()
    answer = body["multidim"]["range"]
    assert answer["estimate"] == est.range_query(box)
    assert answer["std_error"] == est.std_error(box)
    # the offline interval (noise plus the within-cell error model), not the noise alone
    assert [answer["ci_low"], answer["ci_high"]] == list(est.interval(box, 0.05))
    # HDG's noise is the post-processed answer's (the bootstrap), the others' std_error
    noise = est.post_noise_variance(box) if name == "hdg" else answer["std_error"] ** 2
    assert answer["ci_high"] - answer["ci_low"] > 2 * 1.959963984540054 * noise**0.5
    # without a range, a grid collection answers its n only
    plain = client.get(f"/v1/collections/{name}/estimate").json()
    assert plain["n"] == 1200 and plain["multidim"]["range"] is None


def test_range_over_three_attributes_has_the_offline_interval(collected):
    client, sent = collected
    body = client.get(
        "/v1/collections/hdg/estimate", params={"range": "0:0:0.5,1:0.25:1,2:0:0.75"}
    ).json()
    answer = body["multidim"]["range"]
    box = {0: (0.0, 0.5), 1: (0.25, 1.0), 2: (0.0, 0.75)}
    est = _offline("hdg", sent)
    assert answer["estimate"] == est.range_query(box)
    # no noise formula over 3+ attributes; the interval is the pairs' bound model
    assert answer["std_error"] is None
    assert [answer["ci_low"], answer["ci_high"]] == list(est.interval(box, 0.05))


def test_group_means_equal_the_offline_estimate(collected):
    client, sent = collected
    est = _offline("groups", sent)
    answer = client.get("/v1/collections/groups/estimate").json()["multidim"]["group_means"]
    low, high = est.confidence_interval(0.05)
    assert answer["means"] == est.means.tolist()
    assert answer["std_errors"] == est.std_error.tolist()
    assert answer["ci_low"] == low.tolist() and answer["ci_high"] == high.tolist()
    assert answer["shares"] == est.shares.tolist()
    assert answer["estimable"] == est.estimable.tolist()


def test_stats_do_not_grow_with_n(collected):
    client, _ = collected
    for name, spec in SPECS.items():
        stats = Stats.from_dict(client.get(f"/v1/collections/{name}/stats").json())
        assert stats.n == 1200
        for field, arr in stats.arrays.items():
            assert arr.shape == spec.stats_schema()[field].shape, (name, field)


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("spl", {"range": "0:0:1"}, "range must be left out for a SPL collection"),
        ("spl", {"marginal": "0,1"}, "marginal must be one attribute for a SPL collection"),
        ("hdg", {"marginal": "0,1"}, "marginal must be left out for a HDG collection"),
        ("groups", {"marginal": "0"}, "marginal must be left out for a GroupMean collection"),
        ("groups", {"range": "0:0:1"}, "range must be left out for a GroupMean collection"),
        ("calm", {"marginal": "0,7"}, "marginal must be distinct attribute indices in [0, 3)"),
        ("calm", {"marginal": "0,0"}, "marginal must be distinct attribute indices"),
        ("calm", {"marginal": "a"}, "marginal must be distinct attribute indices"),
        ("hdg", {"range": "0:2:1"}, "lo > hi"),
        ("hdg", {"range": "0:0:1,0:0:1"}, "each at most once"),
        ("hdg", {"range": "5:0:1"}, "attribute in [0, 3)"),
        ("hdg", {"range": "0:nan:1"}, "finite lo <= hi"),
        ("hdg", {"range": "0:0"}, "attribute:lo:hi"),
    ],
)
def test_bad_queries_get_a_422_naming_the_parameter(collected, name, params, message):
    client, _ = collected
    r = client.get(f"/v1/collections/{name}/estimate", params=params)
    assert r.status_code == 422, r.text
    assert message in r.json()["detail"]


def test_a_reconstruction_too_costly_gets_a_422(tmp_path):
    """A 3-way marginal of 32^3 cells from 2-way CALM: its bootstrap would run for a minute."""
    spec = CALM(epsilon=2.0, domain_sizes=(32, 32, 32))
    app = create_app({"big": spec}, f"sqlite:///{tmp_path / 'big.db'}")
    with TestClient(app) as c:
        gen = np.random.default_rng(0)
        reports = spec.randomize(spec._contract_values(300, gen), rng=gen)
        assert c.post("/v1/reports/big", json=reports_to_dict(reports)).status_code == 201
        r = c.get("/v1/collections/big/estimate", params={"marginal": "0,1,2"})
        assert r.status_code == 422, r.text
        assert (
            "marginal must have at most 10485 cells when no collected table holds it"
            in (r.json()["detail"])
        )
        # a collected table of as many cells is cheap, and answered
        r = c.get("/v1/collections/big/estimate", params={"marginal": "2,0"})
        assert r.status_code == 200 and len(r.json()["multidim"]["marginal"]["estimates"]) == 1024


def test_other_kinds_refuse_marginal_and_range(tmp_path):
    from ldpkit import GRR

    with TestClient(
        create_app({"x": GRR(epsilon=1.0, domain_size=4)}, f"sqlite:///{tmp_path / 'a.db'}")
    ) as c:
        for params in ({"marginal": "0,1"}, {"range": "0:0:1"}):
            r = c.get("/v1/collections/x/estimate", params=params)
            assert r.status_code == 422
            assert "only multi-attribute collections take it" in r.json()["detail"]


def test_windows_answer_per_window_marginals(collected):
    client, sent = collected
    body = client.get("/v1/collections/calm/windows", params={"width": "week"}).json()
    assert body["kind"] == "multidim" and sum(w["n"] for w in body["windows"]) == 1200
    window = next(w for w in body["windows"] if w["n"])
    est = _offline("calm", sent)
    _check_table(window["multidim"]["attributes"][2], est.marginal((2,)))


def test_parsers():
    assert parse_marginal("2,0", 3) == (2, 0)
    assert parse_range("1:-1.5:2e3", 2) == {1: (-1.5, 2000.0)}
    with pytest.raises(ValueError, match="marginal must be"):
        parse_marginal("", 3)
    with pytest.raises(ValueError, match="range must be"):
        parse_range("0:1:2:3", 3)


def _z(estimates, std_errors, truth):
    return (np.asarray(estimates) - truth) / np.asarray(std_errors)


def test_live_collector_z_test_fails_at_a_wrong_epsilon(tmp_path, serve_app):
    """Check CALM's 2-way marginal from a live collector on 127.0.0.1 against the truth.

    Every cell is within 5 standard errors of the true joint frequency; the same counts
    read at a wrong epsilon (too low or too high) are not.
    """
    sizes, n = (3, 4, 2), 60_000
    spec = CALM(epsilon=2.0, domain_sizes=sizes, oracle="grr")
    url = serve_app(create_app({"x": spec}, f"sqlite:///{tmp_path / 'live.db'}"))
    gen = np.random.default_rng(5)
    a = gen.choice(3, size=n, p=[0.5, 0.3, 0.2])
    b = (a + gen.choice(4, size=n, p=[0.55, 0.25, 0.15, 0.05])) % 4  # correlated with a
    c = gen.integers(0, 2, size=n)
    values = np.stack([a, b, c], axis=1)
    truth = np.zeros((3, 4))
    np.add.at(truth, (a, b), 1.0 / n)

    def call(method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())

    for part in np.array_split(values, 3):
        status, _ = call("POST", "/v1/reports/x", reports_to_dict(spec.randomize(part, rng=gen)))
        assert status == 201
    status, body = call("GET", "/v1/collections/x/estimate?marginal=0,1")
    answer = body["multidim"]["marginal"]
    assert status == 200 and body["n"] == n and answer["shape"] == [3, 4]
    z = _z(answer["estimates"], answer["std_errors"], truth.ravel())
    assert np.abs(z).max() <= 5.0, z

    _, stats_dict = call("GET", "/v1/collections/x/stats")
    stats = Stats.from_dict(stats_dict)
    for eps in (1.5, 2.6):
        wrong = CALM(epsilon=eps, domain_sizes=sizes, oracle="grr")
        table = wrong.estimate(Stats(wrong, stats.n, **stats.arrays)).marginal((0, 1))
        worst = np.abs(_z(table.table, table.std_error, truth)).max()
        assert worst > 5.0, (eps, worst)


def test_many_marginals_load_and_a_thin_window_says_why_it_has_no_answer(tmp_path):
    """A CALM spec of 28 marginals loads (its probe fills every marginal); a batch of 10
    reports leaves some marginal without a report, and the answer says so (no 500)."""
    spec = CALM(epsilon=1.0, domain_sizes=(4,) * 8)
    with TestClient(create_app({"c": spec}, f"sqlite:///{tmp_path / 'c.db'}")) as client:
        reports = spec.randomize(np.zeros((10, 8), dtype=np.int64), rng=0)
        assert client.post("/v1/reports/c", json=reports_to_dict(reports)).status_code == 201
        body = client.get("/v1/collections/c/estimate", params={"marginal": "0,1"}).json()
    assert body["n"] == 10 and body["multidim"]["marginal"] is None
    assert "at least one report of every marginal" in body["multidim"]["note"]


def test_one_attribute_range_has_the_offline_interval(collected):
    """Check HDG's 1-D interval (its bootstrap of the post-processing) equals the offline one."""
    client, sent = collected
    body = client.get("/v1/collections/hdg/estimate", params={"range": "0:0.1:0.6"}).json()
    answer = body["multidim"]["range"]
    est = _offline("hdg", sent)
    box = {0: (0.1, 0.6)}
    assert answer["estimate"] == est.range_query(box)
    assert [answer["ci_low"], answer["ci_high"]] == list(est.interval(box, 0.05))
