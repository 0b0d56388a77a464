"""Small helpers shared by routers: pagination, problem responses in OpenAPI."""

from __future__ import annotations

from fastapi import Query

from ..schemas.models import Problem

ERRORS = {
    404: {"model": Problem, "description": "Not found"},
    409: {"model": Problem, "description": "State conflict"},
    413: {"model": Problem, "description": "Body too large"},
    415: {"model": Problem, "description": "Unsupported content type"},
    422: {"model": Problem, "description": "Invalid input"},
}


def errors(*codes: int) -> dict:
    ref = {"schema": {"$ref": "#/components/schemas/Problem"}}
    return {c: {**ERRORS[c], "content": {"application/problem+json": ref}} for c in codes}


MAX_OFFSET = 2**31 - 1  # bounded in the schema: larger values overflow database integers


class Page:
    def __init__(self, limit: int = Query(50, ge=1, le=1000), offset: int = Query(0, ge=0, le=MAX_OFFSET)):
        self.limit = limit
        self.offset = offset

