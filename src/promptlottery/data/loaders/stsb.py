"""STS Benchmark (Cer et al. 2017): sentence pairs with a 0-5 mean human similarity."""

from __future__ import annotations

from pathlib import Path

from promptlottery.data.loaders._io import read_text
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import DatasetError, Item

HUB_ID = "sentence-transformers/stsb"


@register_loader("stsb")
def load_stsb(data_dir: Path, *, split: str = "dev", hub: bool = False) -> list[Item]:
    if hub:
        from datasets import load_dataset  # lazy: only users with a network

        ds = load_dataset(HUB_ID, split="validation" if split == "dev" else split)
        return [
            Item(
                id=f"stsb-{split}-{i}",
                dataset="stsb",
                inputs={"prediction": r["sentence1"], "reference": r["sentence2"]},
                human={"similarity": float(r["score"]) * 5.0},
                human_kind="mean",
            )
            for i, r in enumerate(ds)
        ]
    path = Path(data_dir) / "stsb" / f"sts-{split}.tsv"
    if not path.exists():
        raise DatasetError(f"stsb: file not found: {path}")
    items = []
    # read_text: a non-UTF-8 byte is an error naming the file and line
    lines = read_text(path, "stsb").replace("\r\n", "\n").split("\n")
    for lineno, line in enumerate(lines[:-1] if lines and lines[-1] == "" else lines, start=1):
        row = line.split("\t")
        if len(row) < 7:
            raise DatasetError(f"{path}:{lineno}: expected 7 tab-separated columns, got {len(row)}")
        genre, source, year, sid, score, s1, s2 = row[:7]
        try:
            value = float(score)
        except ValueError:
            raise DatasetError(f"{path}:{lineno}: score {score!r} is not a number") from None
        if not 0.0 <= value <= 5.0:
            raise DatasetError(f"{path}:{lineno}: score {value} outside 0-5")
        items.append(
            Item(
                id=f"stsb-{split}-{lineno}",
                dataset="stsb",
                inputs={"prediction": s1, "reference": s2},
                human={"similarity": value},
                human_kind="mean",
                meta={"genre": genre, "source": source, "year": year, "sid": sid},
            )
        )
    return items
