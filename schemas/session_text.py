"""The text an exchange event adds to its thread's session, and its token count carried in the event.

One rule for both sides: the producer counts `added_text` of the event it builds and carries the count
(`tokens`, QuestionAsked v4, ToolCalled v3, AnswerGiven v3); the session projection adds that same text
when the event adds anything, and uses the carried count for it instead of counting again. An event
without a count (produced before, or by a producer without a tokenizer) is counted on read. Pure: no I/O,
and no tokenizer: the count function is given by the caller (projections.tokens builds it).
"""

from __future__ import annotations

from collections.abc import Callable

from schemas.events import PUBLIC_THREAD, ExchangeEvent, QuestionAsked, ToolCalled

TokenCount = Callable[[str], int]


def question_text(question: str, *, thread: str, asker: str | None, subject: str | None) -> str:
    """A question as its session shows it. Seed 000: on the public thread "each question starts with the
    asker's name, so a friend's follow-up makes sense"."""
    if thread == PUBLIC_THREAD:
        return f"{asker or subject or 'someone'}: {question}"
    return question


def tool_call_text(name: str, arguments: str, result: str) -> str:
    """What a tool call (arguments and result as JSON texts) adds to its exchange's count."""
    return f"tool {name}({arguments}): {result}"


def added_text(event: ExchangeEvent) -> str:
    """The text the event adds to its session when it adds anything (the first question of an exchange,
    a tool call not replacing an earlier one with its index, the first answer)."""
    if isinstance(event, QuestionAsked):
        env = event.envelope
        return question_text(event.question, thread=env.thread, asker=event.asker, subject=env.subject)
    if isinstance(event, ToolCalled):
        return tool_call_text(event.name, event.arguments, event.result)
    return event.answer


def tokens_of(event: ExchangeEvent, count: TokenCount) -> int:
    """The token count of `added_text(event)`: the one the event carries, else counted now."""
    if event.tokens is not None:
        return event.tokens
    text = added_text(event)
    return count(text) if text else 0


def count_of(text: str, count: TokenCount | None) -> int | None:
    """The count a producer carries for `text`; None without a tokenizer (the projection counts it)."""
    if count is None:
        return None
    return count(text) if text else 0
