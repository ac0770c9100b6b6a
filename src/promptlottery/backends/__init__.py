"""One small backend protocol (``base.Backend``) and its implementations: transformers, vLLM,
OpenAI-compatible servers, a fake."""
