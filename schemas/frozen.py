"""Frozen dataclasses built at about the cost of plain ones (issue 16: a replay builds several per event).

A frozen dataclass's generated `__init__` sets each field through `object.__setattr__` (its own
`__setattr__` refuses), which costs several times a plain assignment: measured, 5.5 µs against 1.1 µs
for nine fields, and a replayed exchange event builds about ten such values. `quick` gives the class
an `__init__` with the very same signature, defaults, default factories and `__post_init__` call
that writes the fields into the instance's `__dict__` instead; the instance is then exactly what
the generated `__init__` makes (the same `__dict__`, equality, hash, repr, pickling), and it stays
frozen: assigning to a field afterwards still raises.

Only for frozen dataclasses without slots, `init=False` or keyword-only fields (checked when the
class is decorated). Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


class _Factory:
    """The default of a parameter whose field has a default factory: call the factory."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def quick(cls: type[T]) -> type[T]:
    """`cls` (a frozen dataclass) with an `__init__` that sets its fields without `object.__setattr__`."""
    if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__qualname__} is not a frozen dataclass")
    if "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__qualname__} has slots: its fields are not in a __dict__")
    names: dict[str, Any] = {"__quick_factory__": _FACTORY}
    signature: list[str] = []
    lines: list[str] = ["__quick_dict__ = __quick_self__.__dict__"]
    for field in dataclasses.fields(cls):
        if not field.init or field.kw_only is True:
            raise TypeError(f"{cls.__qualname__}.{field.name}: only positional init fields are supported")
        name = field.name
        if field.default is not dataclasses.MISSING:
            names[f"__quick_default_{name}__"] = field.default
            signature.append(f"{name}=__quick_default_{name}__")
        elif field.default_factory is not dataclasses.MISSING:
            names[f"__quick_make_{name}__"] = field.default_factory
            signature.append(f"{name}=__quick_factory__")
            lines.append(f"if {name} is __quick_factory__: {name} = __quick_make_{name}__()")
        else:
            signature.append(name)
        lines.append(f"__quick_dict__[{name!r}] = {name}")
    if hasattr(cls, "__post_init__"):
        lines.append("__quick_self__.__post_init__()")
    source = f"def __init__(__quick_self__, {', '.join(signature)}):\n" + "".join(f"    {line}\n" for line in lines)
    # the code is made from the class's own field names, as dataclasses makes its __init__
    exec(compile(source, f"<quick {cls.__qualname__}>", "exec"), names)
    init = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = {field.name: field.type for field in dataclasses.fields(cls)} | {"return": None}
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
