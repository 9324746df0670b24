"""The pydantic base every API model derives from: camelCase aliases, unknown fields refused.

Used by every model in ``modelserving.api``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class ApiModel(BaseModel):
    """A strict, camelCase API object; unknown fields are refused so typos never pass silently."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=False,
        validate_default=True,
    )

    def to_api(self) -> dict[str, Any]:
        """JSON-compatible form with camelCase field names; unset optionals left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
