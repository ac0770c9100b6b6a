"""One registry style for every name -> object table of the package.

A :class:`Registry` maps a name the config or the command line gives (``stage=gate``,
``dataset=summeval``, ``aggregation=plurality``) to the object it picks. Entries are added where
they are defined, with :meth:`Registry.register` as a decorator (or called on an object), and looked
up with :meth:`Registry.get`, whose error is one line naming the registry and every known name.
A registry whose entries live in modules that nothing else imports names those modules in
``modules``: they are imported on the first lookup.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class UnknownName(KeyError):
    """A name no entry of the registry has (its message is the one line the user sees)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Registry(Generic[T]):
    """Named entries of one kind (stages, dataset loaders, aggregations, ...).

    ``what``: the option the names are given in, for the error (``"dataset"``, ``"stage"``);
    ``modules``: modules that register entries when imported, imported before the first lookup;
    ``error``: the exception class of an unknown name (a :class:`UserError` subclass where the
    name comes from the config, so it becomes a one-line rc-2 error).
    """

    def __init__(self, what: str, *, modules: tuple[str, ...] = (), error: type[Exception] = UnknownName):
        self.what = what
        self._modules = modules
        self._error = error
        self._entries: dict[str, T] = {}
        self._loaded = not modules

    def register(self, name: str, obj: T | None = None) -> Any:
        """Add ``obj`` under ``name`` (``REG.register("x", obj)``), or decorate (``@REG.register("x")``).
        A name registered twice is a bug, refused."""
        if obj is not None:
            self._add(name, obj)
            return obj

        def deco(fn: T) -> T:
            self._add(name, fn)
            return fn

        return deco

    def _add(self, name: str, obj: T) -> None:
        if name in self._entries and self._entries[name] is not obj:
            raise ValueError(f"{self.what} {name!r} is registered twice")
        self._entries[name] = obj

    def _load(self) -> None:
        if not self._loaded:
            for module in self._modules:  # a module already being imported is returned as it is
                importlib.import_module(module)
            self._loaded = True

    def get(self, name: str) -> T:
        """The entry ``name``; an unknown name is one line listing the known ones."""
        self._load()
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise self._error(f"unknown {self.what} {name!r}; known: {', '.join(self.names())}") from None

    def names(self) -> list[str]:
        """The registered names, sorted."""
        self._load()
        return sorted(self._entries)

    def items(self) -> list[tuple[str, T]]:
        """``(name, entry)`` in registration order."""
        self._load()
        return list(self._entries.items())

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        self._load()
        return iter(list(self._entries))

    def __len__(self) -> int:
        self._load()
        return len(self._entries)

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def as_dict(self) -> dict[str, T]:
        """A copy of the entries (name -> entry), in registration order."""
        self._load()
        return dict(self._entries)
