"""Model records as the API serves them: read one (404 when it does not exist), delete one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import Conflict, found

if TYPE_CHECKING:
    from .projects import ProjectMeta, ProjectRuntime


def get_record(meta: ProjectMeta, model_id: str) -> dict:
    """The model's record; 404 when it does not exist (or belongs to another project)."""
    return found(meta.get_model(model_id), "model", model_id)


def delete(r: ProjectRuntime, model_id: str) -> None:
    """Delete a model: its record, its cached bundle, its artifact. 409 while it trains (cancel its job first)."""
    m = get_record(r.meta, model_id)
    if m["status"] == "training":
        raise Conflict(f"model {model_id!r} is still training; cancel job {m['job_id']} first")
    # the record first: from now on every request gets 404; a request that read the record just before and
    # finds the artifact gone gets 404 too (ModelCache.load re-checks the record), never a 500
    r.meta.delete_model(model_id)
    r.cache.evict(model_id)
    r.art.delete_model(model_id)
