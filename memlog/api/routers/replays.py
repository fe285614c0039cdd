"""Replays an operator starts over HTTP and follows by id."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from memlog.api.auth import OPERATOR_ONLY, requested_by
from memlog.api.deps import CONFLICT, NOT_FOUND, ServicesDep
from memlog.api.models import ReplayIn
from schemas.errors import NotFound

router = APIRouter()


@router.post("/v1/replays", status_code=202, dependencies=OPERATOR_ONLY, responses=CONFLICT)
async def start_replay(body: ReplayIn, request: Request, services: ServicesDep) -> dict[str, Any]:
    """Rebuild projections from the topics into a fresh namespace (all tenants; operators only)."""
    return await services.replays.start(
        body.projection, since=body.since, switch=body.switch, workers=body.workers, requested_by=requested_by(request)
    )


@router.get("/v1/replays/{replay_id}", dependencies=OPERATOR_ONLY, responses=NOT_FOUND)
async def replay_status(replay_id: str, services: ServicesDep) -> dict[str, Any]:
    """A replay started through the API: running (with its progress), done, failed, or interrupted (the
    API process running it ended); kept in MongoDB, so an API restart does not lose it."""
    status = await services.replays.status(replay_id)
    if status is None:
        raise NotFound(f"no replay {replay_id} was started through the API")
    return status
