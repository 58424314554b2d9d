"""Config keys that were renamed: the old key is still read, as the new one, with a deprecation warning.

A config model declares its renamed fields on the class, in ``renamed_fields``; undeclared means the old
name is an unknown key. Command-line overrides (``trainrt.config.overrides``) and model validation (a dict
in Python, the ``config.json`` of an older run) translate through the same :class:`RenamedField`, so the
two cannot disagree. A run directory's ``config.json`` is a record an older version wrote, not a use of the
old key, so reading it (validation context :data:`STORED_CONFIG_KEY` true) translates without a warning.
The translated config holds, and writes, only the new key.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from trainrt.hotpath import cold_path

STORED_CONFIG_KEY = "stored_config"
"""Validation context key: true for a run directory's ``config.json`` read back (renamed keys do not warn)."""

_BOOL = TypeAdapter(bool)


@dataclasses.dataclass(frozen=True)
class RenamedField:
    """A field's old dotted key, still accepted as its new key.

    ``inverted``: the old field is a boolean of the opposite meaning (``training.no_play=true`` is
    ``training.final_eval=false``).
    """

    old_key: str
    new_key: str
    inverted: bool = False

    @property
    def old_name(self) -> str:
        """The old field name within its section."""
        return self.old_key.rpartition(".")[2]

    @property
    def new_name(self) -> str:
        """The new field name within its section."""
        return self.new_key.rpartition(".")[2]

    @cold_path
    def new_value(self, old_value: Any) -> Any:
        """The new field's value for ``old_value`` of the old one; ``ValueError`` when that cannot be read."""
        if not self.inverted:
            return old_value
        try:
            return not _BOOL.validate_python(old_value)
        except ValidationError:
            raise ValueError(
                f"{self.old_key} must be true or false, got {old_value!r} "
                f"(it is the deprecated name of {self.new_key}, with the opposite meaning)"
            ) from None

    @cold_path
    def same_value(self, new_value: Any, other: Any) -> bool:
        """True when ``other`` (a raw value given for the new key) reads as ``new_value``; unreadable: True.

        An unreadable ``other`` is left to the field's own validation, which names the problem.
        """
        if not self.inverted:
            return new_value == other
        try:
            return _BOOL.validate_python(other) == new_value
        except ValidationError:
            return True

    def deprecation_message(self) -> str:
        """The one-line warning shown when the old key is used."""
        if self.inverted:
            return (
                f"{self.old_key} is deprecated: use {self.new_key} (the opposite: {self.old_key}=true is "
                f"{self.new_key}=false)"
            )
        return f"{self.old_key} is deprecated: use {self.new_key}"

    def conflict_message(self, old_given: str, new_given: str) -> str:
        """The error for the old and the new key given with contradicting values."""
        return (
            f"{old_given} and {new_given} contradict each other: {self.old_key} is the deprecated name of "
            f"{self.new_key}"
            + (" with the opposite meaning" if self.inverted else "")
            + f"; give only {self.new_key}"
        )


@cold_path
def renamed_fields_of(node: Any) -> dict[str, RenamedField]:
    """The renamed fields a config model (class or instance) declares, by old field name ({} for others)."""
    cls = node if isinstance(node, type) else type(node)
    if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
        return {}
    return {renamed.old_name: renamed for renamed in getattr(cls, "renamed_fields", ())}


@cold_path
def translate_renamed_fields(
    model: type[BaseModel], data: Any, *, warn: Callable[[str], None] | None = None
) -> Any:
    """``data`` (a model's raw input) with each old field name replaced by its new one and value.

    Raises ``ValueError`` naming both keys when the old and the new one are given with contradicting values.

    Args:
        model: the config model whose ``renamed_fields`` apply.
        data: the raw input; anything but a dict is returned as it is.
        warn: receives the deprecation line of every old key found (None: no warning).
    """
    renamed = renamed_fields_of(model)
    if not isinstance(data, dict) or not renamed.keys() & data.keys():
        return data
    data = dict(data)
    for old_name, field in renamed.items():
        if old_name not in data:
            continue
        old_value = data.pop(old_name)
        value = field.new_value(old_value)
        if field.new_name in data and not field.same_value(value, data[field.new_name]):
            raise ValueError(
                field.conflict_message(
                    f"{field.old_key}={old_value!r}", f"{field.new_key}={data[field.new_name]!r}"
                )
            )
        data.setdefault(field.new_name, value)
        if warn is not None:
            warn(field.deprecation_message())
    return data


@cold_path
def warn_deprecated(line: str) -> None:
    """The default channel of a renamed key's deprecation line: ``warnings.warn``."""
    warnings.warn(line, DeprecationWarning, stacklevel=2)
