"""The OpenAPI description states the name rule memlog checks (schemas.events.check_name: 1 to 200
characters, no control character) on every name, in a path or a body, so a client, or a fuzzer, can
tell a valid request from an invalid one. memlog's own checks stay the ones that refuse (naming the
field in their words); this only documents them.
"""

from __future__ import annotations

from typing import Any

from schemas.events import MAX_NAME_LENGTH

# Unicode's control characters (category Cc); lone surrogates (Cs), the other refused category, have no
# place in a JSON string that a client encodes as UTF-8.
NAME_CHARACTER = r"[^\u0000-\u001f\u007f-\u009f]"
NAME = {"minLength": 1, "maxLength": MAX_NAME_LENGTH, "pattern": f"^{NAME_CHARACTER}+$"}
# a thread in a path (projections.archives.parse_thread)
OWNER = f"{NAME_CHARACTER}{{1,{MAX_NAME_LENGTH}}}"
THREAD = {"pattern": f"^(public|session:{OWNER}|automation:{OWNER})$"}
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
    """The OpenAPI description with the name rule on every parameter and body property that is a name."""
    for item in schema.get("paths", {}).values():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                _constrain(parameter["name"], parameter.get("schema", {}))
    for component in schema.get("components", {}).get("schemas", {}).values():
        for name, prop in component.get("properties", {}).items():
            _constrain(name, prop)
    return schema


def _constrain(name: str, prop: dict[str, Any]) -> None:
    rule = THREAD if name == "thread" else NAME if name in NAMES else None
    if rule is None:
        return
    for string in [prop, *prop.get("anyOf", [])]:
        if string.get("type") == "string" and "enum" not in string and "const" not in string:
            string.update(rule)
