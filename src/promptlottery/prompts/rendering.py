"""Rendering a prompt template: Jinja2 in a sandbox, bounded in time and size.

A template is a text with placeholders, not a program. It is rendered with ``StrictUndefined`` in
Jinja2's sandbox (an item's text is data, never code), with no loader (``{% include %}``,
``{% import %}`` and ``{% extends %}`` are refused: :func:`check_template`), and bounded: at most
:data:`RENDER_MAX_SECONDS` of the rendering thread's CPU time (a SIGVTALRM in the main thread, a
bounded ``range`` everywhere), at most :data:`RENDER_MAX_CHARS` characters out, ``*`` refused where
it would make more. Any failure is one :class:`PromptError` naming where the template is.
"""

from __future__ import annotations

from functools import lru_cache

from jinja2 import StrictUndefined, TemplateSyntaxError, UndefinedError
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from promptlottery.errors import UserError


class PromptError(UserError, ValueError):
    """A prompt group file is malformed or a template cannot be rendered for an item."""


#: the bounds of one rendering: a template is a text with placeholders, not a program (two nested
#: loops over a range, a string multiplied by a large number: refused, not a hang or a full memory)
#: (seconds of the rendering thread's own CPU time: a loaded machine does not trip it)
RENDER_MAX_SECONDS = 3.0
RENDER_MAX_CHARS = 1_000_000


class _RenderBound(Exception):
    """A rendering went past :data:`RENDER_MAX_SECONDS` or :data:`RENDER_MAX_CHARS`."""


class _BoundedSandbox(SandboxedEnvironment):
    """The sandbox, with ``*`` bounded in the size of what it makes (``"x" * 10**9``)."""

    intercepted_binops = frozenset(["*", "**"])

    def call_binop(self, context, operator, left, right):
        if operator == "**" and isinstance(right, int) and abs(right) > 64:
            raise _RenderBound(f"'**' with an exponent of {right}")
        if operator == "*":
            n = next((x for x in (left, right) if isinstance(x, int)), None)
            other = right if n is left else left
            if n is not None and hasattr(other, "__len__") and n * len(other) > RENDER_MAX_CHARS:
                raise _RenderBound(f"'*' would make {n * len(other):,} items (at most {RENDER_MAX_CHARS:,})")
        return super().call_binop(context, operator, left, right)


TEMPLATE_ENV = _BoundedSandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=False)
#: the render in progress: its deadline (time.thread_time), read by the bounded ``range``
_DEADLINE = [float("inf")]


def _bounded_range(*args):
    """The sandbox's ``range`` (its own size limit kept), whose loop stops past the render's deadline."""
    import time

    for k, x in enumerate(TEMPLATE_ENV.globals["_safe_range"](*args)):
        if k % 1000 == 0 and time.thread_time() > _DEADLINE[0]:
            raise _RenderBound(f"it ran more than {RENDER_MAX_SECONDS:g} s")
        yield x


TEMPLATE_ENV.globals["_safe_range"] = TEMPLATE_ENV.globals["range"]
TEMPLATE_ENV.globals["range"] = _bounded_range
#: template tags that read other templates: there is no loader, a template is one self-contained text
_LOADING_TAGS = {
    "Include": "include",
    "Import": "import",
    "FromImport": "from ... import",
    "Extends": "extends",
}


def render(template: str, variables: dict[str, str], *, where: str) -> str:
    """``template`` rendered with ``variables`` in the sandbox, bounded in time and size; any failure
    (a missing placeholder, a syntax error, a sandbox refusal, ``{% include %}``, a recursive macro,
    a bound) is one-line :class:`PromptError` naming ``where``."""
    import time

    try:
        check_template(template, where=where)
        _DEADLINE[0] = time.thread_time() + RENDER_MAX_SECONDS
        with _alarm(RENDER_MAX_SECONDS):
            out, size = [], 0
            for chunk in _compiled(template).generate(**variables):
                size += len(chunk)
                if size > RENDER_MAX_CHARS:
                    raise _RenderBound(f"it made more than {RENDER_MAX_CHARS:,} characters")
                if time.thread_time() > _DEADLINE[0]:
                    raise _RenderBound(f"it ran more than {RENDER_MAX_SECONDS:g} s")
                out.append(chunk)
        return "".join(out).strip()
    except PromptError:
        raise
    except UndefinedError as e:
        raise PromptError(f"{where}: template placeholder missing from the item: {e.message}") from None
    except TemplateSyntaxError as e:
        raise PromptError(f"{where}: template syntax error at line {e.lineno}: {e.message}") from None
    except SecurityError as e:  # the sandbox refused an attribute: an item's text is data, never code
        raise PromptError(f"{where}: the template sandbox refused it: {e}") from None
    except _RenderBound as e:
        raise PromptError(f"{where}: rendering the template stopped: {e} (a template is a text "
                          "with placeholders, not a program)") from None  # fmt: skip
    except RecursionError:
        raise PromptError(
            f"{where}: rendering the template recursed without end (a macro calling itself?)"
        ) from None
    except Exception as e:  # noqa: BLE001 - whatever else a template raises is the template's fault
        what = " ".join(str(e).split())[:200]
        raise PromptError(f"{where}: rendering the template failed ({type(e).__name__}: {what})") from None
    finally:
        _DEADLINE[0] = float("inf")


class _alarm:
    """A SIGVTALRM after ``seconds`` of the process's CPU time, raising :class:`_RenderBound` once the
    rendering thread itself has used them (re-armed while other threads used the time): it stops a
    loop that yields nothing. The main thread only; elsewhere the bounded ``range`` and the output
    check stop a long rendering. An alarm set by someone else is left alone."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.old = None

    def __enter__(self):
        import signal
        import threading
        import time

        if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
            if signal.getitimer(signal.ITIMER_VIRTUAL)[0] == 0:

                def _stop(signum, frame):
                    left = _DEADLINE[0] - time.thread_time()
                    if left > 0:  # other threads used the time: wait for this one's
                        signal.setitimer(signal.ITIMER_VIRTUAL, max(left, 0.05))
                        return
                    raise _RenderBound(f"it ran more than {RENDER_MAX_SECONDS:g} s")

                self.old = signal.signal(signal.SIGVTALRM, _stop)
                signal.setitimer(signal.ITIMER_VIRTUAL, self.seconds)
        return self

    def __exit__(self, *exc):
        import signal

        if self.old is not None:
            signal.setitimer(signal.ITIMER_VIRTUAL, 0)
            signal.signal(signal.SIGVTALRM, self.old)
        return False


@lru_cache(maxsize=256)
def _compiled(template: str):
    """A checked template compiled once (a grid renders each wording for every item)."""
    return TEMPLATE_ENV.from_string(template)


@lru_cache(maxsize=256)
def _loading_tag(template: str) -> tuple[str, int] | None:
    """The first tag of ``template`` that reads another template, and its line (a syntax error raises)."""
    from jinja2 import nodes

    tree = TEMPLATE_ENV.parse(template)
    for kind, tag in _LOADING_TAGS.items():
        node = next(iter(tree.find_all(getattr(nodes, kind))), None)
        if node is not None:
            return tag, node.lineno
    return None


def check_template(template: str, *, where: str) -> None:
    """A template is a string that parses and reads no other template (``{% include %}``,
    ``{% import %}``, ``{% extends %}``: there is no loader); else one-line :class:`PromptError`."""
    if not isinstance(template, str):
        raise PromptError(
            f"{where}: a template must be a string, got {type(template).__name__} {template!r:.60}"
        )
    try:
        found = _loading_tag(template)
    except TemplateSyntaxError as e:
        raise PromptError(f"{where}: template syntax error at line {e.lineno}: {e.message}") from None
    if found is not None:
        tag, line = found
        raise PromptError(
            f"{where}: line {line}: {{% {tag} %}} reads another template, and a template here is "
            "one self-contained text (no loader): write its text in place"
        )
