"""The tool results a fold keeps (seed 004: canonical tool calls and results survive condensation).

Seed 000 folds old exchanges into a summary of at most 3,000 characters; seed 004 wants what tools
returned to outlive that. The rule (DESIGN "Sessions and threads"): a summary ends with a tool results
section, one line per tool and arguments, holding the newest folded call's name, call index, status and
a bounded excerpt of its result. A later call of the same tool with the same arguments replaces the
line; when the section outgrows its share of the summary, the oldest lines go first. The section is
built here, with no model, so whatever summarizer writes the prose, the results survive every fold.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from projections.session import Exchange, ToolCall

HEADING = "Tool results (newest per tool and arguments):"
# the section's share of the summary: 40% of seed 000's 3,000 characters is 1,200, about ten lines
SHARE = 0.4
RESULT_CHARS = 160  # a result's excerpt: enough for a chest's contents, a price, a status
ARGUMENTS_CHARS = 80
ARROW = " → "  # separates a line's key (tool and arguments) from what it returned; never inside the key
ELLIPSIS = "…"
# memlog's own fact tools stay out: facts have their own store and heading in the context, and a fact
# forgotten after a fold must not live on in a summary line (its session copy reads [forgotten])
MEMORY_TOOLS = frozenset({"remember", "recall", "forget"})


def _flat(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: max(0, limit - 1)] + ELLIPSIS


def _compact(raw: str) -> str:
    """JSON text as one canonical line, so the same arguments give the same key however they were spaced."""
    try:
        return json.dumps(json.loads(raw), separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    except ValueError:
        return raw


def _key(call: ToolCall) -> str:
    arguments = _flat(_compact(call.arguments), ARGUMENTS_CHARS).replace(ARROW.strip(), "->")
    return f"- {call.name}({arguments})"


def tool_line(call: ToolCall) -> str:
    status = "ok" if call.ok else "failed"
    return f"{_key(call)}{ARROW}call {call.call_index} {status}: {_flat(_compact(call.result), RESULT_CHARS)}"


def split_summary(summary: str) -> tuple[str, list[str]]:
    """A summary's prose and the lines of its tool results section (none: an older summary, or no tools)."""
    prose, found, section = summary.partition(HEADING)
    if not found:
        return summary, []
    return prose.rstrip("\n"), [line for line in section.split("\n") if line.startswith("- ")]


def merge_tool_lines(previous: Sequence[str], folded: Sequence[Exchange], limit: int) -> list[str]:
    """The section's lines once `folded` is folded: the newest per tool and arguments, within `limit` characters."""
    lines: dict[str, str] = {}
    for line in previous:
        lines[line.partition(ARROW)[0]] = line
    for exchange in folded:
        for call in exchange.tool_calls:
            if call.name in MEMORY_TOOLS:
                continue
            key = _key(call)
            lines.pop(key, None)  # re-inserted last: the newest
            lines[key] = tool_line(call)
    kept = list(lines.values())
    while kept and len(HEADING) + sum(len(line) + 1 for line in kept) > limit:
        kept.pop(0)  # the oldest result goes first
    return kept


def section_budget(limit: int) -> int:
    return int(limit * SHARE)


def join_summary(prose: str, lines: Sequence[str], limit: int) -> str:
    """The prose, then the section, within `limit` (the prose gives way, never the section)."""
    if not lines:
        return prose[:limit]
    section = "\n".join([HEADING, *lines])
    room = limit - len(section) - 1
    prose = prose[: max(0, room)].rstrip("\n")
    return f"{prose}\n{section}" if prose else section
