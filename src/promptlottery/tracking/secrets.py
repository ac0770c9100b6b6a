"""Secrets stay in the environment: redaction of everything the project writes, and a command-line check.

A value is secret when its key's name says so (``*key*``, ``*token*``, ``*secret*``, ``*password*``,
``authorization``, ``*credential*``, ``cookie``) or when it is the userinfo of a URL
(``https://user:pass@host``). Key names that only *name* a secret or count tokens are not secrets:
``*_env`` (the environment variable holding the key, e.g. ``api_key_env``), ``tokenizer*``,
``*tokens`` (token counts), ``token_count`` and ``cache_key``. In free text (log lines, error
messages) a name must END in a secret word (``api_key=...``, ``apiKey: ...``, ``OPENAI_API_KEY=...``):
``KeyError: 'variants'`` and ``keyboard: qwerty`` are honest text.

The values of the configured key variables (every ``api_key_env``, every ``${oc.env:NAME}`` whose name
or key is a secret's, and ``OPENAI_API_KEY``, the OpenAI backend's default) are known secrets:
:func:`remember_secret_values` reads them from the environment once a job's config is known, and every
text redacted afterwards has each of them replaced wherever it stands as a whole token (a server's
error body that echoes the request's key, a traceback). A value under :data:`MIN_SECRET_LEN`
characters is a placeholder (``EMPTY``), not a key, and is left alone.

The command line is checked before Hydra starts, because Hydra copies every override into
``.hydra/overrides.yaml``, ``.hydra/hydra.yaml``, ``multirun.yaml`` and its launch log.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

REDACTED = "***"
_SECRET_NAME = re.compile(r"key|token|secret|passw|authorization|credential|cookie", re.IGNORECASE)
_NOT_SECRET = re.compile(r"(_env|tokens|token_count|cache_key|sort_keys?)$|^tokenizer", re.IGNORECASE)
# Hydra escapes ':' as '\:' in the override strings it records
_URL_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*\\?://)([^/\s@'\"]+)@")
# on the command line a user name alone (postgresql://postgres@host/db) is no credential; a password is
_URL_PASSWORD = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s@'\":]*:[^/\s@'\"]+@")
_URL_QUERY = re.compile(r"([?&][\w.-]*(?:key|token|secret|passw|signature)[\w.-]*=)[^&\s'\"]+", re.IGNORECASE)
_BEARER = re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{6,}")
#: in free text, a name whose last word (split at ``_ . -`` and camelCase) is one of these
_SECRET_WORD = re.compile(r"key|apikey|token|secret|passw(?:or)?d|authorization|credentials?|cookie", re.I)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_ENV_REF = re.compile(r"\$\{oc\.env:([A-Za-z_][A-Za-z0-9_]*)")
MIN_SECRET_LEN = 8
#: the OpenAI backend's key variable when a config names none (``OpenAIBackend.default_api_key_env``)
DEFAULT_KEY_VARIABLES = ("OPENAI_API_KEY",)
_KNOWN: dict[str, re.Pattern] = {}  # secret value -> its whole-token pattern
_ASSIGN = re.compile(r"([\"']?)([\w.+~-]+)\1(\s*[:=]\s*)([\"']?)([^\s\"',}\]]+)")


def is_secret_key(name: Any) -> bool:
    """Whether a config or record key holds a secret, by its name (the last dotted part)."""
    last = str(name).lstrip("+~").split(".")[-1]
    return bool(_SECRET_NAME.search(last)) and not _NOT_SECRET.search(last)


def _secret_word_name(name: str) -> bool:
    """Whether a name in free text is a secret's: its last word is a secret word (whole words only)."""
    words = [w for w in re.split(r"[_.\-]+", _CAMEL.sub("_", name.lstrip("+~"))) if w]
    if not words or _NOT_SECRET.search(name.lstrip("+~").split(".")[-1]):
        return False
    return bool(_SECRET_WORD.fullmatch(words[-1]))


def key_variables(config: Any) -> set[str]:
    """The environment variables that hold keys in ``config`` (an unresolved config as plain data):
    every ``*api_key_env`` value, every ``${oc.env:NAME}`` under a secret's key or with a secret's
    name, and :data:`DEFAULT_KEY_VARIABLES`."""
    names = set(DEFAULT_KEY_VARIABLES)

    def walk(key: Any, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(k, v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(key, v)
        elif isinstance(value, str):
            if str(key).endswith("api_key_env") and value.strip():
                names.add(value.strip())
            for name in _ENV_REF.findall(value):
                if is_secret_key(key) or is_secret_key(name):
                    names.add(name)

    walk(None, config)
    return names


def remember_secret_values(config: Any, environ: Any = None) -> None:
    """Read the values of ``config``'s key variables (:func:`key_variables`) from the environment:
    from now on :func:`redact_text` hides each of them."""
    environ = os.environ if environ is None else environ
    for name in key_variables(config):
        value = environ.get(name) or ""
        if len(value) >= MIN_SECRET_LEN and value not in _KNOWN:
            _KNOWN[value] = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(value)}(?![A-Za-z0-9_])")


def redact_text(text: str) -> str:
    """``text`` with the known key values, URL userinfo, secret query parameters, bearer tokens and
    ``secret_key=value`` hidden."""
    if not isinstance(text, str) or not text:
        return text
    for pattern in _KNOWN.values():
        text = pattern.sub(REDACTED, text)
    text = _URL_USERINFO.sub(rf"\1{REDACTED}@", text)
    text = _URL_QUERY.sub(rf"\1{REDACTED}", text)
    text = _BEARER.sub(rf"\1 {REDACTED}", text)

    def _assign(m: re.Match) -> str:
        if not _secret_word_name(m.group(2)) or m.group(5) == REDACTED:
            return m.group(0)
        return f"{m.group(1)}{m.group(2)}{m.group(1)}{m.group(3)}{m.group(4)}{REDACTED}"

    return _ASSIGN.sub(_assign, text)


def redact_exception(exc: BaseException) -> BaseException:
    """``exc`` and the exceptions it was raised from, their text redacted in place (``args``), for
    whoever prints them or their traceback."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        text = str(e)
        clean = redact_text(text)
        if clean != text:
            e.args = (clean,)
        e = e.__cause__ or e.__context__
    return exc


def redact(obj: Any) -> Any:
    """``obj`` (dicts, lists, strings) with every secret value replaced by ``'***'``, recursively."""
    if isinstance(obj, dict):
        return {k: (REDACTED if is_secret_key(k) and _has_value(v) else redact(v)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact(v) for v in obj]
    if isinstance(obj, str):
        return redact_text(obj)
    return obj


def _has_value(v: Any) -> bool:
    # numbers and booleans under a secret-looking name are counts or switches, never credentials
    return isinstance(v, (str, dict, list, tuple)) and len(v) > 0


def secret_override(arg: str) -> str | None:
    """Why a command-line override would write a secret into Hydra's files, or None.

    Interpolations (``${oc.env:MY_KEY}``) are fine: Hydra records the text, not the secret.
    """
    key, eq, value = arg.partition("=")
    if not eq or arg.startswith("-") or "${" in value:
        return None
    if is_secret_key(key) and value.strip() not in ("", "null"):
        return f"override {key}=... puts a secret on the command line"
    if _URL_PASSWORD.search(value) or _URL_QUERY.search(value):
        return f"override {key}=... has credentials in a URL"
    return None


def check_command_line(argv: list[str]) -> None:
    """Raise SecretOnCommandLine for the first override that would leak a secret into ``.hydra/``."""
    for arg in argv:
        why = secret_override(arg)
        if why:
            raise SecretOnCommandLine(
                f"{why}, where Hydra writes it into .hydra/ and its logs: put the secret in an environment "
                "variable and name it with `api_key_env` (backbone.backend.api_key_env=MY_KEY), or pass "
                "an interpolation ('${oc.env:MY_KEY}')"
            )


class SecretOnCommandLine(ValueError):
    """A secret given as a literal command-line override."""


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's formatted message (add it to every handler)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001 - a broken record is logging's problem, not ours
            return True
        clean = redact_text(msg)
        if clean != msg:
            record.msg, record.args = clean, None
        return True


def install_log_redaction(logger: logging.Logger | None = None) -> None:
    """Add :class:`RedactingFilter` to every handler of ``logger`` (default: the root logger)."""
    for h in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactingFilter) for f in h.filters):
            h.addFilter(RedactingFilter())


def redact_yaml_files(paths: list[Path]) -> None:
    """Rewrite YAML files (Hydra's ``.hydra/*.yaml``, ``multirun.yaml``) with their secrets redacted."""
    import yaml

    for p in paths:
        try:
            text = Path(p).read_text(encoding="utf-8")
        except OSError:
            continue
        data = yaml.safe_load(text)
        clean = redact(data)
        if clean != data:
            tmp = Path(p).with_name(f".{Path(p).name}.redact.tmp")
            tmp.write_text(yaml.safe_dump(clean, sort_keys=False), encoding="utf-8")
            tmp.replace(p)
