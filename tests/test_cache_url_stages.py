"""Paraphrase generation and validation open the configured call cache (``paths.cache_url``), as
the judge stage does, not ``<paths.cache_dir>/calls.sqlite``.

No PostgreSQL server is needed: the store behind a ``postgresql://`` URL is replaced by a dict.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from promptlottery.backends.fake import FakeBackend
from tests.conftest import compose

URL = "postgresql://judge@db.invalid:5432/calls"


class SharedStore:
    """A call store in memory, standing for the shared server; every store opened on one URL is one."""

    opened: list[str] = []
    rows: dict[str, tuple[str, str | None]] = {}

    def __init__(self, location):
        SharedStore.opened.append(str(location))

    def get_many(self, keys):
        return {k: SharedStore.rows[k] for k in keys if k in SharedStore.rows}

    def put_many(self, rows):
        # (key, response, request, created, response_sha256): kept as the server keeps them
        SharedStore.rows.update({row[0]: (row[1], row[4]) for row in rows})

    def set_checksums(self, rows):
        for key, sha in rows:
            SharedStore.rows[key] = (SharedStore.rows[key][0], sha)

    def delete_many(self, keys):
        for key in keys:
            SharedStore.rows.pop(key, None)

    def count(self):
        return len(SharedStore.rows)

    def close(self):
        pass


@pytest.fixture
def shared(monkeypatch):
    import promptlottery.calls.cache as cache

    def open_store(location, *, timeout_s=60.0):
        assert str(location) == URL, f"the stage opened {location}, not paths.cache_url"
        return SharedStore(location)

    monkeypatch.setattr(SharedStore, "opened", [])
    monkeypatch.setattr(SharedStore, "rows", {})
    monkeypatch.setattr(cache, "open_store", open_store)
    return SharedStore


def _same_vectors(texts):
    return np.ones((len(texts), 4))  # every candidate as similar to the original as can be


def test_paraphrase_generation_uses_the_configured_cache(tmp_path, shared):
    from promptlottery.stages import run_stage
    from tests.test_paraphrase_generate import REPLIES, _inputs

    out = tmp_path / "generated.yaml"
    over = [
        "+paraphrase=generate",
        "backbone=fake",
        *_inputs(tmp_path),
        "paraphrase.n=1",
        f"paraphrase.out={out}",
    ]
    cfg = compose([*over, f"paths.cache_url={URL}"], tmp_path=tmp_path)
    first = FakeBackend(replies=tuple(REPLIES))
    run_stage(cfg, tmp_path / "run", backend=first, encode=_same_vectors)
    assert shared.opened == [URL] and first.calls > 0 and shared.rows
    assert yaml.safe_load(out.read_text())["candidates_tried"] == 5
    assert not (tmp_path / "cache" / "calls.sqlite").exists()
    # a second run (another node on the same server) makes no call
    again = FakeBackend(replies=tuple(REPLIES))
    run_stage(cfg, tmp_path / "run2", backend=again, encode=_same_vectors)
    assert again.calls == 0 and shared.opened == [URL, URL]


def test_validation_rates_equivalence_through_the_configured_cache(tmp_path, shared):
    from promptlottery.stages.validation import run_validation

    over = ["+experiment=validate_prompts", "validation.groups=[G1]", "validation.equivalence=true"]
    cfg = compose([*over, "backbone=fake", f"paths.cache_url={URL}"], tmp_path=tmp_path)
    first = FakeBackend()
    run_validation(cfg, tmp_path / "a", backend=first, encoder=_same_vectors)
    # by hand: G1's paraphrases are P2-P5, one equivalence question each
    assert shared.opened == [URL] and first.calls == 4 and len(shared.rows) == 4
    assert not (tmp_path / "cache" / "calls.sqlite").exists()
    again = FakeBackend()
    run_validation(cfg, tmp_path / "b", backend=again, encoder=_same_vectors)
    assert again.calls == 0
