"""The one registry style: entries by name, an unknown name as one line listing the known ones."""

from __future__ import annotations

import pytest

from promptlottery.errors import ConfigError
from promptlottery.registry import Registry, UnknownName


def test_register_get_and_the_unknown_name_line():
    reg: Registry[int] = Registry("colour")
    reg.register("red", 1)

    @reg.register("blue")
    def blue():
        return 2

    assert reg.get("red") == 1 and reg["blue"] is blue and reg.get("blue")() == 2
    assert reg.names() == ["blue", "red"] and [n for n, _ in reg.items()] == ["red", "blue"]
    assert "red" in reg and "green" not in reg and len(reg) == 2
    with pytest.raises(UnknownName) as exc:
        reg.get("green")
    assert str(exc.value) == "unknown colour 'green'; known: blue, red"


def test_the_error_class_and_a_second_entry_under_one_name():
    reg: Registry[int] = Registry("stage", error=ConfigError)
    reg.register("judge", 1)
    reg.register("judge", 1)  # the same object again (a module imported twice): no change
    with pytest.raises(ConfigError, match=r"^unknown stage 'x'; known: judge$"):
        reg.get("x")
    with pytest.raises(ValueError, match="stage 'judge' is registered twice"):
        reg.register("judge", 2)


def test_modules_are_imported_on_the_first_lookup_only():
    from promptlottery.data.registry import LOADERS

    assert "summeval" in LOADERS and "table" in LOADERS.names()
    fresh: Registry[str] = Registry("thing", modules=("promptlottery.no_such_module",))
    fresh.register("a", "x")  # registering needs no import
    with pytest.raises(ModuleNotFoundError):
        fresh.get("a")
