"""Bodies of the Open Inference Protocol (KServe v2) endpoints.

Request bodies ignore fields they do not know (the kserve client adds ``model_name``, Triton's
client adds sequence and priority parameters), as the protocol asks. ``parameters`` values are
strings, numbers or booleans, so lists (feature names, categories, classes) are sent as JSON text.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt

Parameters = dict[str, Any]


class LiveResponse(BaseModel):
    live: bool


class ReadyResponse(BaseModel):
    ready: bool


class ErrorResponse(BaseModel):
    error: str = Field(description="What went wrong, as a sentence a person can act on.")


class ServerMetadataResponse(BaseModel):
    name: str
    version: str
    extensions: list[str]


class MetadataTensor(BaseModel):
    name: str
    datatype: str
    shape: list[int] = Field(description="-1 is a dimension of any size (the rows).")
    parameters: dict[str, str | int | float | bool] | None = None


class ModelMetadataResponse(BaseModel):
    name: str = Field(description="The model id.")
    versions: list[str]
    platform: str
    inputs: list[MetadataTensor]
    outputs: list[MetadataTensor]
    parameters: dict[str, str | int | float | bool] | None = None


class ModelReadyResponse(BaseModel):
    name: str
    ready: bool
    error: str | None = Field(default=None, description="Why it is not ready.")


class RequestInput(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    name: str
    shape: list[StrictInt]
    datatype: str
    parameters: Parameters = Field(default_factory=dict)
    data: Any = Field(
        default=None,
        description="Row-major elements, flat or nested; absent when the tensor is binary.",
    )


class RequestOutput(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    name: str
    parameters: Parameters = Field(default_factory=dict)


class InferenceRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    id: str | None = None
    parameters: Parameters = Field(default_factory=dict)
    inputs: list[RequestInput] = Field(min_length=1)
    outputs: list[RequestOutput] | None = Field(
        default=None, description="Outputs to return; absent or empty means all of them."
    )


class ResponseOutput(BaseModel):
    name: str
    shape: list[int]
    datatype: str
    parameters: Parameters | None = None
    data: list[Any] | None = None


class InferenceResponse(BaseModel):
    model_name: str
    model_version: str | None = None
    id: str | None = None
    parameters: Parameters | None = None
    outputs: list[ResponseOutput]
