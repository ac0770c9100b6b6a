"""The one way an option is checked: a one-line :class:`~promptlottery.errors.ConfigError` that names
the option as the config spells it, the value given, and what it must be.

Every message reads ``<option>=<value>: must be <what>`` (the value as Python writes it, so a string
shows its quotes); an unknown key is ``unknown <node> option(s) [...]; valid: [...]``. A node of
options is a dataclass whose ``from_dict`` calls :func:`known_options` and whose ``__post_init__``
checks each value with the functions below, before the job claims its output directory.

>>> check_int("n_samples", 3, lo=1)
>>> check_int("n_samples", 0, lo=1)
Traceback (most recent call last):
...
promptlottery.errors.ConfigError: n_samples=0: must be an integer >= 1
>>> check_choice("judge.stop_rule", "paper35", ("beta", "paper_3of5"))
Traceback (most recent call last):
...
promptlottery.errors.ConfigError: judge.stop_rule='paper35': must be one of beta, paper_3of5
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from promptlottery.errors import ConfigError


def fail(name: str, value: Any, what: str) -> ConfigError:
    """The error of ``name=value`` (raise it: ``raise fail(...)``)."""
    return ConfigError(f"{name}={value!r}: must be {what}")


def known_options(given: Iterable[str], valid: Iterable[str], node: str) -> None:
    """Refuse keys of the ``node`` options that no option has."""
    valid = sorted(valid)
    unknown = sorted(set(given) - set(valid))
    if unknown:
        raise ConfigError(f"unknown {node} option(s) {unknown}; valid: {valid}")


def is_int(value: Any) -> bool:
    """A whole number that is not a bool (``True`` is an ``int`` to Python, never to the config)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_int(name: str, value: Any, *, lo: int, what: str | None = None) -> None:
    """A whole number >= ``lo`` (``what`` says it otherwise, e.g. "a positive number of items")."""
    if not is_int(value) or value < lo:
        raise fail(name, value, what or f"an integer >= {lo}")


def check_choice(name: str, value: Any, valid: Iterable[Any], *, why: str = "") -> None:
    """One of ``valid``; ``why`` is added in parentheses (what a missing choice would need)."""
    valid = list(valid)
    if value not in valid:
        raise fail(name, value, f"one of {', '.join(map(str, valid))}" + (f" ({why})" if why else ""))


def check_open(name: str, value: Any, lo: float, hi: float) -> None:
    """A number strictly between ``lo`` and ``hi``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo < value < hi:
        raise fail(name, value, f"in ({lo:g}, {hi:g})")


def check_range(name: str, value: Any) -> None:
    """``[lo, hi]``: two numbers with lo < hi (a label range read backwards would flip every score)."""
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise fail(name, value, "two numbers [lo, hi]") from None
    if not lo < hi:
        raise fail(name, list(value), "[lo, hi] with lo < hi")
