"""Judgment grids for the gate's known answers: fake-backend sweeps whose verdicts and answer texts are
rewritten to a design with a known plurality cluster.

:func:`marker_grid` judges ``n_items`` STS-B items under the five wordings of G12 with the fake
backend (so every schema column is the judging runner's own), then, per item (seeded): a cluster
label ``c`` (uniform over 1..5) and 0, 1 or 2 dissenting wordings (uniform), each answering a label
other than ``c``. So every item has a cluster (>= 3 of 5 agree on ``c``) and a verdict is in it
exactly when its wording did not dissent. Each answer's raw text carries a marker: ``stable`` for a
verdict in the cluster, ``shaky`` for one outside it (``marker="label"``: the text says the answer);
``marker="shuffled"`` permutes the markers over all rows (the text says nothing about the label).
The label probabilities put 0.8 on the verdict (the judge's confidence says nothing either).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from promptlottery.stages import run_stage
from promptlottery.tracking.jobdir import file_sha256
from tests.conftest import compose

VARIANTS = ["P1", "P2", "P3", "P4", "P5"]
LABELS = ["1", "2", "3", "4", "5"]


def judge_fake(tmp: Path, n_items: int, *, dataset: str = "stsb", name: str = "stsb") -> Path:
    """The fake backend's five-wording sweep of ``n_items`` items: ``tmp/grid/<name>_<variant>``."""
    for v in VARIANTS:
        cfg = compose(
            ["backbone=fake", f"dataset={dataset}", f"dataset.limit={n_items}", f"judge.variant={v}"],
            tmp_path=tmp,
        )
        run_stage(cfg, tmp / "grid" / f"{name}_{v}")
    return tmp / "grid"


def design(item_ids: list[str], seed: int) -> dict[tuple[str, str], tuple[str, int]]:
    """(item, variant) -> (label, in_cluster) of the design in the module docstring."""
    rng = np.random.default_rng(seed)
    out = {}
    for item in sorted(item_ids):
        c = LABELS[rng.integers(5)]
        dissent = set(rng.choice(5, size=rng.integers(3), replace=False).tolist())
        for j, v in enumerate(VARIANTS):
            if j in dissent:
                out[item, v] = (str(rng.choice([x for x in LABELS if x != c])), 0)
            else:
                out[item, v] = (c, 1)
    return out


def rewrite(grid: Path, marker: str, seed: int = 0) -> dict[tuple[str, str], tuple[str, int]]:
    """Rewrite every ``judgments.parquet`` under ``grid`` to the design; returns the design."""
    paths = sorted(grid.glob("*/judgments.parquet"))
    items = sorted(set(pd.read_parquet(paths[0])["item_id"]))
    d = design(items, seed)
    keys = [(i, v) for i in items for v in VARIANTS]
    words = np.array(["stable" if d[k][1] else "shaky" for k in keys], dtype=object)
    if marker == "shuffled":
        words = np.random.default_rng(seed + 1).permutation(words)
    elif marker != "label":
        raise ValueError(f"marker must be 'label' or 'shuffled', got {marker!r}")
    word = dict(zip(keys, words))
    for p in paths:
        df = pd.read_parquet(p)
        lab = [d[i, v][0] for i, v in zip(df["item_id"], df["variant"])]
        df["argmax_label"] = df["parsed_label"] = lab
        df["argmax_score"] = df["parsed_score"] = df["score"] = df["weighted_score"] = [float(x) for x in lab]
        df["raw_output"] = [f"{x} {word[i, v]}" for x, i, v in zip(lab, df["item_id"], df["variant"])]
        df["label_probs"] = [json.dumps({y: (0.8 if y == x else 0.05) for y in LABELS}) for x in lab]
        df.to_parquet(p, index=False)
        # the job's record vouches for its parquet by hash (judging.jobs): vouch for the rewritten one
        rec_path = p.parent / "results.json"
        rec = json.loads(rec_path.read_text())
        rec["judgments"]["sha256"] = file_sha256(p)
        rec_path.write_text(json.dumps(rec, indent=2))
    return d


def marker_grid(tmp: Path, n_items: int, marker: str, seed: int = 0) -> Path:
    grid = judge_fake(tmp, n_items)
    rewrite(grid, marker, seed)
    return grid


def tiny_deberta_v3(path: Path, texts: list[str], *, vocab_size: int = 400) -> Path:
    """A random-weight DeBERTa-v2/v3 checkpoint laid out as ``microsoft/deberta-v3-large`` is on the
    Hub (config.json, model weights, ``spm.model`` and a tokenizer_config.json naming no class), with
    a sentencepiece unigram tokenizer trained here on ``texts``: the paper's gate's code path, offline.
    The special pieces are DeBERTa-v3's ([PAD] 0, [CLS] 1, [SEP] 2, [UNK] 3, [MASK])."""
    import io

    import sentencepiece as spm
    from transformers import DebertaV2Config, DebertaV2Model

    path.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_writer=buf,
        vocab_size=vocab_size,
        model_type="unigram",
        pad_id=0,
        bos_id=1,
        eos_id=2,
        unk_id=3,
        pad_piece="[PAD]",
        bos_piece="[CLS]",
        eos_piece="[SEP]",
        unk_piece="[UNK]",
        user_defined_symbols=["[MASK]"],
        hard_vocab_limit=False,
        minloglevel=2,
    )
    (path / "spm.model").write_bytes(buf.getvalue())
    (path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False, "vocab_type": "spm"}))
    n_pieces = spm.SentencePieceProcessor(model_proto=buf.getvalue()).get_piece_size()
    config = DebertaV2Config(
        vocab_size=n_pieces,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        relative_attention=True,
        position_buckets=64,
        pos_att_type=["p2c", "c2p"],
        type_vocab_size=0,
        pooler_hidden_size=32,
        pad_token_id=0,
    )
    DebertaV2Model(config).save_pretrained(path)
    return path


def wandb_records(run_dir: Path) -> list:
    """The records of an offline W&B run's ``run-*.wandb`` log, as protobufs."""
    from promptlottery.tracking.wandb_offline import wandb_log_records

    return wandb_log_records(next(run_dir.glob("run-*.wandb")))


def wandb_history(run_dir: Path) -> list[dict]:
    """Every logged history row of an offline run (key -> decoded value)."""
    rows = []
    for r in wandb_records(run_dir):
        if r.WhichOneof("record_type") == "history":
            rows.append({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in r.history.item})
    return rows


def wandb_group(run_dir: Path) -> str | None:
    for r in wandb_records(run_dir):
        if r.WhichOneof("record_type") == "run":
            return r.run.run_group
    return None


def relabel_backbone(grid: Path, dest: Path, backbone: str) -> Path:
    """A copy of ``grid`` whose jobs say they were judged by ``backbone``: a second configuration with
    the same items (the configuration-transfer tests)."""
    return _relabel(grid, dest, "backbone", backbone)


def relabel_group(grid: Path, dest: Path, group: str) -> Path:
    """A copy of ``grid`` whose jobs say their wordings were ``group``'s (e.g. the held-out G15)."""
    return _relabel(grid, dest, "prompt_group", group)


def _relabel(grid: Path, dest: Path, column: str, value: str) -> Path:
    import shutil

    shutil.copytree(grid, dest)
    for p in sorted(dest.glob("*/judgments.parquet")):
        df = pd.read_parquet(p)
        old = df[column].iloc[0]
        # the condition names the group mid-path and the backbone at its end
        new = df["condition"].str.replace(f"/{old}/", f"/{value}/", regex=False)
        df["condition"] = (
            new
            if column == "prompt_group"
            else df["condition"].str.replace(f"/{old}", f"/{value}", regex=False)
        )
        df[column] = value
        df.to_parquet(p, index=False)
        rec_path = p.parent / "results.json"
        rec = json.loads(rec_path.read_text())
        if column == "backbone":
            rec["config"]["backbone"]["name"] = value
        else:
            rec["config"]["judge"]["prompt_group"] = value
        rec["judgments"]["sha256"] = file_sha256(p)
        rec_path.write_text(json.dumps(rec, indent=2))
    return dest
