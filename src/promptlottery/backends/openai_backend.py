"""The `openai` backend: OpenAI's API, or any OpenAI-compatible server given by ``base_url``.

All of the work is in :class:`~promptlottery.backends.openai_compat.OpenAICompatBackend`; this
class only fills OpenAI's defaults (endpoint, ``OPENAI_API_KEY``). `vllm serve` and llama.cpp's
server reuse the same base (``VLLMServerBackend``, ``LlamaCppServerBackend``).
"""

from __future__ import annotations

from promptlottery.backends.openai_compat import (
    ContextOverflowError,
    LlamaCppServerBackend,
    ModelRefusedError,
    OpenAICompatBackend,
    TransientBackendError,
    VLLMServerBackend,
    label_probs_from_top_logprobs,
)

__all__ = [
    "ContextOverflowError",
    "LlamaCppServerBackend",
    "ModelRefusedError",
    "OpenAIBackend",
    "OpenAICompatBackend",
    "TransientBackendError",
    "VLLMServerBackend",
    "label_probs_from_top_logprobs",
]


class OpenAIBackend(OpenAICompatBackend):
    """OpenAI's hosted models (gpt-4o, ...): the key comes from ``$OPENAI_API_KEY``."""

    backend_name = "openai"
    default_base_url = "https://api.openai.com/v1"
    default_api_key_env = "OPENAI_API_KEY"
