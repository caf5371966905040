"""The machinery of the load profile's fields: each dataclass field carries a ``Knob`` (its help, its
command-line flag, whether a spec's table takes it, its check); ``validate`` runs the checks and names the
field in a ``ProfileError``; ``from_table`` builds a dataclass from a spec's table. Pure: no I/O.
(profiles.py defines the fields; commands/load_options.py and experiment/spec.py read them.)
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from accelbench.errors import BadInputError

Check = Callable[[Any], "str | None"]  # why a value is wrong, or None


class ProfileError(BadInputError):
    """A profile value is wrong. ``key`` is the field; the CLI reports its flag, a spec its dotted key."""

    def __init__(self, key: str, why: str) -> None:
        super().__init__(f"{key}: {why}")
        self.key, self.why = key, why


@dataclass(frozen=True)
class Knob:
    """How one field is given: ``flag`` on the command line (None: no option of its own), ``spec``: a key
    of the experiment spec's table; ``choices`` the allowed values; ``check`` says why a value is wrong."""

    help: str
    flag: str | None = None
    spec: bool = True
    choices: tuple[str, ...] = ()
    check: Check | None = None
    path: bool = False  # a file's path (the command line says FILE)

    def problem(self, value: Any) -> str | None:
        if self.choices and value not in self.choices:
            return f"{value!r} is not one of {', '.join(self.choices)}"
        return self.check(value) if self.check else None


REQUIRED: Any = dataclasses.MISSING


def knob(default: Any, help: str, **kw: Any) -> Any:
    """A dataclass field with its ``Knob``; ``default=REQUIRED``: the field must be given."""
    return field(default=default, metadata={"knob": Knob(help, **kw)})


def knob_of(f: dataclasses.Field[Any]) -> Knob | None:
    return f.metadata.get("knob")


# ---- checks (the messages name the value; ProfileError adds the key) --------------------------------------
def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def number(minimum: float = 0.0, *, strict: bool = True) -> Check:
    def check(value: Any) -> str | None:
        if is_number(value) and (value > minimum if strict else value >= minimum):
            return None
        return f"{value!r} must be a number {'>' if strict else '>='} {minimum:g}"

    return check


def whole(minimum: int | None = 1, what: str = "") -> Check:
    def check(value: Any) -> str | None:
        if isinstance(value, int) and not isinstance(value, bool) and (minimum is None or value >= minimum):
            return None
        return f"{value!r} must be a whole number{what}" + (f" >= {minimum}" if minimum is not None else "")

    return check


def optional(check: Check) -> Check:
    return lambda value: None if value is None else check(value)


def validate(obj: Any) -> None:
    """Run every field's check; the first problem as a ProfileError naming the field."""
    for f in dataclasses.fields(obj):
        k = knob_of(f)
        why = k.problem(getattr(obj, f.name)) if k else None
        if why:
            raise ProfileError(f.name, why)


T = TypeVar("T")


def knobs(cls: type, *, spec: bool | None = None) -> list[tuple[dataclasses.Field[Any], Knob]]:
    """The fields of ``cls`` that have a Knob (``spec=True``: only those a spec's table takes)."""
    out = [(f, k) for f in dataclasses.fields(cls) if (k := knob_of(f)) is not None]
    return [(f, k) for f, k in out if spec is None or k.spec == spec]


def from_table(cls: type[T], table: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> T:
    """``cls`` from a spec's table (TOML lists become tuples); ProfileError naming an unknown or bad key."""
    allowed = [f.name for f, _ in knobs(cls, spec=True)]
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise ProfileError(unknown[0], f"unknown key; allowed: {', '.join(allowed)}")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in table.items()}
    return cls(**{**(defaults or {}), **values})


def field_types(cls: type) -> dict[str, object]:
    """Each field's type (string annotations resolved), for option builders."""
    return typing.get_type_hints(cls)
