"""The Play tab: reset an episode, answer by hand or let a policy answer, watch the budget.

Thin layer over :class:`workbench.play.PlaySession` (one per browser session, held in a
``gr.State``) and :mod:`workbench.episode_plots`. Handlers are methods of :class:`PlayTab` so
tests can call them directly; each returns the whole view (:data:`VIEW`) so every output stays
consistent with the session. In the page, a step is drawn in two passes (:data:`VIEW_FIRST`, then
:meth:`PlayTab.view_rest`) so the verdict is not held up by redrawing the charts.

A real model (``llm_local``: any OpenAI-compatible server, by default the project's vLLM CPU
server) answers streamed in the page: :meth:`PlayTab.policy_stream` and :meth:`PlayTab.run_stream`
are generators over :meth:`workbench.play.PlaySession.stream_policy` that redraw the live panel
(:func:`render_live`: the text so far, tokens against the turn cap and the budget) as the text
arrives, then the step. :meth:`PlayTab.start_engine` starts vLLM's CPU engine for the app
(:class:`workbench.play.LocalEngine`), with a trained LoRA adapter folder beside the base model when one is
given: the Model field then names the adapter (``trained``: the trained model plays) and the base model's name
plays the base, so the same seed can be played by both.

API names (for ``gradio_client``): ``/reset``, ``/answer``, ``/policy_step``, ``/run_to_end``,
``/save_run`` (the API's policy steps are not streamed; ``llm_local`` there uses
``BASELINE_LOCAL_*`` or the default local server).
"""

from __future__ import annotations

import os
import re
import time
import weakref
from collections.abc import Iterator
from typing import Any

import gradio as gr
import pandas as pd

from reasoning_env.policies import describe as describe_policies
from reasoning_env.prompting import SYSTEM_PROMPT, build_user_prompt
from workbench import episode_plots
from workbench.app.common import AppContext, esc, fmt_float, fmt_int, marks_on, status_line, user_errors, warn
from workbench.play import (
    BUDGET_MODES,
    HUMAN,
    TOKENIZER_CHOICES,
    PlayError,
    PlaySession,
    StepResult,
    StreamProgress,
    available_policies,
    llm_settings,
    local_engine,
    local_model_defaults,
    own_file_options,
    parse_play_settings,
    token_spans,
)

__all__ = [
    "PlayTab",
    "POLICY_LABELS",
    "VIEW",
    "render_gauges",
    "render_live",
    "render_question",
    "render_verdict",
]

#: Fewest seconds between two redraws of a streaming answer (a fast server sends a token every few ms).
STREAM_REDRAW_S = 0.1
#: "Run to the end" in the page redraws the charts, token view and steps table at most this often
#: (seconds) and after the last step; every step still updates the question, gauges and verdict.
#: Redrawing all of it after each of 10 quick simulated steps was most of the 11-14 s the review
#: measured at load 8-15 (three figures built and sent, and redrawn twice by the browser, per step).
RUN_REDRAW_S = 1.0
#: Policies whose server URL and model the page asks for.
REAL_MODEL_POLICIES = ("llm_local",)

#: Names of the view outputs every Play handler returns, in order (after the session state).
VIEW = (
    "question",
    "gauges",
    "verdict",
    "components",
    "tokens",
    "spend_plot",
    "type_plot",
    "reward_plot",
    "history",
    "info",
    "prompt",
    "download",
)
#: In the page a step is drawn in two passes: first the verdict and what to do next
#: (:meth:`PlayTab.answer_first`), then the rest (:meth:`PlayTab.view_rest`: token view, three
#: charts, steps table, prompt, download), because redrawing the charts takes most of the
#: browser's time. Through the API (``/answer``, ``/policy_step``) a step returns the whole view.
VIEW_FIRST = ("question", "gauges", "verdict", "components")
VIEW_REST = tuple(name for name in VIEW if name not in VIEW_FIRST)
assert VIEW == VIEW_FIRST + VIEW_REST, "the first pass must be a prefix of the view"

#: The policy picker's labels: ``name: summary`` from the policy registry.
POLICY_LABELS = {name: f"{name}: {meta['summary']}" for name, meta in describe_policies().items()}
BUDGET_MODE_LABELS = {
    "tokenizer_native": "tokenizer-native: ratio × tokens of the questions",
    "config": "config formula: ratio × N × (min + max) / 2",
    "explicit": "explicit: a fixed number of tokens",
}
TOKEN_COLORS = {"token": "#dbeafe", "token·": "#fde68a", "unpaid": "#fecaca"}
#: Label of the form field that holds the data folder (messages name it).
DATA_FOLDER_LABEL = "Data folder"
HISTORY_COLUMNS = ["#", "type", "level", "by", "tokens", "raw", "answer", "gold", "verdict", "reward"]


def usable_sources() -> list[str]:
    """Source names that work without options (``hf`` and ``jsonl`` need a field mapping)."""
    from reasoning_env.sources import SourceError, available, validate_spec

    out = []
    for name in available():
        try:
            validate_spec(name, {})
        except SourceError:
            continue
        out.append(name)
    return out


#: The own-file form's choices of ``answer_extraction`` (``auto``: unset, see hf_dataset).
ANSWER_EXTRACTION_LABELS = {
    "auto": "the column as is (stops if it holds worked solutions)",
    "gsm8k": "after '#### ' (GSM8K solutions)",
    "boxed": "the last \\boxed{} (MATH solutions)",
    "metamathqa": "after 'The answer is:' (MetaMathQA)",
    "final": "the model-output rules (answer line, box)",
    "none": "the column as is, always",
}


def source_choices(config: Any) -> list[str | tuple[str, str]]:
    """The Question sources checkboxes: every source that works without options, and each source
    ``config`` names (a ``jsonl`` / ``hf`` source plays with the config's options, its file named
    in the label)."""
    out: list[str | tuple[str, str]] = list(usable_sources())
    for spec in config.sources:
        if spec.name in out:
            continue
        what = spec.options.get("data_files") or spec.options.get("hf_id") or spec.options.get("data_dir")
        if isinstance(what, (list, tuple)):
            what = ", ".join(map(str, what))
        label = f"{spec.name}: {os.path.basename(str(what)) or what} (from the config)" if what else spec.name
        out.append((label, spec.name))
    return out


def data_folder_hint(config: Any) -> str | None:
    """A fix worded for this page when a source of ``config`` cannot be loaded here, else ``None``.

    Loads ``config``'s sources the way the environment does (cached loads are free); when one is
    unavailable (offline, no local copy), the message says what was tried and points at the
    form's :data:`DATA_FOLDER_LABEL` field and the source's checkbox, not at config options.
    """
    from reasoning_env.sources import SourceError, SourceUnavailable, load_pools

    try:
        load_pools(config.sources, data_dir=config.data_dir, offline_fallback=config.offline_fallback)
    except SourceUnavailable as exc:
        name = exc.source or "a source"
        wanted = exc.local_patterns[0] if exc.local_patterns else f"the {name} files"
        tried = [t for t in exc.tried if not t.startswith("no file matching")]
        if config.data_dir:
            tried.insert(0, f"the {DATA_FOLDER_LABEL} {config.data_dir!r} holds no {wanted}")
        return (
            f"{name} cannot be loaded here: {'; '.join(tried)}. Fill “{DATA_FOLDER_LABEL}” on the left with a folder "
            f"holding {wanted} (e.g. ../shared/data), or untick {name} in “Question sources”."
        )
    except SourceError:  # bad options: the library's own message says it
        return None
    return None


# ------------------------------------------------------------------------------- renderers
def _bar(fraction: float, color: str) -> str:
    pct = max(0.0, min(1.0, fraction)) * 100
    return (
        "<div "
        "style='height:8px;border-radius:4px;background:var(--border-color-primary);margin-top:8px;overflow:hidden'>"
        f"<div style='height:8px;width:{pct:.1f}%;background:{color};border-radius:4px'></div></div>"
    )


def _card(title: str, value: str, sub: str, bar: str = "", elem: str = "") -> str:
    return (
        f"<div class='ree-gauge' data-gauge='{elem}' style='flex:1 1 "
        "150px;min-width:140px;padding:10px 14px;border:1px solid "
        "var(--border-color-primary);"
        f"border-radius:10px;background:var(--block-background-fill)'>"
        "<div "
        f"style='font-size:12px;color:var(--body-text-color-subdued);text-transform:uppercase;letter-spacing:.04em'>{title}</div>"
        f"<div style='font-size:26px;font-weight:650;font-variant-numeric:tabular-nums;line-height:1.25'>{value}</div>"
        f"<div style='font-size:12.5px;color:var(--body-text-color-subdued)'>{sub}</div>{bar}</div>"
    )


def render_gauges(session: PlaySession | None, streaming: StreamProgress | None = None) -> str:
    """HTML of the live gauges: budget left, questions left, budget per remaining question (vs
    the fair share), accuracy so far and reward so far; an end-of-episode banner when done. While an
    answer streams (``streaming``), the budget cards count its tokens so far, as the live line does."""
    obs = session.observation if session is not None else None
    if obs is None:
        cards = [
            _card("Budget left", "–", "tokens", elem="budget"),
            _card("Questions left", "–", "", elem="questions"),
            _card("Per remaining question", "–", "tokens", elem="per_question"),
            _card("Accuracy so far", "–", "", elem="accuracy"),
            _card("Reward so far", "–", "", elem="reward"),
        ]
        return "<div style='display:flex;gap:10px;flex-wrap:wrap'>" + "".join(cards) + "</div>"
    s = session.summary()
    total = max(1, s["total_budget"])
    n = max(1, s["num_questions"])
    fair = total / n
    left_frac = obs.remaining_budget / total
    color = "#16a34a" if left_frac > 0.4 else ("#f59e0b" if left_frac > 0.15 else "#dc2626")
    per_q = obs.budget_per_remaining_question
    per_color = "#16a34a" if per_q >= 0.9 * fair else ("#f59e0b" if per_q >= 0.5 * fair else "#dc2626")
    answered, correct = s["answered"], s["correct"]
    never = n - answered if obs.done and answered < n else 0  # the budget ran dry before these were asked
    left, spent, writing = obs.remaining_budget, s["spent"], ""
    if streaming is not None and not obs.done:
        left, spent = streaming.budget_left, s["spent"] + (obs.remaining_budget - streaming.budget_left)
        left_frac = left / total
        color = "#16a34a" if left_frac > 0.4 else ("#f59e0b" if left_frac > 0.15 else "#dc2626")
        writing = f" · {fmt_int(streaming.tokens)} in the answer being written"
        if obs.questions_remaining:
            per_q = left / obs.questions_remaining
            per_color = "#16a34a" if per_q >= 0.9 * fair else ("#f59e0b" if per_q >= 0.5 * fair else "#dc2626")
    cards = [
        _card(
            "Budget left",
            fmt_int(left),
            f"of {fmt_int(total)} tokens · spent {fmt_int(spent)}{writing}",
            _bar(left_frac, color),
            "budget",
        ),
        _card(
            "Questions left",
            str(obs.questions_remaining),
            f"of {n} · answered {answered}" + (f" · {never} never asked" if never else ""),
            _bar(answered / n, "#4c78a8"),
            "questions",
        ),
        _card(
            "Per remaining question",
            fmt_int(per_q) if obs.questions_remaining else "–",
            f"tokens · fair share {fmt_int(fair)}",
            _bar(min(1.0, per_q / (2 * fair)) if obs.questions_remaining else 0.0, per_color),
            "per_question",
        ),
        _card(
            "Accuracy so far",
            f"{100 * s['accuracy']:.0f}%" if answered else "–",
            f"{correct} of {answered} correct",
            _bar(s["accuracy"] if answered else 0.0, "#54a24b"),
            "accuracy",
        ),
        _card(
            "Reward so far",
            fmt_float(s["reward"], 3, signed=True) if answered else "–",
            "sum of step rewards",
            "",
            "reward",
        ),
    ]
    html = "<div style='display:flex;gap:10px;flex-wrap:wrap'>" + "".join(cards) + "</div>"
    if obs.done:
        why = {"all_answered": "every question answered", "budget_exhausted": "the budget ran dry"}.get(
            obs.done_reason or "", obs.done_reason or ""
        )
        html += (
            "<div class='ree-done' style='margin-top:10px;padding:8px "
            "12px;border-radius:8px;background:#ecfdf5;color:#065f46;border:1px solid "
            "#a7f3d0'>"
            f"<b>Episode over</b>: {esc(why)}. {correct} of {n} correct, "
            f"{fmt_int(s['spent'])} of {fmt_int(total)} tokens spent, "
            f"reward {fmt_float(s['reward'], 3, signed=True)}. Download it or save it as a "
            "run below; Reset for a new one.</div>"
        )
    return html


def render_question(session: PlaySession | None) -> str:
    """Markdown of the current question with its position, type and difficulty."""
    obs = session.observation if session is not None else None
    if obs is None:
        return (
            "### No episode yet\nChoose the settings on the left and press **Reset** to "
            "draw 10 questions and a token budget."
        )
    if obs.done:
        return (
            f"### Episode over\n{len(session.results)} of {obs.num_questions} questions "
            "answered. Press **Reset** for a new episode."
        )
    diff = f"difficulty {obs.difficulty}" if obs.difficulty is not None else "difficulty n/a"
    return (
        f"### Question {obs.question_index + 1} of {obs.num_questions} &nbsp;·&nbsp; "
        f"`{obs.problem_type}` &nbsp;·&nbsp; {diff}\n\n"
        f"{_quote(obs.question)}\n\n"
        f"<small>This answer may use up to **{obs.step_token_cap:,} tokens** before the "
        f"cap clips it. End it with `\\boxed{{...}}`.</small>"
    )


#: KaTeX delimiters of the question display. ``$...$`` is math only for competition-style types:
#: GSM-style questions use ``$`` for money ("$x per night ... a $60 dinner").
LATEX_BASE = [
    {"left": "$$", "right": "$$", "display": True},
    {"left": "\\(", "right": "\\)", "display": False},
    {"left": "\\[", "right": "\\]", "display": True},
]
LATEX_WITH_DOLLAR = LATEX_BASE + [{"left": "$", "right": "$", "display": False}]


def question_latex(problem_type: str | None) -> list[dict]:
    """KaTeX delimiters for a question of ``problem_type``: single ``$`` counts as math except
    for GSM-style (money) types."""
    pt = str(problem_type or "")
    return LATEX_BASE if (pt.startswith("GSM") or pt.lower().startswith("gsm")) else LATEX_WITH_DOLLAR


def _quote(text: str) -> str:
    return "\n".join("> " + (line if line.strip() else "") for line in str(text).splitlines() or [""])


def render_verdict(result: StepResult | None) -> str:
    """Markdown of the last step: verdict and reason, extracted and gold answers, tokens."""
    if result is None:
        return "*No answer yet.*"
    ls = result.observation.last_step
    ok = (
        "<span style='color:#15803d;font-weight:700'>✓ correct</span>"
        if ls.correct
        else "<span style='color:#b91c1c;font-weight:700'>✗ wrong</span>"
    )
    who = "you" if result.actor == HUMAN else f"`{result.actor}`"
    clipped = ""
    if ls.raw_tokens > ls.tokens:
        clipped = (
            f"\n\n<small>The hard cap clipped this answer: {ls.raw_tokens - ls.tokens:,} "
            "tokens past the remaining budget "
            "were neither charged nor graded.</small>"
        )
    graded = {
        "response": "the response",
        "grading_response": "the visible answer (after </think>)",
        "paid_prefix": "only the paid prefix",
    }.get(ls.graded_text, ls.graded_text)
    extracted = f"`{ls.extracted_answer}`" if ls.extracted_answer is not None else "*none found*"
    lat = f" in {result.latency_s:.2f} s" if result.latency_s is not None else ""
    tokens = f"**{ls.tokens:,}**" + (f" of {ls.raw_tokens:,}" if ls.raw_tokens != ls.tokens else "")
    return (
        f"#### Q{ls.index + 1} · {ls.problem_type} · answered by {who}{lat}: {ok}\n\n"
        f"| extracted | gold | grader | tokens charged | reward |\n|---|---|---|---:|---:|\n"
        f"| {extracted} | `{ls.gold_answer}` | `{ls.grade_reason}` | {tokens} | **{ls.reward:+.3f}** |\n\n"
        f"<small>Graded {graded}.</small>{clipped}"
    )


def render_components(result: StepResult | None) -> str:
    """Markdown table of the last step's reward components (zero ones greyed out)."""
    if result is None:
        return ""
    comps = result.observation.last_step.reward_components or {}
    rows = ["| component | value |", "|---|---:|"]
    for k, v in comps.items():
        val = f"{v:+.4f}"
        shown = val if v else f"<span style='opacity:.45'>{val}</span>"
        rows.append(f"| {k} | {shown} |")
    rows.append(f"| **total** | **{result.observation.last_step.reward:+.4f}** |")
    return "#### Reward, by component\n" + "\n".join(rows)


def render_live(progress: StreamProgress | None, result: StepResult | None = None) -> str:
    """HTML of a model's answer: while it streams (``progress``), the text so far with tokens
    against the turn cap and the budget ("answer 123 / cap 344 tokens · budget 1,597 of 1,720
    left"), speed and the model; once answered (``result`` too), how long it took and why it ended. The text
    box holds about ten lines and shows the newest (the rest scrolls)."""
    if progress is None:
        return ""
    p = progress
    speed = f" · {p.tokens_per_s:.1f} tokens/s" if p.tokens_per_s is not None else ""
    first = f"first text after {p.first_text_s:.1f} s" if p.first_text_s is not None else "waiting for the first text"
    if result is None:
        head = f"Q{p.question_index + 1} · <code>{esc(p.actor)}</code> is answering… ({p.elapsed_s:.0f} s)"
        stats = f"{first}{speed}"
        line = p.line()
    else:
        ls = result.observation.last_step
        finish = result.meta.get("finish_reason")
        why = {"length": "stopped at the cap", "stop": "ended by the model"}.get(str(finish), str(finish or ""))
        head = f"Q{p.question_index + 1} · answered by <code>{esc(p.actor)}</code> in {result.latency_s or 0:.1f} s"
        stats = f"{first}{speed}" + (f" · {why}" if why else "")
        line = (
            f"answer {ls.tokens:,} / cap {p.cap:,} tokens · "
            f"budget {int(result.observation.remaining_budget):,} of {p.total_budget:,} left"
        )
    frac = min(1.0, p.tokens / p.cap) if p.cap else 0.0
    model = f"<div class='ree-live-model'>{esc(p.model)}</div>" if p.model else ""
    return (
        "<div class='ree-live' style='padding:10px 14px;border:1px solid var(--border-color-primary);"
        "border-radius:10px;background:var(--block-background-fill)'>"
        f"<div style='font-weight:650'>{head}</div>{model}"
        f"<div class='ree-live-line' style='font-variant-numeric:tabular-nums;margin-top:4px'><b>{esc(line)}</b>"
        f" <span style='color:var(--body-text-color-subdued);font-size:12.5px'>· {esc(stats)}</span></div>"
        f"{_bar(frac, '#4c78a8')}"
        # the text box keeps to a few lines beside the spend chart and shows the newest ones (a reversed column
        # scrolls from its end); scroll up in it for the rest
        "<div class='ree-live-text' style='display:flex;flex-direction:column-reverse;max-height:170px;"
        "overflow:auto;margin-top:8px'>"
        f"<pre style='white-space:pre-wrap;margin:0;font-size:13px'>{esc(p.text)}</pre></div></div>"
    )


def render_engine(status: dict[str, Any]) -> str:
    """Markdown of the local engine's state (:meth:`workbench.play.LocalEngine.status`)."""
    state = status.get("state")
    if state == "starting":
        expected = status.get("expected") or "about a minute on 2 quiet cores"
        progress = status.get("progress")
        return (
            f"Starting vLLM's CPU engine for `{status.get('model')}`: {status.get('elapsed_s', 0):.0f} s so far; "
            f"{expected}…"
            + (f"  \nvLLM: `{progress}`" if progress else "")
            + (f"  \nLog: `{status['log']}`" if status.get("log") else "")
        )
    if state == "running":
        eng = status.get("engine") or {}
        adapter = status.get("adapter")
        with_adapter = (
            f" and, as `{adapter['name']}`, the same model with the LoRA adapter `{adapter['path']}`; Model "
            f"`{adapter['name']}` plays the trained model, `{status.get('model')}` the base"
            if adapter
            else ""
        )
        return (
            f"vLLM {eng.get('engine_version') or ''} ({eng.get('device') or 'cpu'}) serves `{status.get('model')}`"
            f"{with_adapter} at `{status.get('base_url')}` (started in {status.get('startup_s') or 0:.0f} s); it "
            "stops with the app."
        )
    if state == "failed":
        return f"**The engine did not start** after {status.get('elapsed_s', 0):.0f} s: {status.get('error')}"
    if state == "stopped":
        return "The engine stopped; start it again."
    return ""


def shorter_episode_note(session: PlaySession | None) -> str | None:
    """Why the episode has fewer questions than the form asked for (the sources hold fewer in all), or ``None``."""
    if session is None or session.reset_observation is None:
        return None
    asked, got = int(session.config.num_questions), int(session.reset_observation.num_questions)
    if got >= asked:
        return None
    used = session.reset_observation.metadata.get("sources_used") or []
    held = ", ".join(f"{u.get('source')}: {u.get('questions')}" for u in used)
    return (
        f"This episode has {got} questions, not the {asked} asked: the chosen sources hold only {got} in all "
        f"({held}); the budget is for these."
    )


def render_info(session: PlaySession | None) -> str:
    """Markdown of the episode's settings: budget and its source, seed, tokenizer, sources."""
    if session is None or session.reset_observation is None:
        return ""
    md = session.reset_observation.metadata
    cfg = session.config
    used = ", ".join(
        f"{u.get('source')} → {u.get('used')} ({u.get('questions')} questions"
        + (
            ", builtin stand-ins, not the real data"
            if str(u.get("used", "")).startswith("builtin:") and u.get("source") != "builtin"
            else ""
        )
        + ")"
        for u in (md.get("sources_used") or [])
    )
    mode = "hard cap" if cfg.hard_cap_mode else "soft budget"
    short = shorter_episode_note(session)
    return (
        f"**Budget** {md.get('total_budget'):,} tokens (`{md.get('budget_source')}`, "
        f"{mode}) · **seed** `{md.get('seed')}` · "
        f"**tokenizer** `{md.get('tokenizer_name')}` ({md.get('tokenizer_origin')})  \n**questions from** {esc(used)}"
        + (f"  \n**{esc(short)}**" if short else "")
    )


def history_frame(session: PlaySession | None) -> pd.DataFrame:
    """The steps so far as a display table (:data:`HISTORY_COLUMNS`)."""
    rows = []
    for r in session.results if session is not None else []:
        ls = r.observation.last_step
        rows.append(
            [
                ls.index + 1,
                ls.problem_type,
                "" if ls.difficulty is None else ls.difficulty,
                r.actor,
                ls.tokens,
                ls.raw_tokens,
                "" if ls.extracted_answer is None else ls.extracted_answer,
                ls.gold_answer,
                "correct" if ls.correct else f"wrong ({ls.grade_reason})",
                round(ls.reward, 4),
            ]
        )
    return pd.DataFrame(rows, columns=HISTORY_COLUMNS)


def render_prompt(session: PlaySession | None) -> str:
    """The prompt an LLM policy sees for the current question (system + user message)."""
    obs = session.observation if session is not None else None
    if obs is None or obs.done:
        return ""
    return f"[system]\n{SYSTEM_PROMPT}\n\n[user]\n{build_user_prompt(obs)}"


# ------------------------------------------------------------------------------- the tab
class PlayTab:
    """Handlers and layout of the Play tab.

    Args:
        ctx: The app context (base config, shared grader and pools, runs folder).
    """

    def __init__(self, ctx: AppContext) -> None:
        self.ctx = ctx
        self.policies = available_policies(ctx.environ, real_model=True)
        self.engine = local_engine()
        self._told_offline: weakref.WeakSet[PlaySession] = (
            weakref.WeakSet()
        )  # sessions already shown the stand-in notice

    # ------------------------------------------------------------------ helpers
    def new_session(self) -> PlaySession:
        """A fresh session on the app's base config, sharing its grader and pools."""
        return PlaySession(
            self.ctx.base_config,
            grader=self.ctx.grader,
            pools=self.ctx.pools,
            tokenizer_policy=self.ctx.tokenizer_policy,
            curves=self.ctx.curves,
        )

    def _download_path(self, session: PlaySession) -> str | None:
        if session is None or not session.started or not session.results:
            return None
        md = session.reset_observation.metadata
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", str(md.get("episode_id") or "episode"))[:80]
        return str(session.export_json(self.ctx.download_dir / f"episode-{safe}.json"))

    def view(self, session: PlaySession | None) -> tuple:
        """Every output of :data:`VIEW` for ``session`` (placeholders before the first reset)."""
        return (*self.view_first(session), *self.view_rest(session))

    def view_first(self, session: PlaySession | None) -> tuple:
        """The :data:`VIEW_FIRST` outputs: question, gauges, verdict, reward components."""
        results = session.results if session is not None else []
        last = results[-1] if results else None
        current = session.observation if session is not None else None
        return (
            gr.Markdown(
                value=render_question(session),
                latex_delimiters=question_latex(current.problem_type if current is not None else None),
            ),
            render_gauges(session),
            render_verdict(last),
            render_components(last),
        )

    def view_rest(self, session: PlaySession | None) -> tuple:
        """The :data:`VIEW_REST` outputs (the page's second pass after a step): token view, the
        three charts, steps table, episode info, prompt, download."""
        results = session.results if session is not None else []
        last = results[-1] if results else None
        frame = session.steps_frame() if session is not None and session.started else pd.DataFrame()
        obs = session.reset_observation if session is not None else None
        total = obs.total_budget if obs is not None else 0
        n = obs.num_questions if obs is not None else 10
        spans: list = []
        label = "Response tokens"
        if last is not None and session.tokenizer is not None:
            ls = last.observation.last_step
            spans = token_spans(
                session.tokenizer, last.response, charged=ls.tokens if ls.raw_tokens > ls.tokens else None
            )
            label = (
                f"Response tokens, as {obs.metadata.get('tokenizer_name')} splits them "
                f"({ls.raw_tokens:,} tokens; shades alternate per token"
                + (", red: past the budget" if ls.raw_tokens > ls.tokens else "")
                + ")"
            )
        path = self._download_path(session)
        return (
            gr.HighlightedText(value=spans, label=label),
            episode_plots.spend_figure(frame, total, n),
            episode_plots.tokens_per_question_figure(frame, total / n if total else None, n),
            episode_plots.step_rewards_figure(frame, n),
            history_frame(session),
            render_info(session),
            render_prompt(session),
            gr.DownloadButton(value=path, interactive=path is not None),
        )

    # ------------------------------------------------------------------ handlers
    @user_errors
    def reset(
        self,
        session: PlaySession | None,
        sources: Any,
        budget_mode: str,
        budget_ratio: Any,
        total_budget: Any,
        tokenizer_name: str,
        seed: Any,
        hard_cap_mode: bool,
        num_questions: Any,
        data_dir: Any,
        own_file: Any = None,
        prompt_field: Any = None,
        answer_field: Any = None,
        answer_extraction: Any = None,
    ) -> tuple:
        """Start an episode with the form's settings (``own_file``: a JSONL/CSV question file read
        with the field mapping that follows). Raises ``gr.Error`` on bad input."""
        own = own_file_options(own_file, prompt_field, answer_field, answer_extraction)
        if not own and not [x for x in (sources or []) if str(x).strip()]:
            raise PlayError("no questions to play: tick a question source, or give a question file")
        settings = parse_play_settings(
            sources,
            budget_mode,
            budget_ratio,
            total_budget,
            tokenizer_name,
            seed,
            hard_cap_mode,
            num_questions,
            data_dir,
            own,
        )
        session = session if session is not None else self.new_session()
        try:
            obs = session.reset(settings)
        except PlayError:
            hint = data_folder_hint(session.config_for(settings))
            if hint is None:
                raise
            raise PlayError(hint) from None
        md = obs.metadata
        if md.get("budget_warning"):
            warn(md["budget_warning"])
        fallbacks = [
            u
            for u in (md.get("sources_used") or [])
            if str(u.get("used", "")).startswith("builtin:") and u.get("source") != "builtin"
        ]
        if fallbacks and session not in self._told_offline:
            self._told_offline.add(session)
            warn(
                "Offline: serving the builtin stand-in questions for "
                + ", ".join(u["source"] for u in fallbacks)
                + " (see the episode info)."
            )
        short = shorter_episode_note(session)
        if short:
            warn(short)
        if obs.done:
            warn(f"the budget ({obs.total_budget} tokens) is below min_tokens: the episode ended at once")
        return (session, *self.view(session))

    @user_errors
    def answer(self, session: PlaySession | None, response: str) -> tuple:
        """Answer the current question with the typed response; returns the whole view."""
        self._typed_step(session, response)
        return (session, *self.view(session), "")

    @user_errors
    def answer_first(self, session: PlaySession | None, response: str) -> tuple:
        """:meth:`answer` for the page: the step and the :data:`VIEW_FIRST` outputs (then
        :meth:`view_rest` draws the rest)."""
        self._typed_step(session, response)
        return (session, *self.view_first(session), "")

    def _typed_step(self, session: PlaySession | None, response: str) -> None:
        if session is None:
            raise PlayError("no episode yet: press Reset to start one")
        session.step(response or "")

    @user_errors
    def policy_step(self, session: PlaySession | None, policy: str) -> tuple:
        """Let the chosen policy answer the current question; returns the whole view."""
        self._policy_step(session, policy)
        return (session, *self.view(session))

    @user_errors
    def policy_step_first(self, session: PlaySession | None, policy: str) -> tuple:
        """:meth:`policy_step` for the page: the step and the :data:`VIEW_FIRST` outputs."""
        self._policy_step(session, policy)
        return (session, *self.view_first(session))

    def _policy_step(self, session: PlaySession | None, policy: str) -> None:
        if session is None:
            raise PlayError("no episode yet: press Reset to start one")
        name = self._check_policy(policy)
        session.step_policy(name, llm=self._llm(name))

    @user_errors
    def run_to_end(self, session: PlaySession | None, policy: str) -> Iterator[tuple]:
        """Let the chosen policy answer every remaining question, updating the view after each."""
        if session is None:
            raise PlayError("no episode yet: press Reset to start one")
        name = self._check_policy(policy)
        for _ in session.run_iter(name, llm=self._llm(name)):
            yield (session, *self.view(session))
        # the final state (also when the generator yielded nothing new)
        yield (session, *self.view(session))

    @user_errors
    def save_run(self, session: PlaySession | None, runs_root: str) -> str:
        """Save the episode as a run folder under ``runs_root``; returns a status line."""
        if session is None:
            raise PlayError("no episode yet: press Reset and play first")
        root = (runs_root or "").strip() or self.ctx.runs_root
        folder = session.save_run(root)
        done = "" if session.done else " (the episode is not finished: the unanswered questions count as wrong)"
        return f"Saved to `{folder}`{done}. Open it in the **Runs** tab, or re-score it in the **Reward lab**."

    def _llm(self, name: str, base_url: Any = None, model: Any = None) -> dict | None:
        """LLM settings of ``name``: its ``BASELINE_*`` variables; for ``llm_local`` the page's server
        URL and model when given (else the variables, else the project's local server), and what
        serves it when that is the app's own engine."""
        if name not in ("llm_api", "llm_local"):
            return None
        out = llm_settings(name, self.ctx.environ)
        if name in REAL_MODEL_POLICIES:
            url_default, model_default = local_model_defaults(self.ctx.environ)
            out["base_url"] = str(base_url or "").strip() or out.get("base_url") or url_default
            out["model"] = str(model or "").strip() or out.get("model") or model_default
            engine = self.engine.engine_for(out["base_url"])
            if engine is not None:
                out["engine"] = engine
                adapter = self.engine.status().get("adapter")
                if adapter and out["model"] == adapter["name"]:  # the trained model: counted with its base's tokens
                    out["adapter"] = adapter
                    out["tokenizer_name"] = adapter["served_base"]
        return out

    def _stream_step(
        self, session: PlaySession, name: str, llm: dict | None
    ) -> Iterator[tuple[StreamProgress | None, StepResult | None]]:
        """One streamed step: ``(progress, None)`` at most every :data:`STREAM_REDRAW_S`, then
        ``(last progress, result)``."""
        last, shown_at = None, 0.0
        stream = session.stream_policy(name, llm=llm)
        try:
            for item in stream:
                if isinstance(item, StreamProgress):
                    last = item
                    now = time.monotonic()
                    if now - shown_at >= STREAM_REDRAW_S:
                        shown_at = now
                        yield item, None
                else:
                    yield last, item
        finally:
            stream.close()

    @user_errors
    def policy_stream(self, session: PlaySession | None, policy: str, base_url: Any = None, model: Any = None):
        """:meth:`policy_step_first`, streamed for the page: yields the live panel as the model
        writes (other outputs unchanged), then the step's :data:`VIEW_FIRST` outputs and the
        finished live panel. Outputs: ``(state, *VIEW_FIRST, live)``."""
        if session is None:
            raise PlayError("no episode yet: press Reset to start one")
        name = self._check_policy(policy)
        skip = tuple(gr.skip() for _ in VIEW_FIRST)
        at = VIEW_FIRST.index("gauges")
        for progress, result in self._stream_step(session, name, self._llm(name, base_url, model)):
            if result is None:  # the live text and the gauges counting it
                live = list(skip)
                live[at] = render_gauges(session, progress)
                yield (gr.skip(), *live, render_live(progress))
            else:
                yield (session, *self.view_first(session), render_live(progress, result))

    @user_errors
    def run_stream(self, session: PlaySession | None, policy: str, base_url: Any = None, model: Any = None):
        """:meth:`run_to_end` for the page, each answer streamed: yields the live panel as the model
        writes, the step's :data:`VIEW_FIRST` outputs after each step (the rest skipped), the whole
        view at most every :data:`RUN_REDRAW_S` and after the last step. Outputs: ``(state, *VIEW, live)``."""
        if session is None:
            raise PlayError("no episode yet: press Reset to start one")
        name = self._check_policy(policy)
        llm = self._llm(name, base_url, model)
        skip = tuple(gr.skip() for _ in VIEW)
        skip_rest = tuple(gr.skip() for _ in VIEW_REST)
        at = VIEW.index("gauges")
        first = True
        drawn_at = time.monotonic()
        while first or not session.done:  # a first step even when over: the session says why it cannot
            first = False
            for progress, result in self._stream_step(session, name, llm):
                if result is None:  # the live text and the gauges counting it
                    live = list(skip)
                    live[at] = render_gauges(session, progress)
                    yield (gr.skip(), *live, render_live(progress))
                elif time.monotonic() - drawn_at >= RUN_REDRAW_S and not session.done:
                    drawn_at = time.monotonic()
                    yield (session, *self.view(session), render_live(progress, result))
                else:  # the step's verdict and gauges now; the charts at the next redraw or the end
                    yield (session, *self.view_first(session), *skip_rest, render_live(progress, result))
        yield (session, *self.view(session), gr.skip())

    @user_errors
    def start_engine(self, base_url: Any, model: Any, adapter: Any = None):
        """Start vLLM's CPU engine for the model named in the page (one per app), with the LoRA adapter
        folder ``adapter`` beside it when given, showing its progress; once it serves, point the page's server
        URL and model at it (the adapter's name when one is served: the trained model plays). Outputs:
        ``(base_url, model, engine status)``."""
        if not self.engine.available():
            raise PlayError(
                "vLLM's CPU engine is not installed here: build it with `bash scripts/real_model.sh`, "
                "or give the URL of an OpenAI-compatible server"
            )
        self.engine.start(str(model or "").strip() or None, str(adapter or "").strip() or None)
        while True:
            st = self.engine.status()
            if st["state"] == "running":
                yield st["base_url"], (st.get("adapter") or {}).get("name") or st["model"], render_engine(st)
                return
            if st["state"] in ("failed", "stopped", "idle"):
                # written into the status line, which keeps it (a toast goes away; it once froze at "Starting…")
                msg = render_engine(st) or "The engine did not start."
                gr.Warning(msg.replace("**", ""))
                yield gr.skip(), gr.skip(), msg
                return
            yield gr.skip(), gr.skip(), render_engine(st)
            time.sleep(1.0)

    def real_model_visible(self, policy: str) -> Any:
        """The real-model settings are shown only while a policy that uses them is chosen."""
        return gr.Group(visible=(policy or "") in REAL_MODEL_POLICIES)

    def clear_live(self) -> str:
        """An empty live panel (a new episode)."""
        return ""

    def clear_after_reset(self) -> tuple[str, str]:
        """An empty live panel and an empty "Saved to ..." line: a new episode is not saved yet."""
        return "", ""

    def _check_policy(self, policy: str) -> str:
        name = (policy or "").strip()
        if name not in self.policies:
            raise PlayError(f"unknown policy {policy!r}; choose one of: {', '.join(self.policies)}")
        return name

    # ------------------------------------------------------------------ layout
    def build(self) -> dict[str, Any]:
        """Create the tab's components inside the current ``gr.Blocks`` and wire the events.

        Returns:
            The components by name (tests and other tabs use them).
        """
        cfg = self.ctx.base_config
        src_choices = source_choices(cfg)
        base_sources = [spec.name for spec in cfg.sources]
        tok_choices = list(dict.fromkeys([cfg.tokenizer_name, *TOKENIZER_CHOICES]))
        c: dict[str, Any] = {}
        c["state"] = gr.State(
            None, time_to_live=6 * 3600, delete_callback=lambda s: s.close() if s is not None else None
        )
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=280, elem_classes=["ree-sidebar"]):
                gr.Markdown("#### Episode settings")
                c["sources"] = gr.CheckboxGroup(
                    src_choices,
                    value=base_sources,
                    label="Question sources",
                    info="Offline, metamathqa / numina_tir serve builtin stand-ins; gsm8k / math500 "
                    "need a data folder.",
                    elem_id="ree-sources",
                )
                with gr.Accordion("Your own questions (a JSONL or CSV file)", open=False, elem_id="ree-own"):
                    c["own_file"] = gr.Textbox(
                        "",
                        label="Question file",
                        placeholder="e.g. ~/data/my_questions.csv",
                        info="Played besides the ticked sources (untick them to play only this file).",
                        elem_id="ree-own-file",
                    )
                    with gr.Row():
                        c["prompt_field"] = gr.Textbox(
                            "question", label="Question column", min_width=100, elem_id="ree-own-prompt"
                        )
                        c["answer_field"] = gr.Textbox(
                            "answer", label="Answer column", min_width=100, elem_id="ree-own-answer"
                        )
                    c["answer_extraction"] = gr.Dropdown(
                        [(ANSWER_EXTRACTION_LABELS[k], k) for k in ANSWER_EXTRACTION_LABELS],
                        value="auto",
                        label="Gold answer",
                        info="How to read the gold from the answer column.",
                    )
                c["budget_mode"] = gr.Radio(
                    [(BUDGET_MODE_LABELS[m], m) for m in BUDGET_MODES], value="tokenizer_native", label="Budget"
                )
                with gr.Row():
                    c["budget_ratio"] = gr.Number(
                        cfg.budget_ratio, label="Budget ratio", minimum=0.01, step=0.5, min_width=100
                    )
                    c["total_budget"] = gr.Textbox(
                        "", label="Explicit budget (tokens)", placeholder="e.g. 2000", min_width=100
                    )
                c["tokenizer"] = gr.Dropdown(
                    tok_choices,
                    value=cfg.tokenizer_name,
                    allow_custom_value=True,
                    label="Tokenizer",
                    info="Counts the tokens; Qwen names work offline (embedded).",
                )
                with gr.Row():
                    c["seed"] = gr.Textbox("", label="Seed", placeholder="blank = random", min_width=100)
                    c["num_questions"] = gr.Number(
                        cfg.num_questions, label="Questions", precision=0, minimum=1, maximum=100, min_width=100
                    )
                c["hard_cap"] = gr.Checkbox(cfg.hard_cap_mode, label="Hard cap (clip spend, stop when dry)")
                c["data_dir"] = gr.Textbox(
                    cfg.data_dir or "",
                    label=DATA_FOLDER_LABEL,
                    placeholder="e.g. ../shared/data",
                    info="Local dataset files; offline, gsm8k / math500 need it.",
                    elem_id="ree-data-dir",
                )
                c["reset_btn"] = gr.Button("Reset: new episode", variant="primary", elem_id="ree-reset")
                c["info"] = gr.Markdown("", elem_classes=["ree-info"])
            with gr.Column(scale=4, min_width=520):
                c["gauges"] = gr.HTML(render_gauges(None), elem_id="ree-gauges")
                # the answer (typed, or a model's as it is written) beside the spend: at 1440x1000 the answer box,
                # the live line and the spend chart are on screen together; narrower, the charts wrap below
                with gr.Row(equal_height=False, elem_id="ree-play-body"):
                    with gr.Column(scale=3, min_width=420, elem_id="ree-play-answer"):
                        self._build_answering(c)
                    with gr.Column(scale=2, min_width=340, elem_id="ree-play-spend"):
                        self._build_spend(c)
        with gr.Accordion("Steps so far", open=True):
            c["history"] = gr.Dataframe(
                history_frame(None), interactive=False, wrap=True, elem_id="ree-history", max_height=360
            )
        with gr.Accordion("The prompt an LLM policy sees for this question", open=False):
            c["prompt"] = gr.Code("", language=None, lines=8, interactive=False)
        with gr.Row(equal_height=True):
            c["download"] = gr.DownloadButton(
                "Download episode (JSON)", value=None, interactive=False, scale=1, elem_id="ree-download"
            )
            c["runs_root"] = gr.Textbox(self.ctx.runs_root, label="Runs folder", scale=2)
            c["save_btn"] = gr.Button("Save as run", scale=1, elem_id="ree-save")
        c["save_status"] = gr.Markdown("", elem_id="ree-save-status")

        state = c["state"]
        view = [c[name] for name in VIEW]
        reset_inputs = [
            state,
            c["sources"],
            c["budget_mode"],
            c["budget_ratio"],
            c["total_budget"],
            c["tokenizer"],
            c["seed"],
            c["hard_cap"],
            c["num_questions"],
            c["data_dir"],
            c["own_file"],
            c["prompt_field"],
            c["answer_field"],
            c["answer_extraction"],
        ]
        on = marks_on(c["status"])  # busy and error marks on the status line only
        first, rest = [c[name] for name in VIEW_FIRST], [c[name] for name in VIEW_REST]
        page = {"api_visibility": "private", **on}
        # (queue=False would save tens of ms per step, but Gradio 6.31's page then shows no message
        # for a refused action: keep the queue.)
        second_pass = {"api_visibility": "private", "show_progress": "hidden"}
        c["reset_btn"].click(self.reset, reset_inputs, [state, *view], api_name="reset", **on).success(
            self.clear_after_reset,
            None,
            [c["live"], c["save_status"]],
            api_visibility="private",
            show_progress="hidden",
        )
        # in the page a step is drawn in two passes (see VIEW_FIRST); the API endpoints return the whole view
        gr.on(
            [c["answer_btn"].click, c["response"].submit],
            self.answer_first,
            [state, c["response"]],
            [state, *first, c["response"]],
            **page,
        ).success(self.view_rest, [state], rest, **second_pass)
        gr.on([], self.answer, [state, c["response"]], [state, *view, c["response"]], api_name="answer")
        llm_inputs = [c["llm_url"], c["llm_model"]]
        # in the page a policy's answer streams into the live panel (a model's), then the step is drawn
        step = c["policy_btn"].click(
            self.policy_stream, [state, c["policy"], *llm_inputs], [state, *first, c["live"]], **page
        )
        step.success(self.view_rest, [state], rest, **second_pass)
        gr.on([], self.policy_step, [state, c["policy"]], [state, *view], api_name="policy_step")
        run = c["run_btn"].click(self.run_stream, [state, c["policy"], *llm_inputs], [state, *view, c["live"]], **page)
        gr.on([], self.run_to_end, [state, c["policy"]], [state, *view], api_name="run_to_end")
        c["stop_btn"].click(None, None, None, cancels=[run, step], api_visibility="private")
        c["policy"].change(self.real_model_visible, [c["policy"]], [c["real_model"]], api_visibility="private")
        c["engine_btn"].click(
            self.start_engine,
            [*llm_inputs, c["llm_adapter"]],
            [*llm_inputs, c["engine_status"]],
            api_visibility="private",
            **on,
        )
        c["save_event"] = c["save_btn"].click(
            self.save_run, [state, c["runs_root"]], [c["save_status"]], api_name="save_run"
        )
        return c

    def _build_answering(self, c: dict[str, Any]) -> None:
        """The answering column: the question, the two ways to answer it (a policy, or typed), the status line, the
        verdict with its reward components, and the response's tokens. Components into ``c``."""
        c["question"] = gr.Markdown(render_question(None), elem_id="ree-question", latex_delimiters=LATEX_BASE)
        with gr.Tabs():
            with gr.Tab("Let a policy answer"):
                c["policy"] = gr.Dropdown(
                    [(POLICY_LABELS.get(p, p), p) for p in self.policies],
                    value="sim_greedy",
                    label="Policy",
                    elem_id="ree-policy",
                    info=f"sim_* and oracle follow the {self.ctx.curves.provenance}; llm_local is a real "
                    "model (its server below)",
                )
                with gr.Row(equal_height=True):
                    c["policy_btn"] = gr.Button("Answer this one", scale=2, min_width=120, elem_id="ree-policy-step")
                    c["run_btn"] = gr.Button(
                        "Run to the end", variant="primary", scale=2, min_width=120, elem_id="ree-run"
                    )
                    c["stop_btn"] = gr.Button("Stop", variant="stop", scale=1, min_width=70)
                url_default, model_default = local_model_defaults(self.ctx.environ)
                with gr.Group(visible=False, elem_id="ree-real-model") as c["real_model"]:
                    with gr.Row(equal_height=True):
                        c["llm_url"] = gr.Textbox(
                            url_default,
                            label="Model server (OpenAI-compatible /v1 URL)",
                            scale=3,
                            min_width=200,
                            elem_id="ree-llm-url",
                        )
                        c["llm_model"] = gr.Textbox(
                            model_default, label="Model", scale=2, min_width=140, elem_id="ree-llm-model"
                        )
                    with gr.Row(equal_height=True, visible=self.engine.available()):
                        c["llm_adapter"] = gr.Textbox(
                            "",
                            label="LoRA adapter folder (optional)",
                            placeholder="e.g. runs/grpo-cpu/final",
                            info="A trained adapter of this model, served beside it by the local engine "
                            "as Model 'trained'",
                            scale=3,
                            min_width=200,
                            visible=self.engine.available(),
                            elem_id="ree-llm-adapter",
                        )
                        c["engine_btn"] = gr.Button(
                            "Start local vLLM engine",
                            scale=2,
                            min_width=140,
                            visible=self.engine.available(),
                            elem_id="ree-engine-start",
                        )
                    c["engine_status"] = gr.Markdown(
                        "A real model answers through this server, streamed as it writes. "
                        + (
                            "No server yet? **Start local vLLM engine** serves the model named here "
                            "on this machine's CPU (about a minute)."
                            if self.engine.available()
                            else "Start one with `python -m reasoning_env.model_server --port 8001` "
                            "(after `bash scripts/real_model.sh`), or give any OpenAI-compatible URL."
                        ),
                        elem_id="ree-engine-status",
                    )
            with gr.Tab("Answer it yourself"):
                c["response"] = gr.Textbox(
                    label="Your response (reasoning, then \\boxed{answer})",
                    lines=4,
                    placeholder="Let me think... so the answer is \\boxed{42}",
                    elem_id="ree-response",
                )
                c["answer_btn"] = gr.Button("Submit answer", variant="primary", elem_id="ree-answer")
        # the one place a Play action shows it is busy or was refused (the message itself is a toast),
        # so a refused action leaves every panel as it was
        c["status"] = status_line("ree-status")
        with gr.Row(equal_height=False):
            with gr.Column(scale=3, min_width=300):
                c["verdict"] = gr.Markdown(render_verdict(None), elem_id="ree-verdict")
            with gr.Column(scale=2, min_width=200):
                c["components"] = gr.Markdown("", elem_id="ree-components")
        c["tokens"] = gr.HighlightedText(
            value=[],
            label="Response tokens",
            color_map=TOKEN_COLORS,
            show_legend=False,
            show_inline_category=False,
            combine_adjacent=False,
            elem_id="ree-tokens",
        )

    def _build_spend(self, c: dict[str, Any]) -> None:
        """The spend column: the cumulative spend chart, under it a model's answer as it is written (its text, and the
        live line of tokens against the turn cap and the budget), then the tokens-per-question and reward charts.
        Components into ``c``."""
        c["spend_plot"] = gr.Plot(label="Cumulative spend", elem_id="ree-spend-plot", show_label=False)
        c["live"] = gr.HTML("", elem_id="ree-live")
        c["type_plot"] = gr.Plot(label="Tokens per question", elem_id="ree-type-plot", show_label=False)
        c["reward_plot"] = gr.Plot(label="Reward per step", elem_id="ree-reward-plot", show_label=False)
