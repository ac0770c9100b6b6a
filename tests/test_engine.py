"""The engine end to end on the real configs with the fake backend: outputs, cache, bad input."""

from __future__ import annotations

import json
import multiprocessing as mp

import pandas as pd
import pytest
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ConfigAttributeError, ConfigKeyError

from promptlottery.backends.base import Decoding
from promptlottery.backends.fake import FakeBackend
from promptlottery.calls.cache import CallCache
from promptlottery.calls.loop import JudgingError
from promptlottery.data.schema import DatasetError, Item
from promptlottery.judging.runner import Condition, build_requests, judge
from promptlottery.prompts import PromptError, load_group
from promptlottery.stages import run_stage as run
from tests.conftest import REPO, compose

FAKE = ["backbone=fake", "dataset.limit=10"]


def test_run_writes_judgments_and_results(tmp_path):
    cfg = compose(FAKE, tmp_path=tmp_path)
    rec = run(cfg, tmp_path / "job")
    df = pd.read_parquet(tmp_path / "job" / "judgments.parquet")
    saved = json.loads((tmp_path / "job" / "results.json").read_text())
    assert saved["schema_version"] == 1 and saved["status"] == "ok"
    assert saved["config"]["judge"]["prompt_group"] == "G12" and "git_commit" in saved
    assert saved["calls"] == {"total": 10, "cache_hits": 0, "cache_misses": 10, "parse_failures": 0}
    assert len(df) == 10 and df["item_id"].is_unique
    for col in (
        "raw_output",
        "parsed_label",
        "weighted_score",
        "label_probs",
        "label_mass",
        "scoring_mode",
        "missing_reason",
        "prompt_tokens",
        "latency_s",
        "human",
        "condition",
        "variant",
        "backbone",
    ):
        assert col in df.columns
    # the fake judge puts 80% of the mass on the scale: weighted score is the renormalised mean
    probs = json.loads(df["label_probs"].iloc[0])
    expected = sum(float(k) * v for k, v in probs.items()) / sum(probs.values())
    assert df["weighted_score"].iloc[0] == pytest.approx(expected)
    assert df["label_mass"].iloc[0] == pytest.approx(0.8)
    assert rec["metrics"]["n_judgments"] == 10 and rec["metrics"]["parse_failure_rate"] == 0.0

    again = run(cfg, tmp_path / "job2")
    assert again["calls"]["cache_misses"] == 0 and again["calls"]["cache_hits"] == 10
    pd.testing.assert_frame_equal(
        df.drop(columns=["cache_hit"]),
        pd.read_parquet(tmp_path / "job2" / "judgments.parquet").drop(columns=["cache_hit"]),
    )


def test_cache_key_has_what_changes_output_and_nothing_else(tmp_path):
    group = load_group("G12")
    items = [Item(id="a", dataset="d", inputs={"reference": "r", "prediction": "p"})]
    cond = Condition("d", "semantic_alignment", "G12", "P1", "fake", "similarity")

    def key(backend=None, decoding=None, cond=cond, n=1):
        backend, decoding = backend or FakeBackend(), decoding or Decoding()
        return [r.key for _, r in build_requests(items, cond, group, backend, decoding, n_samples=n)]

    base = key()[0]
    assert key(backend=FakeBackend(max_concurrency=2))[0] == base  # concurrency is not in the key
    assert key(backend=FakeBackend(model="other"))[0] != base
    assert key(decoding=Decoding(temperature=0.7))[0] != base
    assert key(cond=Condition("d", "semantic_alignment", "G12", "P2", "fake", "similarity"))[0] != base
    ks = key(n=3)
    assert ks[0] == base and len(set(ks)) == 3  # sample index is in the key


def test_variant_text_change_invalidates_cache(tmp_path):
    gdir = tmp_path / "groups"
    gdir.mkdir()
    text = (REPO / "src/promptlottery/prompts/groups/G12.yaml").read_text()
    (gdir / "G12.yaml").write_text(text)
    a = load_group("G12", str(gdir))
    (gdir / "G12.yaml").write_text(text.replace("Rate how well", "Rate how closely"))
    load_group.cache_clear()
    b = load_group("G12", str(gdir))
    assert a.text_hash("P1") != b.text_hash("P1") and a.text_hash("P2") == b.text_hash("P2")


def _writer(path, start, n):
    from promptlottery.backends.base import JudgeResponse

    c = CallCache(path)
    for i in range(start, start + n):
        c.put_many([(f"k{i}", JudgeResponse(str(i), {"1": 0.5}, 1, 1, 0.0), None)])


def test_two_parallel_writers_lose_nothing(tmp_path):
    path = tmp_path / "calls.sqlite"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, s, 200)) for s in (0, 200)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    c = CallCache(path)
    assert len(c) == 400 and c.get_many(["k0", "k399"])["k399"].raw_text == "399"


def test_backend_failure_keeps_computed_judgments(tmp_path):
    cfg = compose(FAKE, tmp_path=tmp_path)
    group = load_group("G12")
    from promptlottery.data import load_items

    items = load_items("stsb", data_dir=cfg.paths.data_dir, limit=10, seed=0)
    bad = items[-1].inputs["prediction"]
    cond = Condition("stsb", "semantic_alignment", "G12", "P1", "fake", "similarity")
    cache = CallCache(tmp_path / "c.sqlite")
    with pytest.raises(JudgingError, match="1 batch\(es\) failed"):
        judge(
            items,
            cond,
            group,
            FakeBackend(max_concurrency=1, fail_on=(bad,)),
            cache,
            Decoding(),
            max_retries=0,
        )
    assert len(cache) == 9  # every request answered before the failure is cached
    df, stats = judge(items, cond, group, FakeBackend(max_concurrency=1), cache, Decoding())
    assert stats.cache_hits == 9 and stats.cache_misses == 1 and len(df) == 10


def test_failed_job_writes_failed_results(tmp_path):
    cfg = compose(FAKE, tmp_path=tmp_path)
    with pytest.raises(JudgingError):
        run(cfg, tmp_path / "job", backend=FakeBackend(fail_on=("",)))
    saved = json.loads((tmp_path / "job" / "results.json").read_text())
    assert saved["status"] == "failed" and "refused" in saved["error"]


def test_unknown_option_fails_at_compose_time_with_valid_choices():
    with pytest.raises(ConfigCompositionException, match="smollm2"):
        compose(["backbone=no_such_backbone"])
    with pytest.raises((ConfigKeyError, ConfigAttributeError, ConfigCompositionException), match="variantt"):
        compose(["judge.variantt=P2"])


def test_missing_dataset_file_names_the_file(tmp_path):
    cfg = compose(FAKE + [f"paths.data_dir={tmp_path}"], tmp_path=tmp_path)
    with pytest.raises(DatasetError, match=r"sts-dev\.tsv"):
        run(cfg, tmp_path / "job")


def test_malformed_row_names_file_and_line(tmp_path):
    (tmp_path / "stsb").mkdir()
    good = "main-captions\tMSRvid\t2012test\t0000\t5.000\tA man.\tA man.\n"
    (tmp_path / "stsb" / "sts-dev.tsv").write_text(good * 3 + "main\tx\ty\t1\tNaNx\ta\tb\n")
    from promptlottery.data import load_items

    with pytest.raises(DatasetError, match=r"sts-dev\.tsv:4"):
        load_items("stsb", data_dir=tmp_path)


def test_missing_placeholder_names_item_and_placeholder(tmp_path):
    group = load_group("G12")
    items = [Item(id="item-7", dataset="d", inputs={"reference": "r"})]
    cond = Condition("d", "semantic_alignment", "G12", "P1", "fake", "similarity")
    with pytest.raises(PromptError, match=r"item-7.*prediction"):
        build_requests(items, cond, group, FakeBackend(), Decoding())


def test_item_text_is_data_not_template_code():
    group = load_group("G12")
    items = [Item(id="x", dataset="d", inputs={"reference": "{{ 7*7 }}", "prediction": "{% raw %}"})]
    cond = Condition("d", "semantic_alignment", "G12", "P1", "fake", "similarity")
    ((_, req),) = build_requests(items, cond, group, FakeBackend(), Decoding())
    assert "{{ 7*7 }}" in req.messages[-1]["content"] and "49" not in req.messages[-1]["content"]
