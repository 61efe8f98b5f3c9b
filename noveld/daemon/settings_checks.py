"""Checks of the merged settings beyond pydantic's own: a TOML value of the wrong type (which
pydantic's lax mode would coerce), and the sections' cross-field checks on the final values."""

from __future__ import annotations

import json
from typing import Any, get_args

from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails

from noveld.daemon.settings_sections import COMPLETE

_TOML_KINDS: dict[type, tuple[tuple[type, ...], str]] = {
    bool: ((bool,), "true or false"),
    int: ((int,), "a whole number"),
    float: ((int, float), "a number"),
}
"""What a TOML value of a bool, int or float setting must be (checked before pydantic, whose lax
mode would read ``max_docs = true`` as 1 and ``deterministic = "no"`` as false)."""


def _toml_kind(value: Any) -> str:
    """A TOML value's type, in TOML's words."""
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string"}
    names |= {list: "an array", dict: "a table"}
    return names.get(type(value), type(value).__name__)


def toml_type_problem(model: type[BaseModel], data: dict[str, Any], where: str) -> str | None:
    """The first boolean or number setting of a TOML file given a value of another type
    (``batch.max_docs is a boolean (true); it takes a whole number``), or None."""
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:  # an unknown key: pydantic names it
            continue
        args = get_args(field.annotation) or (field.annotation,)
        kinds = [a for a in args if a is not type(None)]
        nested = kinds[0] if len(kinds) == 1 else None
        if isinstance(nested, type) and issubclass(nested, BaseModel) and isinstance(value, dict):
            problem = toml_type_problem(nested, value, f"{where}{key}.")
            if problem is not None:
                return problem
            continue
        kind = _TOML_KINDS.get(nested) if isinstance(nested, type) else None
        if kind is not None and (type(value) not in kind[0]):
            shown = json.dumps(value) if isinstance(value, bool | int | float | str) else "…"
            return f"{where}{key} is {_toml_kind(value)} ({shown}); it takes {kind[1]}"
    return None


def check_complete(section: BaseModel, name: str) -> None:
    """Run a section's cross-field checks on the final settings (a pydantic-settings model
    re-validates through ``__init__``, which drops the validation context, so this is done
    once here); errors are reported under the section's name."""
    try:
        type(section).model_validate(section.model_dump(), context={COMPLETE: True})
    except ValidationError as exc:
        errors: list[InitErrorDetails] = [
            {
                "type": e["type"],
                "loc": (name, *e["loc"]),
                "input": e["input"],
                "ctx": e.get("ctx", {}),
            }
            for e in exc.errors()
        ]
        raise ValidationError.from_exception_data("Settings", errors, hide_input=True) from None
