"""The declarative parameter constraints (ldpkit._constraints) and what reads them."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import ClassVar

import pytest

from ldpkit import GRR, OLH, RAPPOR
from ldpkit._constraints import (
    Boolean,
    Integer,
    Options,
    Real,
    Ref,
    check_parameter,
    hostile_values,
    parameter_table,
    size_fields,
    small_values,
)
from ldpkit.spec import _REGISTRY, mechanism_registry
from ldpkit.testing import check_mechanism

DOC = Path(__file__).resolve().parents[1] / "docs" / "reference" / "parameters.md"


def undeclared_fields(cls: type) -> list[str]:
    """Return the init fields of ``cls`` that its ``_parameter_constraints`` do not declare."""
    declared = cls.parameter_constraints()
    return [f.name for f in dataclasses.fields(cls) if f.init and f.name not in declared]


def test_every_registered_spec_declares_each_init_field():
    """A new spec (public, private or abstract) must declare a constraint per init field."""
    mechanism_registry()  # loads every family
    missing = {
        name: undeclared_fields(cls)
        for name, cls in _REGISTRY.items()
        if cls.__module__.startswith("ldpkit.") and undeclared_fields(cls)
    }
    assert not missing, f"fields without a declared constraint: {missing}"


def test_an_undeclared_field_is_caught():
    """A field added without a declaration is listed (and so fails the test above)."""

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class _Extra(GRR):
        name: ClassVar[str] = "_ExtraFieldForTheConstraintTest"
        smoothing: float = 0.5

    assert undeclared_fields(_Extra) == ["smoothing"]
    assert undeclared_fields(GRR) == []


def test_parameter_table_is_current():
    """docs/reference/parameters.md equals the table generated from the declarations."""
    assert DOC.read_text() == parameter_table(mechanism_registry()), (
        "docs/reference/parameters.md is stale: run "
        "PYTHONPATH=src python tests/test_constraints.py --write"
    )


def test_messages_and_error_types():
    """One message format; TypeError for a wrong type, ValueError for a wrong value."""
    owner = GRR
    assert check_parameter(3, "k", [Integer(1, 5)], owner) == 3
    with pytest.raises(ValueError, match=r"^k must be an integer in \[1, 5\], got 6$"):
        check_parameter(6, "k", [Integer(1, 5)], owner)
    for bad in (2.5, "3", True, math.nan):
        with pytest.raises(TypeError, match=r"^k must be an integer in \[1, 5\], got"):
            check_parameter(bad, "k", [Integer(1, 5)], owner)
    # None accepted; listed last the single constraint's message stays as it was
    assert check_parameter(None, "k", [Integer(1, 5), None], owner) is None
    with pytest.raises(ValueError, match=r"^k must be an integer in \[1, 5\], got 0$"):
        check_parameter(0, "k", [Integer(1, 5), None], owner)
    # listed first, the message says None is accepted
    with pytest.raises(ValueError, match=r"^o must be None or 'a' or 'b', got 'c'$"):
        check_parameter("c", "o", [None, Options("a", "b")], owner)
    with pytest.raises(TypeError, match="o must be 'a' or 'b', got 3"):
        check_parameter(3, "o", [Options("a", "b")], owner)
    # several alternatives: one message; TypeError only when no type fits
    mixed = [Integer(1, 5), Options("auto")]
    assert check_parameter("auto", "m", mixed, owner) == "auto"
    assert check_parameter(2, "m", mixed, owner) == 2
    with pytest.raises(ValueError, match=r"^m must be an integer in \[1, 5\] or one of \['auto'\]"):
        check_parameter(9, "m", mixed, owner)
    with pytest.raises(TypeError, match="m must be"):
        check_parameter(1.5, "m", mixed, owner)
    assert check_parameter(0.5, "r", [Real(0.0, 1.0, low_inclusive=False)], owner) == 0.5
    with pytest.raises(ValueError, match=r"r must be a finite number > 0 and <= 1, got 0"):
        check_parameter(0, "r", [Real(0.0, 1.0, low_inclusive=False)], owner)
    with pytest.raises(TypeError, match="b must be True or False"):
        check_parameter(1, "b", [Boolean()], owner)


def test_ref_bounds_read_the_spec():
    """A Ref bound reads the field of the spec being built and is named in the message."""
    spec = RAPPOR(epsilon=1.0, domain_size=6, num_bits=8, num_hashes=2)
    with pytest.raises(ValueError, match=r"num_hashes must be an integer in \[1, 8\], got 9"):
        spec.replace(num_hashes=9)
    assert Integer(1, Ref("num_bits")).describe(RAPPOR) == "an integer in [1, num_bits]"
    assert str(Ref("domain_size", -1)) == "domain_size - 1"


def test_hostile_values_are_refused_with_the_declared_type():
    """Every derived hostile value is refused by the spec with the predicted error type."""
    spec = OLH(epsilon=1.0, domain_size=6)
    rows = hostile_values(spec)
    assert set(rows) == {"epsilon", "domain_size", "hash_range", "mix_items"}
    assert (True, TypeError) in rows["domain_size"] and (1, ValueError) in rows["domain_size"]
    assert (None, TypeError) in rows["domain_size"]  # not nullable
    assert all(v is not None for v, _ in rows["hash_range"])  # nullable
    for field, cases in rows.items():
        for value, exc in cases:
            with pytest.raises(exc, match=field):
                spec.replace(**{field: value})


def test_sizes_and_small_values_come_from_the_declaration():
    """The size fields and small_spec's values are the declared ones."""
    assert size_fields(RAPPOR) == ("domain_size", "num_bits", "num_hashes", "num_cohorts")
    assert small_values(RAPPOR) == {"domain_size": 6, "num_bits": 16, "num_cohorts": 2}
    from ldpkit.sets import PaddingSampling

    assert size_fields(PaddingSampling) == ("domain_size", "padding")
    # the memory message names every declared size of the configuration
    with pytest.raises(ValueError, match=r"^domain_size=2147483648, padding=2 must keep the st"):
        PaddingSampling(epsilon=1.0, domain_size=2**31, padding=2)


def test_the_contract_catches_a_spec_that_skips_its_declaration():
    """The validation check tries the declared hostile values: a spec not honouring them fails."""

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class _Lax(GRR):
        name: ClassVar[str] = "_LaxForTheConstraintTest"

        def __post_init__(self) -> None:  # the bug under test: no declared checks
            self._validate()

    check_mechanism(GRR(epsilon=1.0, domain_size=6), checks=["validation"])
    with pytest.raises(AssertionError, match="validation"):
        check_mechanism(_Lax(epsilon=1.0, domain_size=6), checks=["validation"])


if __name__ == "__main__":  # PYTHONPATH=src python tests/test_constraints.py --write
    import sys

    if "--write" in sys.argv:
        DOC.parent.mkdir(parents=True, exist_ok=True)
        DOC.write_text(parameter_table(mechanism_registry()))
        print(f"wrote {DOC}")
