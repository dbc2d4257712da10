"""The Gradio workbench: Play, Reward lab and Runs tabs over the ``reasoning_env`` and
``workbench`` libraries (no logic lives only here).

- :func:`build_workbench` builds the ``gr.Blocks`` (one module per tab: :mod:`.play_tab`,
  :mod:`.lab_tab`, :mod:`.runs_tab`; shared context and error handling in :mod:`.common`).
- :func:`workbench.app.server.create_app` mounts it at ``/`` on the OpenEnv server's FastAPI app
  (``/reset``, ``/step``, ``/ws``, ``/health``... served by the same process);
  ``python app.py`` runs that (the Hugging Face Space entry point).
"""

from __future__ import annotations

from typing import Any

__all__ = ["CSS", "THEME", "build_workbench"]

#: Page styles (passed to ``launch`` / ``mount_gradio_app``: Gradio 6 takes them there).
CSS = """
.gradio-container {max-width: 1480px !important; margin: auto;}
#ree-title h1 {margin-bottom: 0;}
#ree-title p {margin-top: 2px; color: var(--body-text-color-subdued);}
.ree-sidebar {background: var(--background-fill-secondary); border-radius: 12px; padding: 6px 10px !important;}
#ree-question blockquote {font-size: 15.5px; line-height: 1.5; border-left: 4px solid #4c78a8;
  margin: 6px 0; padding: 4px 12px;}
#ree-tokens {max-height: 260px; overflow-y: auto;}
#ree-verdict table, #ree-components table {font-size: 14px;}
#ree-verdict th, #ree-components th {white-space: nowrap; word-break: keep-all; overflow-wrap: normal;}
.ree-info {font-size: 13px;}
.ree-status {min-height: 30px;}
/* Play: the answering column beside the spend column (spend chart, a model's answer as it is written, two more
   charts). Where they do not fit side by side (a viewport under about 1,140 px) the spend column wraps below the
   answering one, and the answer being written leads it. */
@media (max-width: 1150px) {
  #ree-play-spend > #ree-live {order: -1;}
}
"""

#: The theme name (a built-in Gradio theme).
THEME = "soft"


def build_workbench(ctx: Any = None, *, title: str = "Reasoning Economics Workbench") -> Any:
    """The workbench as a ``gr.Blocks`` (not launched).

    Args:
        ctx: A :class:`workbench.app.common.AppContext` (default: project defaults, runs under
            ``runs/``, nothing preloaded).
        title: Browser tab title.

    Returns:
        The Blocks, with ``demo.workbench`` holding the tab objects and their components (for tests).
    """
    import gradio as gr

    from workbench.app.common import AppContext, marks_on
    from workbench.app.lab_tab import LabTab
    from workbench.app.play_tab import PlayTab
    from workbench.app.runs_tab import RunsTab

    ctx = ctx or AppContext()
    play, lab, runs = PlayTab(ctx), LabTab(ctx), RunsTab(ctx)
    # delete_cache: every hour, remove files Gradio cached for downloads more than 6 hours ago
    with gr.Blocks(title=title, analytics_enabled=False, delete_cache=(3600, 6 * 3600)) as demo:
        gr.Markdown(
            "# Reasoning Economics Workbench\n"
            "Mixed math questions under **one shared token budget**: every token of a "
            "reasoning trace is counted with the "
            "policy's tokenizer and charged. Play an episode, tune a reward, compare runs. "
            "The OpenEnv API of the same environment is served beside this page (`/reset`, "
            "`/step`, `/ws`, `/health`; docs at `/docs`).",
            elem_id="ree-title",
        )
        with gr.Tabs():
            with gr.Tab("Play", id="play"):
                play_c = play.build()
            with gr.Tab("Reward lab", id="lab") as lab_tab:
                lab_c = lab.build()
            with gr.Tab("Runs", id="runs") as runs_tab:
                runs_c = runs.build()
        lab.wire_tab(lab_tab, lab_c)
        runs.wire_tab(runs_tab, runs_c)
        runs.wire_load(demo, runs_c)
        # a saved Play episode appears (selected) in the Runs tab and in the reward lab's run picker
        play_c["save_event"].success(
            runs.include_saved,
            [play_c["state"], runs_c["root"], runs_c["runs"]],
            [runs_c["runs"], runs_c["status"]],
            api_visibility="private",
            **marks_on(runs_c["busy"]),
        ).success(
            lab.refresh, [lab_c["runs_root"]], [lab_c["run"]], api_visibility="private", **marks_on(lab_c["status"])
        )
    demo.workbench = {"ctx": ctx, "play": (play, play_c), "lab": (lab, lab_c), "runs": (runs, runs_c)}
    return demo
