"""The shared parameter schemas are valid JSON Schema and accept what they say."""

from __future__ import annotations

import jsonschema
import pytest

from imagelint.checks.params import UNITS, flag, name_selected, strings


@pytest.mark.parametrize("schema", [flag(), flag("d", default=True), strings(), strings("d", minItems=1)])
def test_schemas_are_valid(schema: dict[str, object]) -> None:
    jsonschema.Draft202012Validator.check_schema(schema)


def test_flag_and_strings_accept_what_they_say() -> None:
    jsonschema.validate(True, flag())
    assert flag("x", default=True) == {"type": "boolean", "default": True, "description": "x"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate("yes", flag())
    jsonschema.validate(["a.service"], strings())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([], strings(minItems=1))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([1], UNITS["units"])


def test_name_selected_applies_units_and_exclusions() -> None:
    params = {"units": ["ecs*"], "exclude_units": ["ecs-init.service"]}
    assert name_selected("ecs.service", params)
    assert not name_selected("ecs-init.service", params)
    assert not name_selected("sshd.service", params)
    assert name_selected("anything.service", {})
