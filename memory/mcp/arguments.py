"""One tool's arguments: a strict pydantic model built from its function's signature (memory/mcp/tools.py,
the types in memory/mcp/args.py), the input schema clients see, and the one line a wrong argument gets.

The model forbids arguments it does not name (a misspelt one would otherwise be dropped silently) and
words a refusal for a model: which argument, why, and what to send instead (pydantic's own text is
several lines with links to its docs). The arguments are validated once, here, and the validated values
are what the tool function gets.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

# The tool function's own parameters, filled by the server: the store and the caller (Principal).
SERVER_FILLED = ("store", "p")


class ArgumentError(ValueError):
    """A call's arguments were refused; the message is one line naming the argument and what to send."""


@dataclass(frozen=True)
class Arguments:
    """How one tool's arguments are read."""

    model: type[BaseModel]
    schema: dict[str, Any]  # the tool's inputSchema, as clients see it

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> Arguments:
        """The arguments of a tool function: every parameter after the store and the caller."""
        fields: dict[str, Any] = {}
        for name, param in inspect.signature(fn).parameters.items():
            if name in SERVER_FILLED:  # not evaluated: the Store is imported for the type checker only
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            # Written as strings (`from __future__ import annotations`): evaluated as inspect's eval_str does.
            annotation = eval(param.annotation, fn.__globals__) if isinstance(param.annotation, str) \
                else param.annotation
            fields[name] = (annotation, default)
        model = create_model(f"{fn.__name__}Arguments", __config__=ConfigDict(extra="forbid"), **fields)
        return cls(model, model.model_json_schema(by_alias=True))

    def parse(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The validated values, by parameter name; ArgumentError for a wrong, missing or unknown one."""
        try:
            parsed = self.model.model_validate(self._pre_parse(arguments))
        except ValidationError as e:
            raise ArgumentError(argument_error(e, self.schema)) from None
        return {name: getattr(parsed, name) for name in type(parsed).model_fields}

    def expect(self, argument: str) -> str | None:
        """What the argument takes, in words (None: no such argument)."""
        prop = self.schema.get("properties", {}).get(argument)
        return None if prop is None else expected(prop)

    def _pre_parse(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """A list or object sent as a JSON string, read as what it holds (some clients send every argument as a
        string). A string that does not read as JSON, or holds JSON too deep or a number too long for the
        parser, is validated as sent: the strict types then refuse it with the usual one line."""
        out = dict(arguments)
        fields = self.model.model_fields
        for key, value in arguments.items():
            field = fields.get(key)
            if field is None or not isinstance(value, str) or field.annotation is str:
                continue
            try:
                parsed = json.loads(value)
            except (ValueError, RecursionError):
                continue
            if not isinstance(parsed, str | int | float):  # "5" or "\"x\"" stay strings
                out[key] = parsed
        return out


def argument_error(e: ValidationError, schema: dict[str, Any]) -> str:
    """One line: which argument was wrong, why, and what to send instead."""
    props = schema.get("properties", {})
    err = e.errors(include_url=False)[0]
    name = ".".join(str(x) for x in err.get("loc", ())) or "arguments"
    top = str(err["loc"][0]) if err.get("loc") else ""
    if err["type"] == "extra_forbidden":
        return f"unknown argument {top!r}: this tool takes only {', '.join(props) or 'no arguments'}"
    if err["type"] == "missing":
        return f"missing argument {top!r}: send {expected(props.get(top, {}))}"
    got = json.dumps(err.get("input"), default=str)
    got = got if len(got) <= 60 else got[:57] + "..."
    msg = err.get("msg", "invalid value").rstrip(".")
    return f"argument {name!r} is wrong ({msg}; got {got}): send {expected(props.get(top, {}))}"


def expected(prop: dict[str, Any]) -> str:
    """What a schema property takes, in words, with its description."""
    desc = prop.get("description")
    kinds = [prop, *prop.get("anyOf", [])]
    parts = []
    for k in kinds:
        if "enum" in k:
            parts.append("one of " + ", ".join(json.dumps(v) for v in k["enum"]))
        elif k.get("type") == "array" and "enum" in k.get("items", {}):
            parts.append("a list of " + ", ".join(json.dumps(v) for v in k["items"]["enum"]))
        elif k.get("type") in ("integer", "number"):
            lo, hi = k.get("minimum"), k.get("maximum")
            parts.append(f"a{'n integer' if k['type'] == 'integer' else ' number'}"
                         + (f" from {lo} to {hi}" if lo is not None and hi is not None else ""))
        elif k.get("type") == "string":
            n = k.get("maxLength")
            parts.append("a string" + (f" of {k.get('minLength', 0)}-{n} characters" if n else ""))
        elif k.get("type") == "array":
            n = k.get("maxItems")
            parts.append("a list" + (f" of at most {n} items" if n else ""))
        elif k.get("type") == "boolean":
            parts.append("true or false")
        elif k.get("type") == "object":
            n = k.get("maxProperties")
            parts.append("an object" + (f" of at most {n} fields" if n else ""))
    what = " or ".join(dict.fromkeys(parts)) or "a valid value"
    return f"{what} ({desc})" if desc else what
