"""Reasoning Economics Workbench: evaluation, analysis, plots and the Gradio app, built on
:mod:`reasoning_env`."""
