"""What every profile section shares: its error type, its split names, and the strict base
model whose rules hold for every field (``Strict``)."""

from __future__ import annotations

import types
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError


class ProfileError(ValueError):
    """An invalid profile or run config."""


TrainSplit = Literal["saturated", "strict_saturated", "hard"]
"""The splits a training row trains on (App. A.1, Table 7)."""


def _admits_bool(tp: Any) -> bool:
    """Whether a field of type ``tp`` means to hold a boolean (``bool``, ``bool | None``)."""
    if tp is bool or tp is Any:
        return True
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return any(_admits_bool(arm) for arm in get_args(tp))
    if origin is Literal:
        return any(isinstance(v, bool) for v in get_args(tp))
    return False


def _item_types(tp: Any, length: int) -> list[Any] | None:
    """The annotations of a list/tuple field's items (the first sequence arm of a union)."""
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        for arm in get_args(tp):
            found = _item_types(arm, length)
            if found is not None:
                return found
        return None
    args = get_args(tp)
    if origin is list and args:
        return [args[0]] * length
    if origin is tuple and args:
        return [args[0]] * length if args[-1] is Ellipsis else list(args)[:length]
    return None


def _type_text(tp: Any) -> str:
    """What a field allows, for the error message (``an integer``, ``one of [1, 8, ...]``)."""
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(_type_text(arm) for arm in get_args(tp) if arm is not type(None))
    if origin is Literal:
        return f"one of {list(get_args(tp))}"
    if origin in (list, tuple):
        return "a list"
    return {int: "an integer", float: "a number", str: "a string"}.get(tp, getattr(
        tp, "__name__", str(tp)))


def _misplaced_bool(value: Any, tp: Any, where: str = "") -> tuple[str, Any] | None:
    """The first boolean in ``value`` where ``tp`` expects none: (item path, expected type).
    Nested models are left to their own validator (it runs when they validate)."""
    if _admits_bool(tp):
        return None
    if isinstance(value, bool):
        return where, tp
    if isinstance(value, (list, tuple)):
        items = _item_types(tp, len(value))
        for i, (item, item_tp) in enumerate(zip(value, items or [], strict=False)):
            found = _misplaced_bool(item, item_tp, f"{where}[{i}]")
            if found is not None:
                return found
    return None


class Strict(BaseModel):
    """The shared base: no unknown keys, no infinities or NaN in any float (``allow_inf_nan``
    applies to every float field, lists of floats included), no boolean where a number or any
    other non-boolean type is expected."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_non_bool(cls, value: Any, info: ValidationInfo) -> Any:
        """pydantic's lax mode reads ``true`` as 1 for ``int``, ``float`` and ``Literal[1, ...]``
        fields (``sampling: {n: true}`` would sample once); a YAML boolean there is a mistake.
        Strict int types would refuse it for scalars only: the items of ``tuple[int, int]``
        would each need an ``Annotated`` type, so one check over every field's annotation
        covers scalars, list and tuple items, and every section alike."""
        if info.field_name is None:
            return value
        tp = cls.model_fields[info.field_name].annotation
        found = _misplaced_bool(value, tp)
        if found is not None:
            where, expected = found
            raise PydanticCustomError(
                "bool_not_allowed",
                "a boolean is not allowed {where}: expected {expected} (YAML true/false is a "
                "boolean, not 1/0; write the value itself)",
                {"where": f"at {info.field_name}{where}" if where else "here",
                 "expected": _type_text(expected)})
        return value
