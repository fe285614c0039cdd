"""The OpenAPI description states the rules memlog checks on a request, so a client, or a fuzzer, can
tell a valid request from an invalid one: the name rule (schemas/envelope.py: 1 to 200
characters, no control character) on every name, in a path, a query or a body; a position token's
form for `after`; a question, a fact's text and a tool's name are never
empty. memlog's own checks stay the ones that refuse (naming the field in their words); this only
documents them; a route that waits on `after` declares the 503 of a position not applied in time.
Answers are described as FastAPI describes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memlog.app.positions import LAGGING_TOPICS
from projections.position import token_pattern
from schemas.events import MAX_NAME_LENGTH

# Unicode's control characters (category Cc); lone surrogates (Cs), the other refused category, have no
# place in a JSON string that a client encodes as UTF-8.
NAME_CHARACTER = r"[^\u0000-\u001f\u007f-\u009f]"
NAME = {"minLength": 1, "maxLength": MAX_NAME_LENGTH, "pattern": f"^{NAME_CHARACTER}+$"}
# a thread in a path (projections.archives.parse_thread)
OWNER = f"{NAME_CHARACTER}{{1,{MAX_NAME_LENGTH}}}"
THREAD = {"pattern": f"^(public|session:{OWNER}|automation:{OWNER})$"}
COMPONENT = "#/components/schemas/"
# a position token of a topic a read can wait on
POSITION = {"pattern": token_pattern(LAGGING_TOPICS)}
# request texts memlog refuses empty ("must not be empty"; an answer may be empty)
NOT_EMPTY = {"minLength": 1}
TEXTS = frozenset({"question", "text", "name"})
NOT_CAUGHT_UP = {
    "description": "`after` names a position not applied within the wait (Retry-After), or a store is away."
}
NAMES = frozenset(
    {
        "tenant",
        "subject",
        "agent",
        "asker",
        "conversation",
        "target",
        "exchange_id",
        "fact_id",
        "idempotency_key",
        "request_id",
        "run_id",
        "entry_id",
    }
)


def describe_names(schema: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI description with the name rule on every parameter and request body property that is
    a name. Answers are left as they are: an answer's `thread` is the thread's kind, and an `exchange_id`
    may be empty where no exchange is meant (a reset)."""
    components = schema.get("components", {}).get("schemas", {})
    for item in schema.get("paths", {}).values():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                _constrain(parameter["name"], parameter.get("schema", {}), _parameter_rule)
            if any(parameter["name"] == "after" for parameter in operation.get("parameters", [])):
                operation.setdefault("responses", {}).setdefault("503", NOT_CAUGHT_UP)
    for name in _request_components(schema, components):
        for field, prop in components[name].get("properties", {}).items():
            _constrain(field, prop, _body_rule)
    return schema


def _request_components(schema: dict[str, Any], components: dict[str, Any]) -> set[str]:
    """The components a request body uses, directly or through another component."""
    pending = [
        body
        for item in schema.get("paths", {}).values()
        for operation in item.values()
        for body in [operation.get("requestBody")]
        if body is not None
    ]
    found: set[str] = set()
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            ref = value.get("$ref")
            name = ref[len(COMPONENT) :] if isinstance(ref, str) and ref.startswith(COMPONENT) else None
            if name is not None and name not in found:
                found.add(name)
                pending.append(components.get(name, {}))
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return found & components.keys()


PARAMETER_RULES: dict[str, dict[str, Any]] = {"thread": THREAD, "after": POSITION}


def _parameter_rule(name: str) -> dict[str, Any] | None:
    return PARAMETER_RULES.get(name) or (NAME if name in NAMES else None)


def _body_rule(name: str) -> dict[str, Any] | None:
    # a body's `thread` is the thread's kind, an enum
    return NAME if name in NAMES else NOT_EMPTY if name in TEXTS else None


def _constrain(name: str, prop: dict[str, Any], rule_for: Callable[[str], dict[str, Any] | None]) -> None:
    rule = rule_for(name)
    if rule is None:
        return
    for string in [prop, *prop.get("anyOf", [])]:
        if string.get("type") == "string" and "enum" not in string and "const" not in string:
            string.update(rule)
