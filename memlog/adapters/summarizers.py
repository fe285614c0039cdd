"""Pluggable summarizers for folds: extractive (the default, offline) or any OpenAI-compatible endpoint."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import httpx

from memlog.adapters.openai_compat import openai_client
from memlog.config.settings import Settings
from projections.engines import Summarizer, SummarizerFailed
from projections.session import Exchange
from projections.summary import extractive_summary
from schemas.errors import ServiceSetupError

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "You maintain the running summary of a conversation between a user and an assistant. "
    "Rewrite the previous summary to include what matters from the new exchanges: facts the user "
    "stated, decisions, open questions. Keep every fact from the previous summary. "
    "Answer with the summary only, at most {limit} characters."
)


class ExtractiveSummarizer:
    name = "extractive"

    async def summarize(self, previous: str, folded: Sequence[Exchange], limit: int) -> str:
        return extractive_summary(previous, folded, limit)


class ChatCompletionsSummarizer:
    """Calls an OpenAI-compatible `POST {url}/chat/completions`.

    Args:
        url: base URL, e.g. ``https://api.example.com/v1``.
        model: the model name sent with each request.
        api_key: sent as a bearer token when given.
        timeout: seconds for one call; a slower answer counts as a failure.
    """

    def __init__(self, url: str, model: str, api_key: str | None, timeout: float) -> None:
        self.name = f"openai:{model}"
        self._model = model
        self._timeout = timeout
        self._client = openai_client(url, api_key, timeout)

    async def summarize(self, previous: str, folded: Sequence[Exchange], limit: int) -> str:
        transcript = "".join(exchange.render() for exchange in folded)
        body = {
            "model": self._model,
            "messages": [
                {"role": "system", "content": INSTRUCTIONS.format(limit=limit)},
                {
                    "role": "user",
                    "content": f"Previous summary:\n{previous or '(none)'}\n\nNew exchanges:\n{transcript}",
                },
            ],
            "temperature": 0,
        }
        try:
            response = await asyncio.wait_for(self._client.post("/chat/completions", json=body), self._timeout)
            response.raise_for_status()
            content = response.json()["choices"][0]["message"]["content"]
        except (httpx.HTTPError, TimeoutError, KeyError, IndexError, TypeError, ValueError) as exc:
            raise SummarizerFailed(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        if not isinstance(content, str) or not content.strip():
            raise SummarizerFailed(f"{self.name}: empty summary")
        return content.strip()[:limit]

    async def close(self) -> None:
        await self._client.aclose()


def make_summarizer(settings: Settings) -> Summarizer:
    if settings.summarizer == "openai":
        if not settings.summarizer_url or not settings.summarizer_model:
            raise ServiceSetupError("MEMLOG_SUMMARIZER=openai needs MEMLOG_SUMMARIZER_URL and MEMLOG_SUMMARIZER_MODEL")
        return ChatCompletionsSummarizer(
            settings.summarizer_url,
            settings.summarizer_model,
            settings.summarizer_api_key,
            settings.summarizer_timeout_seconds,
        )
    return ExtractiveSummarizer()
