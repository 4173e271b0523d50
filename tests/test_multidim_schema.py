"""A tuple declared once as Questions: Schema builds every multidim spec, names its results."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ldpkit import Question, Survey
from ldpkit.multidim import (
    CALM,
    HDG,
    AttributeSampling,
    DuchiMean,
    GroupMean,
    LaplaceMean,
    NamedEstimate,
    Schema,
    SchemaSpec,
    TupleMeans,
)
from ldpkit.numeric import HybridMechanism, PiecewiseMechanism, SquareWave
from ldpkit.testing import check_mechanism

CARRIERS = ["AA", "DL", "UA", "B6"]


def _schema(**numerical: str) -> Schema:
    return Schema(
        [
            Question.categorical("carrier", CARRIERS),
            Question.numerical("hour", low=0, high=24, mechanism=numerical.get("hour", "pm")),
            Question.numerical("delay", low=-30, high=120, mechanism=numerical.get("delay", "pm")),
            Question.categorical("origin", ["EWR", "JFK", "LGA"]),
        ]
    )


def _answers(n: int, seed: int = 0) -> pd.DataFrame:
    gen = np.random.default_rng(seed)
    carrier = gen.choice(CARRIERS, n, p=[0.4, 0.3, 0.2, 0.1])
    hour = gen.uniform(5, 23, n)
    # delays depend on the carrier: a group mean to find
    base = pd.Series(carrier).map({"AA": 5.0, "DL": 15.0, "UA": 30.0, "B6": 60.0}).to_numpy()
    delay = np.clip(base + gen.normal(0, 10, n), -30, 120)
    origin = gen.choice(["EWR", "JFK", "LGA"], n)
    return pd.DataFrame({"carrier": carrier, "hour": hour, "delay": delay, "origin": origin})


# -- Question constructors --------------------------------------------------------------------
def test_question_constructors_build_the_declared_specs():
    """Check that numerical/categorical questions carry bounds, mechanism and encoder."""
    assert Question.numerical("x", low=0, high=5).spec == PiecewiseMechanism(
        epsilon=1.0, low=0.0, high=5.0
    )
    assert isinstance(Question.numerical("x", low=0, high=5, mechanism="hm").spec, HybridMechanism)
    assert isinstance(Question.numerical("x", low=0, high=5, mechanism="sw").spec, SquareWave)
    q = Question.categorical("c", ["a", "b"], mechanism="olh", epsilon=2.0)
    assert q.spec.domain_size == 2 and q.spec.epsilon == 2.0 and q.encoder.categories == ["a", "b"]
    assert Question.from_dict(q.to_dict()).fingerprint == q.fingerprint


def test_numerical_questions_in_a_survey_and_a_schema():
    """Check that the same questions serve a Survey (per question) and a Schema (one tuple)."""
    schema = _schema()
    survey = Survey(list(schema.questions), epsilon=2.0, split="users")
    data = _answers(4000)
    out = survey.estimate(survey.aggregate(survey.randomize(data, rng=0)))
    assert set(out) == set(schema.names)
    assert np.isfinite(out["delay"].mean)
    spec = Schema(survey.questions).spec(DuchiMean, epsilon=2.0, attributes=["hour", "delay"])
    assert spec.spec == DuchiMean(epsilon=2.0, low=(0.0, -30.0), high=(24.0, 120.0))


# -- the specs the schema builds ---------------------------------------------------------------
def test_schema_fills_every_specs_declaration():
    """Check the domain sizes, bounds and column order of each kind of spec."""
    schema = _schema(hour="hm", delay="hm")
    both = schema.spec(AttributeSampling, epsilon=4.0)
    assert both.names == ("hour", "delay", "carrier", "origin")  # numerical first
    assert both.spec.domain_sizes == (4, 3) and both.spec.mechanism == "hm"
    assert both.spec.low == (0.0, -30.0) and both.spec.high == (24.0, 120.0)
    # an explicit mechanism wins over the questions'
    assert schema.spec("AttributeSampling", epsilon=4.0, mechanism="pm").spec.mechanism == "pm"
    grid = schema.spec(HDG, epsilon=1.0, attributes=("delay", "hour"), population=1000)
    assert grid.names == ("delay", "hour") and grid.spec.low == (-30.0, 0.0)
    group = schema.spec(GroupMean, epsilon=1.0, attributes=("delay", "carrier"))
    assert group.names == ("carrier", "delay")  # the group first
    assert group.spec == GroupMean(epsilon=1.0, domain_size=4, low=-30.0, high=120.0)
    calm = schema.spec(CALM, epsilon=1.0, attributes=("origin", "carrier"))
    assert calm.spec.domain_sizes == (3, 4)


@pytest.mark.parametrize(
    ("method", "attributes", "params"),
    [
        ("AttributeSampling", None, {"sampled": 2}),
        ("DuchiMean", ("hour", "delay"), {}),
        ("LaplaceMean", ("hour", "delay"), {}),
        ("HDG", ("hour", "delay"), {"population": 48}),
        ("TDG", ("hour", "delay"), {"population": 48}),
        ("UniformGrid", ("hour", "delay"), {"population": 48}),
        ("GroupMean", ("carrier", "delay"), {}),
    ],
)
def test_specs_built_by_a_schema_pass_the_contract(method, attributes, params):
    """Check that each numerical-attribute spec a schema builds honours the contract."""
    built = _schema().spec(method, epsilon=1.0, attributes=attributes, **params)
    check_mechanism(built.spec, rng=0, n=48)  # every check of CONTRACT_CHECKS


# -- unbiasedness through the schema path -------------------------------------------------------
def _z(est: float, truth: float, se: float) -> float:
    return (est - truth) / se


def test_attribute_sampling_through_the_schema_is_unbiased():
    """Check the z-scores of every mean and share estimated from raw labelled answers."""
    data = _answers(60_000, seed=1)
    spec = _schema().spec(AttributeSampling, epsilon=3.0)
    result = spec.run(data, rng=2)
    assert isinstance(result, NamedEstimate) and isinstance(result.result, TupleMeans)
    for name in ("hour", "delay"):
        mean, se = result[name]
        assert abs(_z(mean, data[name].mean(), se)) < 5, name
    carrier = result["carrier"]
    truth = data["carrier"].value_counts(normalize=True).reindex(CARRIERS).to_numpy()
    z = (carrier.frequencies - truth) / carrier.std_error
    assert np.abs(z).max() < 5
    assert list(carrier.labels) == CARRIERS


def test_the_schema_z_test_fails_for_a_wrong_epsilon():
    """Check that the same z-test rejects estimates decoded with the wrong epsilon."""
    data = _answers(60_000, seed=1)
    spec = _schema().spec(AttributeSampling, epsilon=3.0)
    stats = spec.aggregate(spec.randomize(data, rng=2))
    wrong = SchemaSpec(spec=spec.spec.replace(epsilon=1.5), questions=spec.questions)
    result = wrong.estimate(stats.__class__(wrong.spec, stats.n, **stats.arrays))
    zs = [abs(_z(result[name][0], data[name].mean(), result[name][1])) for name in ("hour",)]
    zs += list(
        np.abs(
            (
                result["carrier"].frequencies
                - data["carrier"].value_counts(normalize=True).reindex(CARRIERS).to_numpy()
            )
            / result["carrier"].std_error
        )
    )
    assert max(zs) > 6


def test_group_means_through_the_schema_name_the_groups():
    """Check the group means from labelled answers, by carrier label, against the truth."""
    data = _answers(200_000, seed=3)
    spec = _schema().spec(GroupMean, epsilon=2.0, attributes=("carrier", "delay"), oracle="grr")
    frame = spec.run(data, rng=4).to_frame()
    assert list(frame["carrier"]) == CARRIERS and frame.attrs["value"] == "delay"
    truth = data.groupby("carrier")["delay"].mean().reindex(CARRIERS).to_numpy()
    z = (frame["mean"].to_numpy() - truth) / frame["std_error"].to_numpy()
    assert np.abs(z).max() < 5


def test_range_queries_and_frames_use_names():
    """Check that a box by name equals the box by position, and frames carry names."""
    data = _answers(20_000)
    spec = _schema().spec(HDG, epsilon=2.0, attributes=("hour", "delay"), population=20_000)
    result = spec.run(data, rng=5)
    box = {"delay": (0.0, 30.0)}
    assert result.range_query(box) == result.result.range_query((None, (0.0, 30.0)))
    assert result.interval(box) == result.result.interval((None, (0.0, 30.0)))
    means = _schema().spec(LaplaceMean, epsilon=2.0, attributes=("delay", "hour")).run(data, rng=6)
    assert list(means.to_frame()["attribute"]) == ["delay", "hour"]
    assert means.means.shape == (2,)  # the result's own attributes read through
    calm = _schema().spec(CALM, epsilon=2.0, attributes=("carrier", "origin")).run(data, rng=7)
    table = calm.marginal(("origin", "carrier"))
    assert table.table.shape == (3, 4)
    frame = calm.to_frame()
    assert set(frame["carrier"]) == set(CARRIERS) and set(frame["marginal"]) == {"carrierxorigin"}


# -- the default, from the declared attributes ---------------------------------------------------
@pytest.mark.parametrize(
    "query, attributes, params",
    [
        ("frequencies", ("carrier", "origin"), {"domain_sizes": (4, 3)}),
        ("marginals", ("carrier", "origin"), {"domain_sizes": (4, 3)}),
        ("ranges", ("hour", "delay"), {"low": (0.0, -30.0), "high": (24.0, 120.0)}),
        ("means", ("hour", "delay"), {"low": (0.0, -30.0), "high": (24.0, 120.0)}),
        (
            "means",
            ("carrier", "delay", "hour"),
            {"domain_sizes": (4,), "low": (-30.0, 0.0), "high": (120.0, 24.0)},
        ),
        (
            "group_means",
            ("delay", "carrier"),
            {"domain_sizes": (4,), "low": (-30.0,), "high": (120.0,)},
        ),
    ],
)
def test_auto_picks_what_auto_picks_on_the_declared_attributes(query, attributes, params):
    """Check that Schema.auto is auto on the schema's sizes and bounds, columns in order."""
    from ldpkit.multidim import auto

    picked = _schema().auto(1.0, query=query, attributes=attributes, population=50_000)
    assert picked.spec == auto(1.0, query=query, population=50_000, **params)
    kinds = [q.kind for q in picked.questions]
    assert sorted(picked.names) == sorted(attributes)
    if picked.spec.name in ("AttributeSampling", "DuchiMean", "LaplaceMean"):
        assert kinds == sorted(kinds, reverse=True)  # numerical columns first
    if picked.spec.name == "GroupMean":
        assert picked.names == ("carrier", "delay")


def test_auto_group_means_name_the_groups():
    """Check the group means of the picked spec against the truth, by carrier label."""
    data = _answers(200_000, seed=8)
    picked = _schema().auto(2.0, query="group_means", attributes=("carrier", "delay"))
    frame = picked.run(data, rng=9).to_frame()
    assert list(frame["carrier"]) == CARRIERS
    truth = data.groupby("carrier")["delay"].mean().reindex(CARRIERS).to_numpy()
    z = (frame["mean"].to_numpy() - truth) / frame["std_error"].to_numpy()
    assert np.abs(z).max() < 5


def test_auto_refuses_attributes_the_query_cannot_take():
    """Check that a query and attributes of the wrong kinds name the attributes."""
    schema = _schema()
    with pytest.raises(ValueError, match="query must be one of"):
        schema.auto(1.0, query="medians")
    with pytest.raises(ValueError, match="attributes must all be numerical for query='ranges'"):
        schema.auto(1.0, query="ranges")
    with pytest.raises(ValueError, match="attributes must all be categorical for query='margi"):
        schema.auto(1.0, query="marginals", attributes=("carrier", "hour"))
    with pytest.raises(ValueError, match="attributes must be one categorical and one numerical"):
        schema.auto(1.0, query="group_means")
    with pytest.raises(ValueError, match="attributes must include a numerical question"):
        schema.auto(1.0, query="means", attributes=("carrier",))
    with pytest.raises(ValueError, match="epsilon must be"):
        schema.auto(0.0, query="ranges", attributes=("hour", "delay"))


# -- bad input ------------------------------------------------------------------------------
def test_bad_schemas_and_answers_name_the_parameter():
    """Check the errors of a bad declaration, a bad spec request and bad answers."""
    q = Question.numerical("x", low=0, high=1)
    with pytest.raises(ValueError, match="questions must have distinct names"):
        Schema([q, q])
    with pytest.raises(TypeError, match="questions must be a non-empty sequence"):
        Schema([])
    with pytest.raises(TypeError, match="questions must be a non-empty sequence"):
        Schema(["x"])
    with pytest.raises(ValueError, match="high must be a finite number > low"):
        Question.numerical("x", low=1, high=0)
    with pytest.raises(ValueError, match="mechanism must be 'pm', 'hm' or 'sw'"):
        Question.numerical("x", low=0, high=1, mechanism="duchi")
    with pytest.raises(ValueError, match="mechanism must be 'grr', 'olh' or 'oue'"):
        Question.categorical("c", ["a", "b"], mechanism="hr")
    schema = _schema()
    with pytest.raises(ValueError, match="method must be one of"):
        schema.spec("GRR", epsilon=1.0)
    with pytest.raises(ValueError, match="attributes must all be numerical for HDG"):
        schema.spec(HDG, epsilon=1.0)
    with pytest.raises(ValueError, match="attributes must all be categorical for CALM"):
        schema.spec(CALM, epsilon=1.0)
    with pytest.raises(ValueError, match="attributes must be one categorical and one numerical"):
        schema.spec(GroupMean, epsilon=1.0, attributes=("hour", "delay"))
    with pytest.raises(ValueError, match="attributes must be names of the schema"):
        schema.spec(DuchiMean, epsilon=1.0, attributes=("hour", "speed"))
    with pytest.raises(TypeError, match="params must not set"):
        schema.spec(DuchiMean, epsilon=1.0, attributes=("hour", "delay"), low=(0, 0))
    with pytest.raises(ValueError, match="epsilon must be"):
        schema.spec(DuchiMean, epsilon=-1.0, attributes=("hour", "delay"))
    mixed = Schema([Question.numerical("a", low=0, high=1, mechanism="hm"), q])
    with pytest.raises(ValueError, match="mechanism must be given"):
        mixed.spec(AttributeSampling, epsilon=1.0)
    spec = schema.spec(DuchiMean, epsilon=1.0, attributes=("hour", "delay"))
    with pytest.raises(ValueError, match="answers must have a column per attribute"):
        spec.prepare({"hour": [1.0]})
    with pytest.raises(ValueError, match=r"answers must lie in \[-30, 120\]"):
        spec.prepare({"hour": [1.0], "delay": [500.0]})
    with pytest.raises(ValueError, match="answers must hold one 1-D column per attribute"):
        spec.prepare({"hour": [1.0, 2.0], "delay": [5.0]})
    with pytest.raises(TypeError, match="answers must be a mapping"):
        spec.prepare(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="attribute must be one of"):
        spec.run(_answers(100), rng=0).index("speed")
    cat = schema.spec(CALM, epsilon=1.0, attributes=("carrier", "origin"))
    with pytest.raises(ValueError, match="labels must be among the encoder"):
        cat.prepare({"carrier": ["ZZ"], "origin": ["EWR"]})


def test_clipping_follows_the_question():
    """Check that a question declared with clip='clip' clips, as in a Survey."""
    schema = Schema(
        [
            Question.numerical("a", low=0, high=1, clip="clip"),
            Question.numerical("b", low=0, high=1),
        ]
    )
    spec = schema.spec(DuchiMean, epsilon=1.0)
    x = spec.prepare({"a": [-5.0, 0.5, 7.0], "b": [0.0, 0.5, 1.0]})
    assert x.tolist() == [[0.0, 0.0], [0.5, 0.5], [1.0, 1.0]]
