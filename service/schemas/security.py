"""Request and response models of API keys and the audit log."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field

from ..services.keys import PROJECT_PATTERN
from .models import Strict

Scope = Literal["read", "predict", "train", "admin"]


class KeyCreate(Strict):
    name: str = Field(..., min_length=1, max_length=100, description="What the key is for (shown in lists and "
                                                                      "the audit log).")
    scopes: list[Scope] = Field(..., min_length=1, max_length=4, description="read: GET everything; predict: "
                                "predict, evaluate, explain, /v2 infer; train: datasets, train, model selection, "
                                "cancel, delete; admin: keys, audit and every other scope, in every project.")
    project: str | None = Field(None, pattern=PROJECT_PATTERN, max_length=63,
                                description="The project the key works in (default: 'default').")
    expires_at: AwareDatetime | None = Field(None, description="When the key stops working (RFC 3339 with a "
                                                               "time zone); none: it works until revoked.")


class Key(BaseModel):
    id: str
    name: str
    prefix: str = Field(..., description="The key's first characters, to recognise it (never the key).")
    scopes: list[Scope]
    project: str
    created_at: dt.datetime
    expires_at: dt.datetime | None = None
    revoked_at: dt.datetime | None = None


class KeyCreated(Key):
    key: str = Field(..., description="The key itself: shown only in this answer, stored only as a hash.")


class KeyList(BaseModel):
    data: list[Key]
    count: int


class AuditEntry(BaseModel):
    id: int
    at: dt.datetime
    key_id: str | None = Field(None, description="null: no valid key (the call was refused with 401) or an "
                                                 "open server's anonymous user (key_name 'anonymous').")
    key_name: str | None = None
    project: str | None = None
    method: str
    route: str = Field(..., description="The route template, e.g. /v1/models/{model_id}.")
    action: str = Field(..., description="The operation id, e.g. delete_model.")
    target_id: str | None = Field(None, description="The id acted on or created.")
    status: int
    request_id: str | None = None
    client: str | None = None


class AuditList(BaseModel):
    data: list[AuditEntry]
    count: int
