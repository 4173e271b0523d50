"""Questions: one file both sides load, with the same fingerprint; Encoder round trips."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from ldpkit import GRR, OLH, OUE, Encoder, Question, load_questions, save_questions
from ldpkit.numeric import PiecewiseMechanism, SquareWave


def _questions() -> list[Question]:
    return [
        Question(
            name="browser",
            spec=OLH(epsilon=1.0, domain_size=5),
            encoder=Encoder(["firefox", "chrome", "safari"], unknown="other", missing="item"),
            description="Which browser do you use?",
        ),
        Question(name="minutes", spec=SquareWave(epsilon=2.0, low=0.0, high=60.0), clip="clip"),
        Question(name="age", spec=PiecewiseMechanism(epsilon=0.5, low=18.0, high=99.0)),
        Question(name="items", spec=GRR(epsilon=1.5, domain_size=4)),
    ]


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_file_round_trip_keeps_every_fingerprint(tmp_path, suffix):
    questions = _questions()
    path = save_questions(questions, tmp_path / f"survey{suffix}")
    loaded = load_questions(path)
    assert loaded == questions
    for a, b in zip(questions, loaded, strict=True):
        assert a.fingerprint == b.fingerprint
        assert a.spec.fingerprint == b.spec.fingerprint
        assert a.encoder == b.encoder
    one = questions[0].save(tmp_path / f"one{suffix}")
    assert Question.load(one) == questions[0]
    with pytest.raises(ValueError, match="exactly one question"):
        Question.load(path)


def test_toml_text_is_readable_and_reloads():
    import tomllib

    from ldpkit._toml import dumps

    text = dumps({"question": [q.to_dict() for q in _questions()]})
    assert "[[question]]" in text and 'name = "browser"' in text
    assert tomllib.loads(text)["question"][0]["encoder"]["categories"] == [
        "firefox",
        "chrome",
        "safari",
    ]


def test_fingerprint_ignores_description_but_not_policies():
    q = _questions()[0]
    same = Question(name=q.name, spec=q.spec, encoder=q.encoder, description="other words")
    assert same.fingerprint == q.fingerprint
    other = Question(
        name=q.name,
        spec=q.spec,
        encoder=Encoder(["firefox", "chrome", "safari", "edge"], unknown="other"),
    )
    assert other.fingerprint != q.fingerprint


def test_categorical_answers_go_through_the_encoder():
    q = _questions()[0]
    items = q.prepare(["safari", None, "lynx", "firefox", float("nan")])
    assert items.tolist() == [2, 4, 3, 0, 4]
    reports = q.randomize(["chrome"] * 10, rng=0)
    assert len(reports) == 10 and reports.spec == q.spec


def test_numerical_clipping_policy():
    minutes, age = _questions()[1], _questions()[2]
    assert minutes.prepare([-5.0, 30.0, 90.0]).tolist() == [0.0, 30.0, 60.0]
    with pytest.raises(ValueError, match=r"answers must lie in \[18, 99\]"):
        age.prepare([17.0, 20.0])
    with pytest.raises(ValueError, match="must not be missing"):
        age.prepare([20.0, math.nan])


def test_validation_names_the_parameter():
    with pytest.raises(ValueError, match="encoder must give spec.domain_size = 4"):
        Question(name="x", spec=GRR(epsilon=1, domain_size=4), encoder=Encoder(["a", "b"]))
    with pytest.raises(ValueError, match="encoder must be None for a numerical question"):
        Question(name="x", spec=SquareWave(epsilon=1), encoder=Encoder(["a", "b"]))
    with pytest.raises(ValueError, match="name must be"):
        Question(name="has space", spec=GRR(epsilon=1, domain_size=4))
    with pytest.raises(TypeError, match="spec must be an ldpkit mechanism"):
        Question(name="x", spec="OUE")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="clip must be"):
        Question(name="x", spec=SquareWave(epsilon=1), clip="wrap")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="only have the keys"):
        Question.from_dict({"name": "x", "spec": OUE(epsilon=1, domain_size=4).to_dict(), "y": 1})
    with pytest.raises(ValueError, match="format must be 1"):
        Question.from_dict({"format": 9, "name": "x", "spec": {}})


def test_bad_files(tmp_path):
    with pytest.raises(ValueError, match=r"path must end in \.toml or \.json"):
        load_questions(tmp_path / "q.yaml")
    with pytest.raises(ValueError, match="path must be an existing file"):
        load_questions(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("question = [", encoding="utf-8")
    with pytest.raises(ValueError, match="path must hold valid TOML"):
        load_questions(bad)
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"collections": []}), encoding="utf-8")
    with pytest.raises(ValueError, match="non-empty 'question' list"):
        load_questions(empty)


def test_encoder_equality_serialization_and_missing_policy():
    enc = Encoder([3, 1, 2], unknown="other", missing="item")
    assert enc.labels.tolist() == [3, 1, 2, "<other>", "<missing>"]
    assert enc.encode(np.array([2.0, np.nan, 7.0])).tolist() == [2, 4, 3]
    back = Encoder.from_dict(json.loads(json.dumps(enc.to_dict())))
    assert back == enc and hash(back) == hash(enc)
    assert Encoder([3, 1, 2]) != enc  # other policies
    assert Encoder([1, 3, 2], unknown="other", missing="item") != enc  # order matters
    assert Encoder(["1", "2"]) != Encoder([1, 2])  # types matter
    with pytest.raises(ValueError, match="reserved labels"):
        Encoder(["a", "<other>"])
    with pytest.raises(ValueError, match="must not contain missing values"):
        Encoder(["a", None])
    with pytest.raises(ValueError, match="labels must not be missing"):
        Encoder(["a", "b"]).encode(["a", None])
    with pytest.raises(ValueError, match="missing must be 'error' or 'item'"):
        Encoder(["a", "b"], missing="drop")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="categories must be str, int, float or bool"):
        Encoder([(1, 2), (3, 4)]).to_dict()


def _dsw_question() -> Question:
    from ldpkit.numeric import DiscreteSquareWave

    return Question(
        name="wait", spec=DiscreteSquareWave(epsilon=1.0, buckets=16, low=0.0, high=60.0)
    )


def test_discrete_square_wave_answers_are_values_sent_as_their_buckets():
    q = _dsw_question()
    assert q.kind == "numerical"
    answers = [0.0, 3.75, 3.7499999, 30.0, 59.99, 60.0]
    assert q.prepare(answers).tolist() == [0, 1, 0, 8, 15, 15]
    with pytest.raises(ValueError, match=r"answers must lie in \[0, 60\]"):
        q.prepare([61.0])
    clipped = dataclasses.replace(q, clip="clip")
    assert clipped.prepare([-1.0, 75.0]).tolist() == [0, 15]
    assert Question.from_dict(json.loads(json.dumps(q.to_dict()))) == q


def test_discrete_square_wave_question_end_to_end_through_a_collector(tmp_path):
    # Question -> randomize -> collector (POST, merged stats) -> estimate. The collector's
    # counts follow the exact law of the answers' buckets (chi-square, alpha = 1e-6); the
    # same counts reject the law at epsilon x 1.3 and the law of the mirrored answers.
    from scipy import stats as sps

    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from ldpkit import Stats
    from ldpkit.io import reports_to_dict
    from ldpkit.service import create_app

    q = _dsw_question()
    answers = 60.0 * np.random.default_rng(11).beta(5.0, 2.0, 20_000)
    reports = q.randomize(answers, rng=12)
    with TestClient(create_app({"wait": q.spec}, f"sqlite:///{tmp_path / 'c.db'}")) as client:
        assert client.post("/v1/reports/wait", json=reports_to_dict(reports)).status_code == 201
        stats = Stats.from_dict(client.get("/v1/collections/wait/stats").json())
        body = client.get("/v1/collections/wait/estimate").json()
    assert stats.n == answers.size

    spec = q.spec

    def p_value(values, matrix):
        expected = np.bincount(spec.bucketize(values), minlength=spec.buckets) @ matrix
        chi2 = float(np.sum((stats.counts - expected) ** 2 / expected))
        return float(sps.chi2.sf(chi2, spec.n_outputs - 1))

    law = spec.transition_matrix()
    assert p_value(answers, law) > 1e-6
    assert p_value(60.0 - answers, law) < 1e-6  # mirrored answers
    # epsilon x 1.3 on the same window: p = e^eps / (w e^eps + d - 1), q = p e^-eps
    e, w = math.exp(1.3 * spec.epsilon), 2 * spec.half_width + 1
    wrong = np.where(law == law.max(), e, 1.0) / (w * e + spec.buckets - 1)
    assert np.allclose(wrong.sum(axis=1), 1.0)
    assert p_value(answers, wrong) < 1e-6
    dist = q.estimate(stats)
    assert (dist.low, dist.high, dist.buckets) == (0.0, 60.0, 16)
    assert body["distribution"]["low"] == 0.0 and body["distribution"]["high"] == 60.0
    # EMS over 16 buckets of 3.75 at n = 2e4: the mean within one bucket of the truth
    assert abs(dist.mean() - answers.mean()) < 3.75
    assert abs(body["distribution"]["mean"] - answers.mean()) < 3.75


def test_numerical_answers_must_be_numbers():
    # strings, booleans and masked arrays used to be converted (or unmasked) silently
    q = _dsw_question()
    for bad in (["1.5"], [True, False], 5, [[1.0]], [object()]):
        with pytest.raises(TypeError, match="answers must be a sequence of numbers"):
            q.prepare(bad)
    with pytest.raises(TypeError, match="answers must be a plain array, not a masked array"):
        q.prepare(np.ma.masked_array([1.0, 2.0], mask=[True, False]))
    with pytest.raises(ValueError, match="must not be missing"):
        q.prepare([1.0, None])
