"""Dotted ``key=value`` overrides from the command line, merged over a preset and validated by the schema.

``algo.num_envs=2048 training.final_eval=false algo.params.actor_hidden_dims=[64,64]``: the key is a path of
field names through the config models; the value is read as a scalar (``true``/``false``, ``null``/``none``,
an int, a float, a JSON list or object) unless the field holds text, in which case it is kept verbatim.
Every mistake is an :class:`OverrideError` (a ``ValueError``) whose message names the key, the value and
what would have been valid: the keys at that level for an unknown key, the choices for an enum. A renamed
key (``trainrt.config.renames``, e.g. ``training.no_play``) is read as its new key with one deprecation
warning; giving it and the new key with contradicting values is an error.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import PurePath
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from trainrt.config.renames import RenamedField, renamed_fields_of
from trainrt.hotpath import cold_path

ModelT = TypeVar("ModelT", bound=BaseModel)
_NULL_WORDS = {"null", "none", "~"}
_BOOL_WORDS = {"true": True, "false": False}


class OverrideError(ValueError):
    """A command-line override or the config it produces is invalid; the message says how to fix it."""


@dataclasses.dataclass(frozen=True)
class Override:
    """One parsed ``key=value`` override: the dotted key split into parts, and the raw value text."""

    key: str
    value_text: str
    source: str

    @property
    def parts(self) -> tuple[str, ...]:
        """The key's field names, outermost first."""
        return tuple(self.key.split("."))


@cold_path
def parse_override(text: str) -> Override:
    """Split ``"a.b=value"`` into an :class:`Override` (the value may itself contain ``=``)."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise OverrideError(f"override {text!r} is not of the form key=value (e.g. algo.num_envs=2048)")
    if any(not part for part in key.split(".")):
        raise OverrideError(f"override {text!r}: key {key!r} has an empty part")
    return Override(key=key, value_text=value.strip(), source=text)


@cold_path
def parse_scalar(text: str) -> Any:
    """Read an override value: bool, null, int, float, JSON list/object, else the text itself."""
    lowered = text.lower()
    if lowered in _BOOL_WORDS:
        return _BOOL_WORDS[lowered]
    if lowered in _NULL_WORDS:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _field_names(obj: Any) -> list[str]:
    """Names of the configurable fields of a model or dataclass instance ([] for a leaf value)."""
    if isinstance(obj, BaseModel):
        return list(type(obj).model_fields)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [f.name for f in dataclasses.fields(obj)]
    return []


def _field_annotation(obj: Any, name: str) -> Any:
    """The declared type of field ``name`` on a model or dataclass instance."""
    if isinstance(obj, BaseModel):
        return type(obj).model_fields[name].annotation
    hints = typing.get_type_hints(type(obj))
    return hints.get(name, Any)


def _union_members(annotation: Any) -> tuple[Any, ...]:
    """The members of a union annotation (``(annotation,)`` when it is not a union)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return typing.get_args(annotation)
    return (annotation,)


def _is_text_type(annotation: Any) -> bool:
    """True when a field holds free text (str or a path), so its value is taken verbatim."""
    return (
        isinstance(annotation, type)
        and issubclass(annotation, (str, PurePath))
        and not issubclass(annotation, enum.Enum)
    )


def choices_of(annotation: Any) -> list[Any] | None:
    """The valid values of a Literal or Enum annotation (inside an Optional too), else ``None``."""
    found: list[Any] = []
    for member in _union_members(annotation):
        if typing.get_origin(member) is typing.Literal:
            found.extend(typing.get_args(member))
        elif isinstance(member, type) and issubclass(member, enum.Enum):
            found.extend(item.value for item in member)
        elif member is type(None):
            found.append(None)
        else:
            return None
    return found or None


def _convert(annotation: Any, text: str) -> Any:
    """Turn an override's value text into the Python value to validate, guided by the field's type."""
    members = [m for m in _union_members(annotation) if m is not type(None)]
    nullable = len(members) < len(_union_members(annotation))
    if members and all(_is_text_type(m) for m in members):
        return None if nullable and text.lower() in _NULL_WORDS else text
    choices = choices_of(annotation)
    if choices is not None and all(isinstance(c, str) or c is None for c in choices):
        return None if None in choices and text.lower() in _NULL_WORDS else text
    return parse_scalar(text)


@cold_path
def describe_keys(obj: Any) -> str:
    """Comma-separated field names of a config section, for error messages."""
    return ", ".join(_field_names(obj))


@cold_path
def duplicate_override_warnings(overrides: Iterable[Override]) -> list[str]:
    """One line per key given more than once, saying which value wins (the last one)."""
    seen: dict[str, list[Override]] = {}
    for override in overrides:
        seen.setdefault(override.key, []).append(override)
    return [
        f"{key} is given {len(given)} times ({', '.join(repr(o.source) for o in given)}); "
        f"the last one wins: {given[-1].source!r}"
        for key, given in seen.items()
        if len(given) > 1
    ]


def _is_mapping_field(obj: Any, name: str) -> bool:
    """True when field ``name`` of a model holds a free-form dict (``dict[str, ...]``)."""
    if not isinstance(obj, BaseModel):
        return False
    return any(typing.get_origin(m) in (dict, Mapping) for m in _union_members(_field_annotation(obj, name)))


def _set_nested(target: dict[str, Any], part: str, override: Override, start: int) -> None:
    """Set ``override.parts[start:]`` inside the dict ``target[part]`` (creating levels) to the parsed value."""
    node = target.setdefault(part, {})
    keys = override.parts[start:]
    for depth, key in enumerate(keys[:-1]):
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            where = ".".join(override.parts[: start + depth + 1])
            raise OverrideError(
                f"override {override.source!r}: {where!r} holds the value {child!r}, not a section"
            )
        node = child
    node[keys[-1]] = parse_scalar(override.value_text)


def _renamed_field_at(config: BaseModel, parts: tuple[str, ...]) -> RenamedField | None:
    """The renamed field whose old name an override's key ends in, else ``None``."""
    node: Any = config
    for part in parts[:-1]:
        if part not in _field_names(node):
            return None
        node = getattr(node, part)
    if parts[-1] in _field_names(node):
        return None
    return renamed_fields_of(node).get(parts[-1])


@cold_path
def read_renamed_keys(
    config: BaseModel, overrides: Sequence[Override], warn: Callable[[str], None]
) -> list[Override]:
    """``overrides`` with every deprecated key replaced by its new key; one ``warn`` line per old key used.

    The replacement keeps the original text as its ``source``, so later errors name what was typed. Raises
    :class:`OverrideError` for an old key's unreadable value, and when an old key and its new key are both
    given with contradicting values (the order does not matter: neither is "the last one").
    """
    result: list[Override] = []
    warned: set[str] = set()
    from_old: dict[str, tuple[RenamedField, Any, Override]] = {}
    direct: dict[str, Override] = {}
    for override in overrides:
        field = _renamed_field_at(config, override.parts)
        if field is None:
            result.append(override)
            direct[override.key] = override
            continue
        try:
            value = field.new_value(parse_scalar(override.value_text))
        except ValueError as err:
            raise OverrideError(
                f"invalid value for {override.key!r}: {override.value_text!r} (from override "
                f"{override.source!r}): {err}"
            ) from None
        if override.key not in warned:
            warned.add(override.key)
            warn(field.deprecation_message())
        new_key = ".".join((*override.parts[:-1], field.new_name))
        text = json.dumps(value) if field.inverted else override.value_text
        result.append(Override(key=new_key, value_text=text, source=override.source))
        from_old[new_key] = (field, value, override)
    for new_key, (field, value, old) in from_old.items():
        given = direct.get(new_key)
        if given is not None and not field.same_value(value, parse_scalar(given.value_text)):
            raise OverrideError(field.conflict_message(repr(old.source), repr(given.source)))
    return result


@cold_path
def apply_overrides(
    config: ModelT,
    overrides: Iterable[str | Override],
    *,
    reserved: Mapping[str, str] | None = None,
    warn: Callable[[str], None] | None = None,
) -> ModelT:
    """Return a new ``config`` with the overrides applied and the result validated by its schema.

    Args:
        config: the preset (a validated pydantic model).
        overrides: ``"a.b=value"`` strings (or parsed :class:`Override`), applied left to right.
        reserved: keys that may not be overridden, mapped to what sets them instead (e.g. ``--algo``).
        warn: receives a line for every key given more than once and for every deprecated key used
            (default: ``warnings.warn``).
    """
    reserved = reserved or {}
    merged = config.model_dump()
    parsed = [item if isinstance(item, Override) else parse_override(item) for item in overrides]

    def emit(line: str) -> None:
        if warn is not None:
            warn(line)
        else:
            warnings.warn(line, UserWarning, stacklevel=3)

    for line in duplicate_override_warnings(parsed):
        emit(line)
    parsed = read_renamed_keys(config, parsed, emit)
    by_key: dict[tuple[str, ...], Override] = {}
    for override in parsed:
        if override.key in reserved:
            raise OverrideError(
                f"{override.key!r} cannot be overridden ({override.source!r}); {reserved[override.key]}"
            )
        node: Any = config
        target = merged
        for depth, part in enumerate(override.parts):
            names = _field_names(node)
            where = ".".join(override.parts[:depth]) or "the top level"
            if not names:
                raise OverrideError(
                    f"unknown config key {override.key!r} in override {override.source!r}: "
                    f"{where!r} is a value, not a section"
                )
            if part not in names:
                raise OverrideError(
                    f"unknown config key {override.key!r} in override {override.source!r}: no {part!r} under "
                    f"{where if depth == 0 else repr(where)}; valid keys there: {', '.join(names)}"
                )
            if depth < len(override.parts) - 1 and _is_mapping_field(node, part):
                # a free-form mapping (e.g. task.rewards): the rest of the key is nested dict keys; the
                # section's own validator checks them (against the task's terms)
                _set_nested(target, part, override, depth + 1)
                break
            if depth == len(override.parts) - 1:
                if _field_names(getattr(node, part)):
                    raise OverrideError(
                        f"config key {override.key!r} in override {override.source!r} is a section, not a "
                        f"value; set one of its keys: {describe_keys(getattr(node, part))}"
                    )
                target[part] = _convert(_field_annotation(node, part), override.value_text)
            else:
                node = getattr(node, part)
                target = target[part]
        by_key[override.parts] = override
    try:
        return type(config).model_validate(merged)
    except ValidationError as err:
        raise OverrideError(format_validation_error(err, config, by_key)) from None


def _walk_annotation(config: BaseModel, key: Sequence[str]) -> Any:
    """Annotation of the field at ``key`` in ``config`` (``None`` when the path does not resolve)."""
    node: Any = config
    annotation = None
    for part in key:
        if part not in _field_names(node):
            return None
        annotation = _field_annotation(node, part)
        node = getattr(node, part)
    return annotation


_FRIENDLIER_MESSAGES = {"finite_number": "must be a finite number, not inf or nan"}
"""Our wording of pydantic's error messages, by error type."""


@cold_path
def format_validation_error(
    err: ValidationError, config: BaseModel, overrides: Mapping[tuple[str, ...], Override] | None = None
) -> str:
    """Render pydantic errors as ``key: value -> problem (valid choices)`` lines, naming the override used."""
    overrides = overrides or {}
    lines = []
    for item in err.errors():
        key = _field_path(config, item["loc"])
        message = _FRIENDLIER_MESSAGES.get(item["type"], item["msg"].removeprefix("Value error, "))
        if not key:  # a check across fields: the message names the keys
            lines.append(message)
            continue
        line = f"invalid value for {'.'.join(key)!r}"
        if item["type"] != "missing":
            line += f": {item.get('input')!r}"
        if key in overrides:
            line += f" (from override {overrides[key].source!r})"
        else:  # a free-form mapping section (task.rewards ...) is checked as a whole: name its overrides
            inside = [o.source for k, o in overrides.items() if len(k) > len(key) and k[: len(key)] == key]
            if inside:
                line += f" (from overrides {', '.join(repr(s) for s in inside)})"
        line += f": {message}"
        choices = choices_of(_walk_annotation(config, key))
        if choices is not None:
            line += f"; valid choices: {', '.join(str(c) for c in choices)}"
        lines.append(line)
    return "invalid config:\n  " + "\n  ".join(lines)


def _field_path(config: BaseModel, loc: Sequence[Any]) -> tuple[str, ...]:
    """The dotted field path of an error location, without discriminated-union tags or list indices.

    A tag (``"sac"`` in ``("algo", "sac", "params", ...)``) is a non-final location element that names no
    field of the section it is in; the final element is always kept (it may be an extra, forbidden key).
    """
    path: list[str] = []
    node: Any = config
    for index, part in enumerate(loc):
        if not isinstance(part, str):
            continue
        last = index == len(loc) - 1
        if part in _field_names(node):
            node = getattr(node, part)
            path.append(part)
        elif last:
            path.append(part)
    return tuple(path)
