"""The load profile's command-line options, made from its definition (loadtests/profiles.py): one click
option per field that has a flag, with the field's help, type and default, as sqlite-utils shares option
decorators between commands. ``loadtest`` takes them all; ``run`` takes ``--repeats`` and ``--retries``."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click

from accelbench.errors import BadInputError
from accelbench.loadtests.knobs import ProfileError, field_types, knobs
from accelbench.loadtests.profiles import LoadPlan, LoadProfile, Workload, parse_levels

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def _base(hint: Any) -> Any:
    """``float | None`` → float; ``tuple[str, ...]`` → tuple."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return _base(args[0])
    return typing.get_origin(hint) or hint


def stack(*options: Callable[[F], F]) -> Callable[[F], F]:
    """One decorator of several click options, in the order given (as ``--help`` lists them)."""

    def apply(func: F) -> F:
        for option in reversed(options):
            func = option(func)
        return func

    return apply


def knob_options(cls: type, *, defaults: bool = True, note: str = "") -> Callable[[F], F]:
    """A decorator adding one option per flagged field of ``cls``. ``defaults=False``: every option defaults
    to None, so a command sees which were given; ``note`` is added to each help ({name}: the field)."""
    hints = field_types(cls)
    options = []
    for f, k in knobs(cls):
        if k.flag is None:
            continue
        base = _base(hints[f.name])
        default = f.default if defaults and f.default is not dataclasses.MISSING else None
        kind: Any = click.Choice(k.choices) if k.choices else click.Path(dir_okay=False) if k.path else base
        extra: dict[str, Any] = {}
        if base is tuple:
            kind, extra = str, {"multiple": True}
            default = default or ()
        elif base is bool:
            kind = None
        options.append(
            click.option(
                k.flag,
                f.name,
                type=kind,
                default=default,
                show_default=default not in (None, ()),
                help=k.help + note.format(name=f.name),
                **extra,
            )
        )
    return stack(*options)


def build(cls: type[T], values: Mapping[str, Any], flags: Mapping[str, str] | None = None, **fixed: Any) -> T:
    """``cls`` from option values; a bad one is one line naming its flag (``--isl-range: 1.5 must be ...``)."""
    try:
        return cls(**values, **fixed)
    except ProfileError as err:
        raise flagged(err, cls, flags=flags) from None


def flagged(err: ProfileError, *classes: type, flags: Mapping[str, str] | None = None) -> BadInputError:
    """``err`` as one line naming the flag of its field in ``classes`` (``--trace: ...``)."""
    names = {f.name: k.flag.split("/")[0] for cls in classes for f, k in knobs(cls) if k.flag}
    flag = {**names, **(flags or {})}.get(err.key)
    return BadInputError(f"{flag or err.key}: {err.why}")


# --concurrency / --rate (the profile's kind and levels), every other flagged profile field, --repeats/--retries
load_options = stack(
    click.option("--concurrency", help="Closed loop: comma-separated concurrencies, e.g. 1,2,4,8."),
    click.option("--rate", help="Open loop: comma-separated Poisson rates in requests/s, e.g. 100,200,400."),
    knob_options(LoadProfile),
    knob_options(LoadPlan),
)


workload_options = knob_options(Workload, defaults=False)  # any of them given: a generative sweep


def take(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """Remove the flagged fields of ``cls`` from ``values`` (a command's keyword arguments); those given."""
    return {
        f.name: value
        for f, k in knobs(cls)
        if k.flag is not None and (value := values.pop(f.name, None)) is not None
    }


def take_plan(values: dict[str, Any], **fixed: Any) -> LoadPlan:
    """The LoadPlan of ``load_options``' values (removed from ``values``); ``fixed`` overrides fields."""
    concurrency, rate = values.pop("concurrency", None), values.pop("rate", None)
    if (concurrency is None) == (rate is None):
        raise BadInputError("give exactly one of --concurrency or --rate")
    given = {**take(LoadProfile, values), **fixed}
    given["shapes"] = tuple(given.get("shapes") or ())
    kind = "closed" if concurrency is not None else "open"
    levels = parse_levels(concurrency or rate)
    profile = build(
        LoadProfile, given, {"levels": "--concurrency" if concurrency else "--rate"}, kind=kind, levels=levels
    )
    return build(LoadPlan, take(LoadPlan, values), profile=profile)
