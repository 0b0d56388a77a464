"""Open Inference Protocol (KServe V2) request and response models, for the OpenAPI document.

The infer endpoint decodes its body by hand (JSON, or JSON + binary tensor data), following InferenceRequest.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Datatype = Literal["BOOL", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64",
                   "FP16", "FP32", "FP64", "BYTES"]
Parameters = dict[str, bool | int | float | str]


class V2Error(BaseModel):
    """The protocol's error object."""

    error: str


class ServerLive(BaseModel):
    live: bool


class ServerReady(BaseModel):
    ready: bool


class ServerMetadata(BaseModel):
    name: str
    version: str
    extensions: list[str]


class MetadataTensor(BaseModel):
    name: str
    datatype: Datatype
    shape: list[int] = Field(description="-1 marks a variable-size dimension.")


class ModelMetadata(BaseModel):
    name: str
    versions: list[str]
    platform: str
    inputs: list[MetadataTensor]
    outputs: list[MetadataTensor]
    parameters: Parameters | None = None


class ModelReady(BaseModel):
    name: str
    ready: bool


class InferenceInput(BaseModel):
    name: str = Field(description="A feature name (shape [n] or [n, 1]), or any name for one [n, n_features] tensor.")
    shape: list[int]
    datatype: Datatype
    parameters: Parameters | None = Field(None, description="binary_data_size when the data follows the JSON header.")
    data: list[Any] | None = Field(None, description="Elements in row-major order (flat or nested).")


class InferenceRequestedOutput(BaseModel):
    name: Literal["predict", "predict_proba", "predict_std", "transform", "score_samples"]
    parameters: Parameters | None = Field(None, description="binary_data: true for binary output data.")


class InferenceRequest(BaseModel):
    id: str | None = None
    parameters: Parameters | None = Field(None, description="binary_data_output: true for binary outputs.")
    inputs: list[InferenceInput]
    outputs: list[InferenceRequestedOutput] | None = Field(None, description="Default: every output that applies.")


class InferenceOutput(BaseModel):
    name: str
    shape: list[int]
    datatype: Datatype
    parameters: Parameters | None = None
    data: list[Any] | None = None


class InferenceResponse(BaseModel):
    model_name: str
    model_version: str | None = None
    id: str | None = None
    parameters: Parameters | None = None
    outputs: list[InferenceOutput]
