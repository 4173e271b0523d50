"""ldpkit.Device: keyed derivation, memoization, persistence, atomic writes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ldpkit import GRR, OLH, Device
from ldpkit.longitudinal import LGRR, LOSUE, LOUE
from ldpkit.testing import chisquare_gof

SECRET = bytes(range(32))


def test_permanent_answers_are_derived_from_the_secret(tmp_path):
    spec = LOSUE(epsilon_inf=2.0, epsilon_1=1.0, domain_size=12)
    a = Device(secret=SECRET, path=tmp_path / "a.json")
    b = Device(secret=SECRET, path=tmp_path / "b.json")  # the memo file lost: same answers
    c = Device(secret=bytes(32), path=tmp_path / "c.json")
    answers_a = [a.permanent(spec, v)["data"] for v in range(12)]
    assert answers_a == [b.permanent(spec, v)["data"] for v in range(12)]
    assert answers_a != [c.permanent(spec, v)["data"] for v in range(12)]
    # another question (fingerprint) gets other answers from the same secret
    other = LOSUE(epsilon_inf=2.5, epsilon_1=1.0, domain_size=12)
    assert answers_a != [a.permanent(other, v)["data"] for v in range(12)]


def test_reports_rerandomize_the_memo_and_persist(tmp_path):
    path = tmp_path / "device.json"
    spec = LGRR(epsilon_inf=1.0, epsilon_1=0.5, domain_size=16)
    device = Device(path=path)
    days = [device.report(spec, [5], rng=day).values[0] for day in range(200)]
    assert len(set(days)) > 3  # the instantaneous round: not a stable identifier
    perm = int(device.permanent(spec, 5)["data"][0])
    # the reports are the instantaneous law of the memoized answer
    counts = np.bincount(np.asarray(days, dtype=np.int64), minlength=16)
    assert chisquare_gof(counts, spec.instantaneous_matrix()[perm]) > 1e-4
    # a restart reads the secret and the memo back
    again = Device(path=path)
    assert again.permanent(spec, 5) == device.permanent(spec, 5)
    assert again.distinct_values(spec) == 1
    assert again.privacy_spent(spec) == pytest.approx(spec.longitudinal_privacy_loss())
    device.report(spec, [1, 2, 5], rng=0)
    assert Device(path=path).distinct_values(spec) == 3
    assert device.privacy_spent(spec) == pytest.approx(3 * spec.longitudinal_privacy_loss())


def test_the_memoized_law_over_many_devices(tmp_path):
    """Across devices, the permanent answers follow the permanent round's law."""
    spec = LGRR(epsilon_inf=1.0, epsilon_1=0.5, domain_size=6)
    perms = []
    for i in range(300):
        dev = Device(secret=i.to_bytes(16, "big"), path=tmp_path / "d.json")
        perms.append(int(dev.permanent(spec, 2)["data"][0]))
        dev.path.unlink()
    counts = np.bincount(perms, minlength=6)
    assert chisquare_gof(counts, spec.permanent_matrix()[2]) > 1e-4


def test_specs_without_two_rounds_memoize_the_whole_report(tmp_path):
    device = Device(secret=SECRET, path=tmp_path / "d.json")
    for spec in (GRR(epsilon=1.0, domain_size=8), OLH(epsilon=1.0, domain_size=8)):
        first = device.report(spec, [3, 4], rng=1)
        second = device.report(spec, [3, 4], rng=2)
        assert first.equals(second)  # identical every day: documented as a stable identifier
        assert spec.aggregate(first).n == 2
    grr = GRR(epsilon=1.0, domain_size=8)
    assert device.privacy_spent(grr) == pytest.approx(2 * grr.privacy_loss())


def test_unary_reports_have_the_spec_layout(tmp_path):
    spec = LOUE(epsilon_inf=2.0, epsilon_1=1.0, domain_size=10)
    device = Device(secret=SECRET, path=tmp_path / "d.json")
    reports = device.report(spec, [0, 9, 9], rng=3)
    fresh = spec.randomize([0, 9, 9], rng=3)
    assert reports.fields == fresh.fields == ("bits",)
    assert reports.bits.shape == fresh.bits.shape and reports.bits.dtype == np.uint8
    assert spec.aggregate(reports).n == 3


def test_bad_inputs(tmp_path):
    path = tmp_path / "d.json"
    Device(secret=SECRET, path=path)
    with pytest.raises(ValueError, match="secret must be the one stored"):
        Device(secret=bytes(32), path=path)
    with pytest.raises(ValueError, match="secret must be bytes"):
        Device(secret=b"short", path=tmp_path / "x.json")
    with pytest.raises(TypeError, match="secret must be bytes"):
        Device(secret="text", path=tmp_path / "y.json")  # type: ignore[arg-type]
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="path must be an ldpkit device file"):
        Device(path=bad)
    bad.write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="path must be an ldpkit device file"):
        Device(path=bad)
    device = Device(path=path)
    spec = LGRR(epsilon_inf=2.0, epsilon_1=1.0, domain_size=4)
    with pytest.raises(ValueError, match="values must be"):
        device.report(spec, [4])
    with pytest.raises(TypeError, match="spec must be"):
        device.report("LGRR", [1])  # type: ignore[arg-type]


_WRITER = """
import sys
from ldpkit import Device
from ldpkit.longitudinal import LOUE
spec = LOUE(epsilon_inf=2.0, epsilon_1=1.0, domain_size=1000)
device = Device(secret=bytes(range(32)), path=sys.argv[1])
print("ready", flush=True)
v = 0
while True:  # one new value per write: the file grows with every save
    device.report(spec, [v % 1000], rng=0)
    v += 1
"""


@pytest.mark.skipif(os.name == "nt", reason="SIGKILL is POSIX")
def test_a_killed_writer_leaves_an_intact_file(tmp_path):
    path = tmp_path / "device.json"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    for delay in (0.3, 0.7):
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, env=env
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
            time.sleep(delay)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        device = Device(path=path)  # parses: the old or the new file, never a torn one
        assert device.distinct_values(LOUE(epsilon_inf=2.0, epsilon_1=1.0, domain_size=1000)) > 0
        assert not [p for p in tmp_path.iterdir() if p.name != "device.json"] or all(
            p.name.startswith(".device-") for p in tmp_path.iterdir() if p.name != "device.json"
        )
