"""Evaluation: policies played on seeded episodes, written as run folders.

- :mod:`~workbench.evaluation.episodes`: one episode of one policy (seeds, the policy's episode
  info, the step loop and its rows);
- :mod:`~workbench.evaluation.runner`: every policy over the episodes, seeds and sweep conditions
  (:func:`evaluate`);
- :mod:`~workbench.evaluation.writer`: the run folder (summary with intervals, paired
  comparisons, provenance, report);
- :mod:`~workbench.evaluation.extras`: budget-mode mapping and the expected-correctness / oracle /
  regret columns, shared with Play.

The command line is :mod:`workbench.evaluate`.
"""

from workbench.evaluation.episodes import EpisodeResult, episode_seed, make_episode_info, run_episode
from workbench.evaluation.runner import EvalResult, evaluate

__all__ = ["EpisodeResult", "EvalResult", "episode_seed", "evaluate", "make_episode_info", "run_episode"]
