"""What the workbench's tabs share: the app context, error translation and small renderers.

Handlers raise :class:`gradio.Error` (a message in the page, no traceback) for anything a user
can fix; :func:`user_errors` converts the library's errors (:data:`USER_ERRORS`: any
:class:`~reasoning_env.errors.ReasoningEconomicsError`, a ``ValueError``, a missing file) and turns
unexpected exceptions into a short message while logging the traceback on the server.
"""

from __future__ import annotations

import functools
import html
import inspect
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gradio as gr

from reasoning_env.config import EnvConfig
from reasoning_env.errors import ReasoningEconomicsError

logger = logging.getLogger("workbench.app")

__all__ = ["USER_ERRORS", "AppContext", "fmt_float", "fmt_int", "marks_on", "status_line", "user_errors", "warn"]


#: The example runs shipped with the repository (metrics, evaluations and config; no weights).
EXAMPLE_RUNS_ROOT = Path(__file__).resolve().parents[2] / "examples" / "runs"


@dataclass
class AppContext:
    """Process-wide settings and shared resources of one workbench app.

    Attributes:
        base_config: The environment config the Play tab starts from (the served config when
            the OpenEnv API runs in the same process).
        runs_root: Default folder of run folders (Runs tab, Reward lab, Play's "save as run").
        grader: Grader shared by every session's environment (``None``: one per environment).
        pools: Question pools of ``base_config`` loaded once (``None``: loaded on first reset).
        download_dir: Folder for files offered for download (episode JSON, tuned YAML).
        environ: Environment variables consulted for optional features (LLM policies).
        tokenizer_policy: ``name -> reason or None`` for the Play tab's tokenizer names (the
            server's policy when the OpenEnv API runs in the same process); ``None``: any name.
        example_runs_root: Folder of the example runs shipped with the repository (``examples/runs``: the
            CPU learning run of docs/training.md), listed in the Runs tab after the runs folder's own and
            selected when that folder has none (a fresh clone, the Space); ``None`` (the default of a bare
            context): not listed. The app server (:func:`workbench.app.server.build_app_context`) sets it.
        curves: The solver curves of Play's simulated policies and saved runs and of the Reward
            lab's induced allocation (default: the hand-chosen defaults; ``--curves FILE`` of the
            app server loads a calibrated file, :mod:`workbench.calibration`).
    """

    base_config: EnvConfig = field(default_factory=EnvConfig)
    runs_root: str = "runs"
    grader: Any = None
    pools: Any = None
    download_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="workbench-downloads-")))
    environ: dict = field(default_factory=lambda: dict(os.environ))
    tokenizer_policy: Callable[[str], str | None] | None = None
    curves: Any = None
    example_runs_root: str | None = None

    def __post_init__(self) -> None:
        if self.curves is None:
            from reasoning_env.policies import SolverCurves

            self.curves = SolverCurves()
        self.download_dir = Path(self.download_dir)
        self.download_dir.mkdir(parents=True, exist_ok=True)


#: Errors whose message is meant for the user as is: every error the project raises on purpose
#: (:mod:`reasoning_env.errors`), plus the plain ``ValueError`` of an argument check (a statistic
#: over too few rows, an allocation with no questions) and a file that is not there.
USER_ERRORS: tuple[type[BaseException], ...] = (ReasoningEconomicsError, ValueError, FileNotFoundError)


def _to_gr_error(exc: BaseException, where: str) -> gr.Error:
    if isinstance(exc, gr.Error):
        return exc
    if isinstance(exc, USER_ERRORS):
        return gr.Error(str(exc), title="Cannot do that", print_exception=False)
    logger.exception("unexpected error in %s", where)
    return gr.Error(
        f"unexpected error in {where}: {type(exc).__name__}: {exc}. The server log has the details.",
        title="Error",
        print_exception=False,
    )


def user_errors(fn: Callable) -> Callable:
    """Decorator for handlers (functions or generators): user-fixable errors become a
    :class:`gradio.Error` with the library's message; anything else a short message (logged)."""
    where = fn.__name__.replace("_", " ")
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def gen_wrapper(*args: Any, **kwargs: Any):
            try:
                yield from fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - translated for the page
                raise _to_gr_error(exc, where) from None

        return gen_wrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - translated for the page
            raise _to_gr_error(exc, where) from None

    return wrapper


def status_line(elem_id: str) -> gr.Markdown:
    """A tab's status line: the one place its actions show that they are busy or were refused
    (with :func:`marks_on` on every event of the tab). Create it inside the tab's layout."""
    return gr.Markdown("", elem_id=elem_id, container=False, elem_classes=["ree-status"])


def marks_on(status: gr.Markdown) -> dict[str, Any]:
    """Event keyword arguments putting an event's busy timer and its error mark on ``status``
    (a :func:`status_line`) only. A refused action then shows its message once (the toast of
    :func:`user_errors`) and every output panel keeps what it showed, where Gradio would mark
    each output of the event "Error"."""
    return {"show_progress_on": [status]}


def warn(message: str) -> None:
    """Show a warning toast in the page (a no-op outside a Gradio request)."""
    try:
        gr.Warning(message)
    except Exception:  # noqa: BLE001 - outside a request context Gradio raises; the log keeps the message
        logger.warning(message)


def fmt_int(value: float | None) -> str:
    """``1,234`` (``–`` for ``None``)."""
    return "–" if value is None else f"{int(round(value)):,}"


def fmt_float(value: float | None, digits: int = 3, signed: bool = False) -> str:
    """A float with ``digits`` decimals (``+`` sign when ``signed``; ``–`` for ``None``)."""
    if value is None:
        return "–"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def esc(text: Any) -> str:
    """HTML-escaped ``str(text)``."""
    return html.escape(str(text))
