"""The building blocks of every config section: the base class and the value types with their checks."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, field_validator
from pydantic_core import PydanticCustomError

Toggle = Literal["auto", True, False]
"""``auto``: on when the credentials it needs are present."""


def between(low: float, high: float) -> AfterValidator:
    def check(value: float) -> float:
        if not low <= value <= high:
            raise PydanticCustomError(
                "out_of_range", "must be between {low} and {high}", {"low": f"{low:g}", "high": f"{high:g}"}
            )
        return value

    return AfterValidator(check)


def at_least(low: float) -> AfterValidator:
    def check(value: float) -> float:
        if value < low:
            raise PydanticCustomError("too_small", "must be at least {low}", {"low": f"{low:g}"})
        return value

    return AfterValidator(check)


Fraction = Annotated[float, between(0.0, 1.0)]
Port = Annotated[int, between(0, 65535)]
PositiveInt = Annotated[int, at_least(1)]
PositiveFloat = Annotated[float, at_least(0.001)]
Secret = str | None


def id_as_text(value: object) -> object:
    """A user, chat, channel, server or team id, written as text or as a YAML whole number (what `/whoami`
    shows, unquoted: 123456789, -1001234567890, Discord's 18 digits, which YAML reads exactly), kept as text.
    A float or a boolean is refused: 1.5e17 has lost digits, and ``yes`` is YAML's true."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise PydanticCustomError("id_type", "must be an id, written as a whole number or as text")


IdList = list[Annotated[str, BeforeValidator(id_as_text)]]


def off_as_written(value: object) -> object:
    """YAML reads an unquoted ``off`` as false (and ``on`` as true): take them as the words written."""
    return {False: "off", True: "auto"}.get(value, value) if isinstance(value, bool) else value


def blank_to_none(value: object) -> object:
    return None if isinstance(value, str) and not value.strip() else value


class Section(BaseModel):
    """Base for every config section: strict about keys, immutable once loaded."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    @field_validator("*", mode="before")
    @classmethod
    def _empty_strings_are_unset(cls, value: object) -> object:
        # `${TOKEN:-}` with TOKEN unset gives "", which means "not configured".
        return blank_to_none(value)
