"""Every tool's result is typed (issue 42): its body returns the result model the catalog names, and the output
schema clients get from that model is exact (additionalProperties false), so every field a tool can send is
declared. Keyed retries still answer with the fields only a replay sets."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from memory.mcp import results as R
from memory.mcp import tools as T
from memory.mcp.auth import make_principal
from memory.mcp.catalog import TOOLS, returns
from tests.memory.mcp_support import call

WORK = make_principal("tester", ["work"], "work")
# Objects whose keys are the person's or capture's own (a memory's type fields, an evidence row's meta): open maps.
FREE_FORM = {"MemoryRecord.details", "EvidenceRow.meta"}


def _objects(schema: dict, defs: dict, where: str, seen: set[str]):
    """(path, object schema) for every object level of a JSON schema, following $refs into defs once."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name not in seen:
            seen.add(name)
            yield from _objects(defs[name], defs, name, seen)
        return
    if schema.get("type") == "object" or "properties" in schema:
        yield where, schema
    for key, sub in (schema.get("properties") or {}).items():
        yield from _objects(sub, defs, f"{where}.{key}", seen)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from _objects(schema[key], defs, where, seen)
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key) or []:
            yield from _objects(sub, defs, where, seen)


def test_every_output_schema_is_closed_at_every_object_level():
    assert len(TOOLS) == 19
    for name, spec in TOOLS.items():
        schema = spec.info.output_schema
        assert schema is not None, name
        levels = list(_objects(schema, schema.get("$defs", {}), spec.result.__name__, set()))
        assert levels[0][0] == spec.result.__name__, name
        for where, obj in levels:
            if "properties" in obj:  # a record: every field declared, nothing else allowed
                assert obj.get("additionalProperties") is False, f"{name}: {where}"
            elif where not in FREE_FORM:  # a map (counts per kind, ...): its values typed
                assert isinstance(obj.get("additionalProperties"), dict) and obj["additionalProperties"], \
                    f"{name}: {where} is an untyped object"


def test_every_tool_body_returns_its_catalog_result_model():
    for name, spec in TOOLS.items():
        assert returns(getattr(T, name)) is spec.result, name
        assert issubclass(spec.result, R.BaseModel) and spec.result.model_config.get("extra") == "forbid", name


def test_models_refuse_an_undeclared_field():
    with pytest.raises(ValidationError, match="extra"):
        R.MemoryAdded(created=None, actor="a", surprise=1)


def test_keyed_retries_answer_with_replayed_and_the_first_row(store):
    async def steps(c):
        return [await c.call_tool(name, args) for name, args in [
            ("memory_add", {"text": "Lunch is at noon", "idempotency_key": "m-1"}),
            ("memory_add", {"text": "Lunch is at noon", "idempotency_key": "m-1"}),
            ("evidence_add", {"text": "standup notes", "idempotency_key": "e-1"}),
            ("evidence_add", {"text": "standup notes", "idempotency_key": "e-1"}),
        ]]

    first_mem, again_mem, first_evd, again_evd = call(store, WORK, steps)
    for first, again in ((first_mem, again_mem), (first_evd, again_evd)):
        assert not first.is_error and not again.is_error, again.content[0].text
        assert "replayed" not in first.structured_content  # never set on a first write: absent, not null
        assert again.structured_content["replayed"] is True and "idempotency_key" in again.structured_content["hint"]
        assert again.structured_content["created"]["id"] == first.structured_content["created"]["id"]
        assert json.loads(again.content[0].text) == again.structured_content
    assert store.count("memory", local=True) == 1 and store.count("evidence", local=True) == 1
    # The same through the bodies: the model, with replayed set only on the retry.
    direct = T.memory_add(store, WORK, "Lunch is at noon", idempotency_key="m-1")
    assert isinstance(direct, R.MemoryAdded) and direct.replayed is True
    assert "replayed" in direct.model_fields_set and "existing" not in direct.model_fields_set
