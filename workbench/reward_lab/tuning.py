"""Tuning a reward by hand: the library behind the workbench's Reward lab tab and the
``04_reward_shapes`` notebook (part of the reward lab, :mod:`workbench.reward_lab`).

- :func:`controls` lists one control per reward parameter of the registry (default, range and
  step from :func:`reasoning_env.rewards.describe`), plus a weight per reward: what a UI draws as
  sliders and dropdowns.
- :func:`values_to_spec` turns the chosen rewards and the controls' values into a reward spec
  (one reward, or a ``combined`` weighted sum); :func:`spec_to_values` goes back (to load a run's
  reward into the controls).
- :func:`rescore_table` re-scores a run under the tuned spec and compares it with the recorded
  rewards per policy (:class:`workbench.reward_lab.Rescorer`: milliseconds per call).
- :func:`induced` computes the allocation a reward-maximising policy would choose by difficulty
  (:func:`workbench.reward_lab.induced_behaviour`).
- :func:`tuned_config` / :func:`tuned_yaml` write the tuned spec into an
  :class:`~reasoning_env.config.EnvConfig` (its ``reward`` field): YAML that the environment,
  ``python -m workbench.evaluate --config`` and training's ``--config`` accept.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from reasoning_env.config import ConfigError, EnvConfig
from reasoning_env.rewards import available, build_reward, describe, normalise_spec

__all__ = [
    "Control",
    "DEFAULT_BUDGETS",
    "LabRun",
    "WEIGHT",
    "controls",
    "induced",
    "parse_budgets",
    "recorded_spec",
    "rescore_table",
    "reward_names",
    "spec_label",
    "spec_to_values",
    "tuned_config",
    "tuned_yaml",
    "values_to_spec",
]

#: Pseudo-parameter name of a reward's weight in :func:`controls`.
WEIGHT = "weight"
#: Episode budgets (tokens, 10 questions) of the induced-allocation view by default.
DEFAULT_BUDGETS = (1000, 2500, 5000)


@dataclass(frozen=True)
class Control:
    """One UI control: a reward's parameter (or its weight).

    Attributes:
        reward: Registry name. param: Parameter name, or :data:`WEIGHT`.
        kind: ``"float"``, ``"int"`` or ``"choice"``.
        default: Default value. minimum, maximum, step: Slider range (``None`` for choices).
        choices: Values of a choice. label: Short label. info: One-line description (with unit).
    """

    reward: str
    param: str
    kind: str
    default: float | int | str
    minimum: float | None
    maximum: float | None
    step: float | None
    choices: tuple[str, ...] | None
    label: str
    info: str

    @property
    def key(self) -> str:
        """``"<reward>.<param>"``."""
        return f"{self.reward}.{self.param}"


def reward_names(*, include_group: bool = True) -> list[str]:
    """Registered rewards that can be tuned here (``combined`` is built from several), registry
    order; group rewards (they compare GRPO rollouts) only with ``include_group``."""
    meta = describe()
    return [n for n in available() if n != "combined" and (include_group or meta[n]["scope"] != "group")]


def controls() -> list[Control]:
    """Every tunable control, grouped by reward (registry order): the reward's weight (0..3,
    default 1), then its parameters with the registry's default, range and step.

    Slider ranges are widened to include the default when the registry's range does not.
    """
    out: list[Control] = []
    meta = describe()
    for name in reward_names():
        out.append(
            Control(
                name, WEIGHT, "float", 1.0, 0.0, 3.0, 0.05, None, "weight", "multiplies every component of this reward"
            )
        )
        for p in meta[name]["params"]:
            unit = f" [{p['unit']}]" if p.get("unit") else ""
            if p["kind"] == "choice":
                out.append(
                    Control(
                        name,
                        p["name"],
                        "choice",
                        p["default"],
                        None,
                        None,
                        None,
                        tuple(p["choices"] or ()),
                        p["name"],
                        p["description"] + unit,
                    )
                )
                continue
            lo = p["min"] if p["min"] is not None else min(0.0, float(p["default"]))
            hi = p["max"] if p["max"] is not None else max(1.0, 2.0 * abs(float(p["default"])))
            lo, hi = min(lo, p["default"]), max(hi, p["default"])
            step = p["step"] if p["step"] is not None else (1 if p["kind"] == "int" else (hi - lo) / 100.0)
            out.append(
                Control(
                    name, p["name"], p["kind"], p["default"], lo, hi, step, None, p["name"], p["description"] + unit
                )
            )
    return out


def _coerce(c: Control, value: Any) -> Any:
    if c.kind == "choice":
        return c.default if value is None or value == "" else str(value)
    if value is None or (isinstance(value, str) and not value.strip()):
        return c.default
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{c.key} must be a number, got {value!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"{c.key} must be a finite number, got {value!r}")
    if c.kind == "int":
        return int(round(v))
    return v


def values_to_spec(selected: Sequence[str], values: Sequence[Any] | Mapping[str, Any]) -> dict[str, Any]:
    """The reward spec of the chosen rewards with the controls' values.

    Args:
        selected: Registry names (in order); one gives a single-reward spec, several a
            ``combined`` weighted sum (labels = the names).
        values: One value per :func:`controls` entry (same order), or ``{"<reward>.<param>": value}``;
            missing values take the defaults.

    Returns:
        The normalised spec (every parameter filled in).

    Raises:
        ValueError: nothing selected, an unknown name, or an invalid value (message from the
            registry naming the parameter).
    """
    names = [s for s in dict.fromkeys(selected or []) if s]
    if not names:
        raise ValueError("choose at least one reward shape")
    ctrls = controls()
    known = {c.reward for c in ctrls}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown reward(s) {unknown}; available: {sorted(known)}")
    if isinstance(values, Mapping):
        lookup = dict(values)
    else:
        vals = list(values)
        if len(vals) != len(ctrls):
            raise ValueError(f"expected {len(ctrls)} control values (one per controls() entry), got {len(vals)}")
        lookup = {c.key: v for c, v in zip(ctrls, vals)}
    entries = []
    for name in names:
        weight, params = 1.0, {}
        for c in ctrls:
            if c.reward != name:
                continue
            v = _coerce(c, lookup.get(c.key, c.default))
            if c.param == WEIGHT:
                weight = float(v)
            else:
                params[c.param] = v
        entries.append({"type": name, "weight": weight, "params": params})
    if len(entries) == 1:
        spec = entries[0]
    else:
        spec = {"type": "combined", "rewards": [dict(e, label=e["type"]) for e in entries]}
    return normalise_spec(spec)


def spec_to_values(spec: Any) -> tuple[list[str], dict[str, Any], list[str]]:
    """The controls' state for a spec (e.g. a run's recorded reward).

    Returns:
        ``(selected names, {"<reward>.<param>": value}, notes)``; notes say what the controls
        cannot show (a reward listed twice in a ``combined``: only the first is kept; an outer
        weight other than 1 is folded into each member's weight).

    Raises:
        ValueError: the spec is invalid.
    """
    norm = normalise_spec(spec)
    members = norm["rewards"] if norm["type"] == "combined" else [norm]
    outer = float(norm.get("weight", 1.0)) if norm["type"] == "combined" else 1.0
    selected: list[str] = []
    values: dict[str, Any] = {}
    notes: list[str] = []
    if outer != 1.0:
        notes.append(f"the combined reward's outer weight {outer:g} is folded into each member's weight")
    for m in members:
        if m["type"] in selected:
            notes.append(f"reward {m['type']!r} appears more than once; only its first entry is shown")
            continue
        selected.append(m["type"])
        values[f"{m['type']}.{WEIGHT}"] = float(m.get("weight", 1.0)) * outer
        for k, v in (m.get("params") or {}).items():
            values[f"{m['type']}.{k}"] = v
    return selected, values, notes


def spec_label(spec: Any) -> str:
    """Short name of a spec: its type, or ``a+b+c`` for a combined one."""
    norm = normalise_spec(spec)
    if norm["type"] == "combined":
        return "+".join(m.get("label") or m["type"] for m in norm["rewards"])
    return norm["type"]


def recorded_spec(config: EnvConfig | None) -> dict[str, Any]:
    """The spec of the reward a run was recorded with: its config's ``reward`` (flat seed weights
    filling unset economics parameters), or the default reward with the config's flat weights, or
    the default reward when the run has no config."""
    rw = build_reward(config, context="rescore") if config is not None else build_reward(None, context="rescore")
    return normalise_spec(rw.to_spec())


def parse_budgets(text: str | Sequence[Any] | None, *, lo: int = 10, hi: int = 1_000_000, most: int = 6) -> list[int]:
    """Episode budgets (tokens) from ``"1000, 2500 5000"`` or a list; blank = :data:`DEFAULT_BUDGETS`.

    Raises:
        ValueError: a value is not a whole number within ``[lo, hi]``, no value (only commas), or
            more than ``most`` values.
    """
    if text is None or (isinstance(text, str) and not text.strip()):
        return list(DEFAULT_BUDGETS)
    items = text.replace(",", " ").split() if isinstance(text, str) else list(text)
    out = []
    for item in items:
        try:
            v = float(str(item).replace("_", ""))
        except ValueError:
            raise ValueError(
                f"budgets must be whole numbers of tokens separated by commas, got {str(item)!r}"
            ) from None
        if not np.isfinite(v) or v != int(v) or not lo <= v <= hi:
            raise ValueError(
                f"each budget must be a whole number of tokens between {lo:,} and {hi:,}, got {str(item)!r}"
            )
        out.append(int(v))
    if not out:
        raise ValueError(
            "no budgets given: type whole numbers of tokens separated by commas, e.g. "
            "1000, 2500, 5000 (or leave blank for the defaults)"
        )
    if len(out) > most:
        raise ValueError(f"at most {most} budgets at a time, got {len(out)}")
    return sorted(dict.fromkeys(out))


def rescore_table(
    rescorer: Any, spec: Any, *, recorded: Any = None, group_by: Sequence[str] | None = None
) -> tuple[pd.DataFrame, Any, Any]:
    """Per-policy comparison of a run's recorded rewards with the tuned reward.

    Args:
        rescorer: A :class:`workbench.reward_lab.Rescorer` of the run's trajectories.
        spec: The tuned reward spec.
        recorded: The recorded reward's spec (default: the default reward); re-scored too, so both
            columns come from the same code path.
        group_by: Group columns for group rewards on runs without GRPO groups (e.g.
            ``["episode", "step"]``: policies that played the same seeded episode form a group).

    Returns:
        ``(table, tuned Rescored, recorded Rescored)``; the table has one row per policy:
        ``policy``, ``episodes``, ``accuracy``, ``tokens_per_question``, ``recorded_reward``,
        ``tuned_reward`` (mean per episode), ``change``, ``recorded_rank``, ``tuned_rank`` (1 =
        best), sorted by the tuned reward.

    Raises:
        workbench.reward_lab.RescoreError, ValueError: invalid spec, or a group reward on a run
            without groups and no ``group_by``.
    """
    from workbench.reward_lab import Rescorer

    rs = rescorer
    if group_by is not None:
        rs = Rescorer(rescorer.frame, group_by=group_by)
    tuned = rs.rescore(spec)
    base = rescorer.rescore(recorded)
    by = "policy" if "policy" in base.episodes.columns else None
    a = base.summary(by)
    b = tuned.summary(by)
    key = "policy" if "policy" in a.columns else a.columns[0]
    table = pd.DataFrame(
        {
            "policy": a[key].astype(str),
            "episodes": a["episodes"].astype(int),
            "accuracy": a["accuracy"].astype(float),
            "tokens_per_question": a["tokens_per_question"].astype(float),
            "recorded_reward": a["reward"].astype(float),
        }
    )
    table = table.merge(
        pd.DataFrame({"policy": b[key].astype(str), "tuned_reward": b["reward"].astype(float)}),
        on="policy",
        how="left",
    )
    table["change"] = table["tuned_reward"] - table["recorded_reward"]
    table["recorded_rank"] = table["recorded_reward"].rank(ascending=False, method="min").astype(int)
    table["tuned_rank"] = table["tuned_reward"].rank(ascending=False, method="min").astype(int)
    table = table.sort_values(["tuned_rank", "policy"]).reset_index(drop=True)
    return table, tuned, base


def induced(
    specs: Mapping[str, Any],
    budgets: Sequence[int],
    *,
    hard_cap_mode: bool = True,
    num_questions: int = 10,
    orders: int = 1,
    resolution: int = 64,
    curves: Any = None,
    cache: Any = None,
) -> tuple[Any, list[str]]:
    """The reward-maximising allocation of each spec by difficulty, next to the accuracy oracle
    (:func:`workbench.reward_lab.induced_behaviour` over levels 1..5 cycled; ``curves``: the
    solver curves, default the hand-chosen defaults, whose provenance is the first note).

    Group rewards are left out (they have no single-policy optimum in this model) with a note.
    ``cache``: a :class:`workbench.reward_lab.AllocationCache` reusing the allocations solved before
    (the oracle and an unchanged reward are not solved again when a slider moves).

    Returns:
        ``(InducedResult or None when nothing is left, notes)``.
    """
    from reasoning_env.policies import SolverCurves
    from workbench.reward_lab import default_questions, induced_behaviour

    curves = curves if curves is not None else SolverCurves()
    keep, notes = {}, [f"solver: {curves.provenance}"]
    for label, spec in specs.items():
        rw = build_reward(spec, context="rescore")
        if getattr(rw, "is_group", False):
            notes.append(f"{label}: a group reward has no single-policy optimum; left out of the induced allocation")
            continue
        keep[label] = spec
    if not keep:
        return None, notes
    res = induced_behaviour(
        keep,
        [int(b) for b in budgets],
        questions=default_questions(num_questions),
        orders=orders,
        hard_cap_mode=hard_cap_mode,
        resolution=resolution,
        curves=curves,
        cache=cache,
    )
    for label, ns in res.notes.items():
        notes.extend(f"{label}: {n}" for n in ns)
    return res, notes


def tuned_config(spec: Any, base: EnvConfig | None = None) -> EnvConfig:
    """``base`` (default: the project default config) with its ``reward`` set to ``spec``.

    Raises:
        ValueError: the environment cannot pay this reward (a group reward: the message says to
            use it in training through ``reasoning_env.rewards.trl_reward_function`` instead), or
            the spec is invalid.
    """
    base = base or EnvConfig()
    norm = normalise_spec(spec)
    build_reward(norm, context="env")  # a group reward: a clear ValueError, before the config's
    try:
        return base.replace(reward=norm)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


def tuned_yaml(spec: Any, base: EnvConfig | None = None) -> str:
    """YAML of :func:`tuned_config`, with a comment header saying how to use it.

    Raises:
        ValueError: as :func:`tuned_config`.
    """
    cfg = tuned_config(spec, base)
    head = (
        "# Environment config with a tuned reward (Reasoning Economics Workbench, reward lab).\n"
        "# Use it with: ReasoningEconomicsEnv(EnvConfig.from_yaml(path)),\n"
        "#   python -m workbench.evaluate --config <file>, python -m training.grpo_train --config <file>,\n"
        "#   or the server: REE_CONFIG=<file> python -m reasoning_env.server\n"
    )
    return head + cfg.to_yaml()


@dataclass
class LabRun:
    """A run prepared for re-scoring in the reward lab.

    Attributes:
        label: Display name. rescorer: the run's :class:`workbench.reward_lab.Rescorer`.
        recorded: The spec of the reward it was recorded with. config: its EnvConfig (or ``None``).
        total_budget: Median episode budget (tokens). num_questions: Questions per episode.
        hard_cap_mode: The run's budget mode. has_groups: Whether it has GRPO groups.
        notes: Caveats (truncated responses, missing config...).
    """

    label: str
    rescorer: Any
    recorded: dict
    config: EnvConfig | None
    total_budget: int
    num_questions: int
    hard_cap_mode: bool
    has_groups: bool
    notes: list

    @classmethod
    def from_frame(
        cls, steps: pd.DataFrame, *, label: str, config: EnvConfig | None = None, notes: list | None = None
    ) -> LabRun:
        """Prepare a trajectories frame.

        Raises:
            workbench.reward_lab.RescoreError: the frame lacks the columns re-scoring needs, or has no rows.
        """
        from workbench.reward_lab import RescoreError, Rescorer

        if steps is None or steps.empty:
            raise RescoreError(f"run {label!r} has no trajectories to re-score (a training run with metrics only?)")
        rs = Rescorer(steps)
        budget = int(pd.to_numeric(steps["total_budget"], errors="coerce").median())
        nq = int(pd.to_numeric(steps["num_questions"], errors="coerce").mode().iloc[0])
        hard = (
            bool(steps["hard_cap_mode"].iloc[0])
            if "hard_cap_mode" in steps.columns
            else (config.hard_cap_mode if config else True)
        )
        groups = "group" in steps.columns and steps["group"].notna().any()
        return cls(
            label,
            rs,
            recorded_spec(config),
            config,
            budget,
            nq,
            hard,
            bool(groups),
            list(notes or []) + list(rs.notes),
        )

    @classmethod
    def from_path(cls, path: Any) -> LabRun:
        """Load and prepare a run folder.

        Raises:
            workbench.runs.RunFolderError: not a run folder.
            workbench.reward_lab.RescoreError: nothing to re-score.
        """
        from workbench.runs import load_run

        run = load_run(path)
        return cls.from_frame(run.steps, label=run.name, config=run.config, notes=run.notes)

    @classmethod
    def synthetic(cls, n_steps: int = 2000, *, seed: int = 0) -> LabRun:
        """A synthetic demo run (:func:`workbench.reward_lab.synthetic.synthetic_steps`: the default reward,
        budget 4,000 tokens for 10 questions, GRPO groups of 4, with response texts) for trying the
        lab before any run exists."""
        from workbench.reward_lab.synthetic import synthetic_steps

        frame = synthetic_steps(n_steps, group_size=4, with_text=True, seed=seed)
        return cls.from_frame(
            frame,
            label="synthetic demo run",
            notes=["synthetic run: lengths and verdicts drawn from the default accuracy curve"],
        )

    def describe(self) -> str:
        """One Markdown line: steps, episodes, policies, budget, recorded reward."""
        frame = self.rescorer.frame
        pols = frame["policy"].nunique() if "policy" in frame.columns else 1
        mode = "hard cap" if self.hard_cap_mode else "soft budget"
        groups = ", GRPO groups" if self.has_groups else ""
        return (
            f"**{self.label}**: {len(frame):,} steps, {self.rescorer.n_episodes:,} episodes, {pols} "
            f"polic{'y' if pols == 1 else 'ies'}, budget ~{self.total_budget:,} tokens for "
            f"{self.num_questions} questions ({mode}{groups}); "
            f"recorded with `{spec_label(self.recorded)}`."
        )

    def rescore(self, spec: Any) -> tuple[pd.DataFrame, Any, Any, list]:
        """:func:`rescore_table` of ``spec`` against the recorded reward; group rewards on a run
        without groups compare the policies that played the same episode (``group_by=["episode",
        "step"]``), with a note.

        Returns:
            ``(table, tuned Rescored, recorded Rescored, notes)``.
        """
        notes = []
        group_by = None
        if getattr(build_reward(spec, context="rescore"), "is_group", False) and not self.has_groups:
            group_by = ["episode", "step"]
            notes.append(
                "group reward on a run without GRPO groups: the policies that played the same episode form each group"
            )
        table, tuned, base = rescore_table(self.rescorer, spec, recorded=self.recorded, group_by=group_by)
        notes.extend(n for n in tuned.notes if n not in notes)
        return table, tuned, base, notes
