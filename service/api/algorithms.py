from fastapi import APIRouter

from core import registry

from ..errors import NotFound
from ..schemas.models import Algorithm, AlgorithmList, Problem
from .deps import Read

router = APIRouter(prefix="/v1/algorithms", tags=["algorithms"])


@router.get("", response_model=AlgorithmList, operation_id="list_algorithms")
def list_algorithms(_: Read) -> dict:
    """Every algorithm with its task, parameter JSON Schema and capabilities."""
    data = [registry.describe(n) for n in registry.names()]
    return {"data": data, "count": len(data)}


@router.get("/{name}", response_model=Algorithm, operation_id="get_algorithm",
            responses={404: {"model": Problem}})
def get_algorithm(name: str, _: Read) -> dict:
    try:
        return registry.describe(name)
    except registry.UnknownAlgorithm:
        raise NotFound(f"unknown algorithm {name!r}; GET /v1/algorithms lists them") from None
