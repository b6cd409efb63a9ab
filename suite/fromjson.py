"""Dataclasses back from their JSON form (dataclasses.asdict, then json): generic over the fields'
annotations.

A nested dataclass field comes back as its dataclass, a `tuple[...]` field as a tuple (JSON has only
lists), `X | None` as X or None, a `Literal[...]` field as one of its values (another is refused); keys no
field has are dropped (a field since removed), missing ones take the field's default. The profile recorded
in a manifest is rebuilt this way on resume.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any


class FieldTypeError(ValueError):
    """A JSON value of another type than its field's: a string where a number is, a list where a name is."""


def from_plain(cls: type, data: dict) -> Any:
    """An instance of dataclass `cls` from its asdict()/JSON form; FieldTypeError naming the first field whose
    value is not of its annotated type."""
    if not isinstance(data, dict):
        raise FieldTypeError(f"{cls.__name__}: a JSON {type(data).__name__}, not an object")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    return cls(**{k: _checked(cls, k, hints[k], v) for k, v in data.items() if k in known})


# Scalars a field's annotation names, and the JSON values each accepts (an int where a float is declared).
_SCALARS = {int: (int,), float: (int, float), str: (str,), bool: (bool,)}


def _checked(cls: type, name: str, hint: Any, value: Any) -> Any:
    if typing.get_origin(hint) is typing.Literal and value not in typing.get_args(hint):
        choices = " or ".join(map(repr, typing.get_args(hint)))
        raise FieldTypeError(f"{cls.__name__}.{name} is {str(value)[:40]!r}, not {choices}")
    accepted = _SCALARS.get(hint)
    if accepted and (
        not isinstance(value, accepted)
        or (hint is not bool and isinstance(value, bool))
        or (isinstance(value, float) and not math.isfinite(value))
    ):
        raise FieldTypeError(f"{cls.__name__}.{name} is {str(value)[:40]!r}, not a {hint.__name__}")
    return _value_as(hint, value)


def _value_as(hint: Any, value: Any) -> Any:
    """`value` (from JSON) as the annotated type: dataclasses rebuilt, lists as tuples where a tuple is
    declared."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return _value_as(options[0], value) if len(options) == 1 else value
    if dataclasses.is_dataclass(hint) and isinstance(hint, type) and isinstance(value, dict):
        return from_plain(hint, value)
    if origin is tuple and isinstance(value, (list, tuple)):
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_value_as(args[0], v) for v in value)
        if args and len(args) == len(value):
            return tuple(_value_as(a, v) for a, v in zip(args, value))
        return tuple(value)
    if origin is list and isinstance(value, (list, tuple)):
        (arg,) = typing.get_args(hint) or (Any,)
        return [_value_as(arg, v) for v in value]
    return value
