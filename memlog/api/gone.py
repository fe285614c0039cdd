"""A request's work stopped when its client goes away (issue 41: no search runs on for nobody)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from fastapi import Request
from starlette.exceptions import HTTPException

T = TypeVar("T")
CHECK_SECONDS = 0.1  # how often the client is looked at: the work stops this soon after it leaves
CLIENT_CLOSED = 499  # nginx's "client closed request": no one reads this answer


async def unless_gone(request: Request, work: Awaitable[T]) -> T:
    """The work's result; the work cancelled once the client has closed its connection, which ends its
    MongoDB reads in flight (the driver drops their connection) and any it had yet to make."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=CHECK_SECONDS)
            if done:
                return task.result()
            if await request.is_disconnected():
                raise HTTPException(CLIENT_CLOSED, "the client closed the request")
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
