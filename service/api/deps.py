"""Typed dependencies of the routers: the running app's objects, as parameters."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from ..services.dataplane import DataPlane


def data_plane(request: Request) -> DataPlane:
    return request.app.state.runtime.plane


Plane = Annotated[DataPlane, Depends(data_plane)]
