"""The pydantic base every API model derives from: camelCase aliases, unknown fields refused.

Used by every model in ``modelserving.api``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel


class ApiModel(BaseModel):
    """A strict, camelCase API object; unknown fields are refused so typos never pass silently."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=False,
        validate_default=True,
        strict=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, data: Any) -> Any:
        """An explicit ``null`` means "not set", as the API server treats it (so defaults apply)."""
        if isinstance(data, dict) and None in data.values():
            return {k: v for k, v in data.items() if v is not None}
        return data

    def to_api(self) -> dict[str, Any]:
        """JSON-compatible form with camelCase field names; unset optionals left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
