"""Weighted composition of rewards and the spec language (dict / YAML) that builds them.

A spec names a registered reward, Atropos-style::

    type: l1_max                 # registry name (reasoning_env.rewards.available())
    weight: 1.0                  # optional, default 1.0; multiplies every component
    params: {alpha: 0.0003, delta: 0.5}   # optional; omitted params take their defaults

or a weighted sum of several::

    type: combined
    rewards:
      - {type: accuracy}
      - {type: dapo_overlong, weight: 0.5, params: {l_max: 2048, l_cache: 512}}
      - {type: l1_exact, label: l1, params: {alpha: 0.0003}}

Parameters may also be written inline (``{type: l1_max, alpha: 0.0005}``); the legacy forms
``{name: economics, params: {...}}`` and ``{params: {...}}`` are read as ``type: economics``.

Component names: a single reward reports its own component names (``reference``, the seed, keeps
``correctness``, ``efficiency_bonus``, ``cost_penalty``, ``overspend_penalty``, ``episode_bonus``; the default
``economics`` adds ``forfeit`` on the final step).
In a ``combined`` reward of two or more entries, a one-component reward reports under its label
(default: its type) and a multi-component one under ``<label>.<component>``; labels must be
unique.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from reasoning_env.errors import RewardSpecError
from reasoning_env.renamed import rename_keys
from reasoning_env.rewards.base import EpisodeContext, StepContext
from reasoning_env.rewards.batch import EpisodeBatch, GroupRewardError, RewardShape, StepBatch, group_error_message
from reasoning_env.rewards.registry import REWARDS, RewardInfo, reward_class

SPEC_KEYS = ("type", "weight", "label", "params", "rewards")
#: Contexts a reward may be validated for. Only ``"env"`` forbids group rewards.
CONTEXTS = ("env", "training", "rescore")

COMBINED_INFO = RewardInfo(
    name="combined",
    summary="Weighted sum of other rewards (components reported by label).",
    formula="sum_k weight_k * reward_k (each component of reward_k scaled by weight_k)",
    source="Composition as in Atropos' reward registry (type/weight/params, 'combined')",
    scope="step+episode",
    components=(),
    params=(),
)


@dataclass(frozen=True)
class Entry:
    """One weighted member of a :class:`CombinedReward`."""

    reward: RewardShape
    weight: float = 1.0
    label: str = ""


@dataclass(frozen=True)
class CombinedReward:
    """A weighted sum of rewards; implements the :class:`~reasoning_env.rewards.base.EnvReward`
    protocol and the vectorised batch API. See the module docstring for component names."""

    entries: tuple[Entry, ...]

    def __post_init__(self) -> None:
        if not self.entries:
            raise RewardSpecError("a combined reward needs at least one reward")
        labels = [e.label for e in self.entries]
        if len(set(labels)) != len(labels):
            dup = sorted({x for x in labels if labels.count(x) > 1})
            raise RewardSpecError(
                f"combined reward labels must be unique, {dup} repeat: give each entry a distinct 'label'"
            )

    # ------------------------------------------------------------------ naming
    def _keys(self, e: Entry, names: tuple[str, ...]) -> dict[str, str]:
        if len(self.entries) == 1:
            return {n: n for n in names}
        if len(names) == 1:
            return {names[0]: e.label}
        return {n: f"{e.label}.{n}" for n in names}

    @property
    def component_names(self) -> tuple[str, ...]:
        """Reported component names, in order."""
        out: list[str] = []
        for e in self.entries:
            out.extend(self._keys(e, e.reward.component_names).values())
        return tuple(out)

    @property
    def info(self) -> RewardInfo:
        """Metadata of this composition."""
        scope = "group" if self.is_group else "step+episode"
        return RewardInfo(
            name="combined",
            summary=COMBINED_INFO.summary,
            formula=COMBINED_INFO.formula,
            source=COMBINED_INFO.source,
            scope=scope,
            components=self.component_names,
            needs_text=self.needs_text,
        )

    @property
    def is_group(self) -> bool:
        """True if any member needs whole GRPO groups."""
        return any(e.reward.is_group for e in self.entries)

    @property
    def needs_text(self) -> bool:
        """True if any member reads response texts."""
        return any(e.reward.needs_text for e in self.entries)

    # ------------------------------------------------------------------ vectorised API
    def step_batch(self, batch: StepBatch) -> dict[str, np.ndarray]:
        """Weighted, relabelled step components of every member."""
        out: dict[str, np.ndarray] = {}
        for e in self.entries:
            comps = e.reward.step_batch(batch)
            keys = self._keys(e, e.reward.component_names)
            for name, v in comps.items():
                out[keys.get(name, f"{e.label}.{name}")] = e.weight * v
        return out

    def episode_batch(self, batch: EpisodeBatch) -> dict[str, np.ndarray]:
        """Weighted, relabelled episode components of every member."""
        out: dict[str, np.ndarray] = {}
        for e in self.entries:
            comps = e.reward.episode_batch(batch)
            keys = self._keys(e, e.reward.component_names)
            for name, v in comps.items():
                out[keys.get(name, f"{e.label}.{name}")] = e.weight * v
        return out

    # ------------------------------------------------------------------ environment API
    def step_components(self, ctx: StepContext) -> dict[str, float]:
        """Components of one step. Raises :class:`GroupRewardError` if a member is a group reward."""
        for e in self.entries:
            if e.reward.is_group:
                raise GroupRewardError(group_error_message(e.reward.info.name))
        return {k: float(v[0]) for k, v in self.step_batch(StepBatch.from_contexts([ctx])).items()}

    def episode_components(self, ctx: EpisodeContext) -> dict[str, float]:
        """Episode components of one finished episode."""
        return {k: float(v[0]) for k, v in self.episode_batch(EpisodeBatch.from_contexts([ctx])).items()}

    def to_spec(self) -> dict[str, Any]:
        """The spec that rebuilds this reward."""
        if len(self.entries) == 1:
            e = self.entries[0]
            spec = e.reward.to_spec()
            spec["weight"] = e.weight
            return spec
        return {
            "type": "combined",
            "weight": 1.0,
            "rewards": [dict(e.reward.to_spec(), weight=e.weight, label=e.label) for e in self.entries],
        }


AnyReward = RewardShape | CombinedReward


# ---------------------------------------------------------------------- specs
def load_spec(source: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    """Read a spec: a mapping (copied), a registry name, a path to a YAML file, or YAML text.

    A YAML document with a top-level ``reward:`` key (e.g. an EnvConfig file) yields that value.

    Raises:
        RewardSpecError: not YAML, or not a mapping / name.
    """
    if isinstance(source, Mapping):
        return dict(source)
    if isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and source.strip().endswith((".yaml", ".yml"))
    ):
        p = Path(source)
        if not p.is_file():
            raise RewardSpecError(f"reward spec file {str(p)!r} does not exist")
        text = p.read_text(encoding="utf-8")
    elif isinstance(source, str):
        name = source.strip()
        if name in REWARDS:
            return {"type": name}
        text = source
    else:
        raise RewardSpecError(
            f"a reward spec must be a mapping, a registry name, a YAML file or YAML text, got {type(source).__name__}"
        )
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RewardSpecError(f"reward spec is not valid YAML: {exc}") from None
    if isinstance(data, str):
        return {"type": data}
    if not isinstance(data, dict):
        raise RewardSpecError(f"a reward spec must be a mapping with a 'type', got {type(data).__name__}")
    if "reward" in data and isinstance(data["reward"], (dict, str)) and "type" not in data and "name" not in data:
        return load_spec(data["reward"]) if isinstance(data["reward"], str) else dict(data["reward"])
    return data


def _weight(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise RewardSpecError(f"{where}: weight must be a finite number, got {value!r}")
    return float(value)


def normalise_spec(spec: Any, *, _nested: bool = False, _where: str = "reward") -> dict[str, Any]:
    """The canonical form of a spec: ``{"type", "weight", "params"}`` with every parameter filled
    in (defaults included), or ``{"type": "combined", "weight", "rewards": [...]}`` whose entries
    also carry their ``label``. Normalising twice gives the same dict (YAML round trip).

    Raises:
        RewardSpecError: unknown type or key, bad parameter name/value, nested combined, duplicate labels.
    """
    if isinstance(spec, str):
        spec = {"type": spec}
    if not isinstance(spec, Mapping):
        raise RewardSpecError(
            f"{_where} must be a mapping with a 'type' (or a registry name), got {type(spec).__name__}"
        )
    spec = rename_keys(spec, where=_where, error=RewardSpecError)  # inline parameters under an old name
    if "type" not in spec and "name" in spec:  # legacy {name: economics, params: ...}
        spec["type"] = spec.pop("name")
    if "type" not in spec and not _nested and set(spec) <= {"params", "weight"}:
        spec["type"] = "economics"  # legacy: a bare {params: ...} configures the economics family's default
    rtype = spec.get("type")
    if not isinstance(rtype, str) or not rtype:
        raise RewardSpecError(
            f"{_where} needs a 'type' naming a registered reward; available: {', '.join(REWARDS.names())}"
        )
    weight = _weight(spec.get("weight", 1.0), _where)
    label = spec.get("label")
    if label is not None and (not isinstance(label, str) or not label.strip() or "." in label):
        raise RewardSpecError(f"{_where}: label must be a non-empty string without '.', got {label!r}")

    if rtype == "combined":
        if _nested:
            raise RewardSpecError(
                f"{_where}: combined rewards cannot be nested; list every reward in one 'rewards' list"
            )
        params = spec.get("params") or {}
        if not isinstance(params, Mapping):
            raise RewardSpecError(f"{_where}: params must be a mapping, got {type(params).__name__}")
        extra = set(spec) - {"type", "weight", "label", "params", "rewards"} | (set(params) - {"rewards"})
        if extra:
            raise RewardSpecError(
                f"{_where}: unknown key(s) {sorted(extra)} for 'combined'; it takes 'rewards' "
                "(a list of specs) and 'weight'"
            )
        members = spec.get("rewards", params.get("rewards"))
        if not isinstance(members, (list, tuple)) or not members:
            raise RewardSpecError(f"{_where}: 'combined' needs a non-empty 'rewards' list of reward specs")
        entries = []
        for i, m in enumerate(members):
            e = normalise_spec(m, _nested=True, _where=f"{_where}.rewards[{i}]")
            e["label"] = e.get("label") or e["type"]
            entries.append(e)
        labels = [e["label"] for e in entries]
        if len(set(labels)) != len(labels):
            dup = sorted({x for x in labels if labels.count(x) > 1})
            raise RewardSpecError(f"{_where}: labels {dup} repeat; give each entry of 'rewards' a distinct 'label'")
        out = {"type": "combined", "weight": weight, "rewards": entries}
        if label is not None:
            out["label"] = label
        return out

    cls = reward_class(rtype)
    info: RewardInfo = cls.info
    names = {p.name for p in info.params}
    params = spec.get("params") or {}
    if not isinstance(params, Mapping):
        raise RewardSpecError(f"{_where}: params must be a mapping, got {type(params).__name__}")
    params = rename_keys(params, where=f"{_where}.params", error=RewardSpecError)
    for key in list(spec):
        if key in SPEC_KEYS:
            continue
        if key in names:
            if key in params:
                raise RewardSpecError(f"{_where}: parameter {key!r} given both inline and in params")
            params[key] = spec[key]
        else:
            raise RewardSpecError(
                f"{_where}: unknown key {key!r} for reward {rtype!r}; keys: {list(SPEC_KEYS)}, params: {sorted(names)}"
            )
    if "rewards" in spec:
        raise RewardSpecError(f"{_where}: 'rewards' belongs to type 'combined', not {rtype!r}")
    unknown = set(params) - names
    if unknown:
        raise RewardSpecError(
            f"{_where}: unknown parameter(s) {sorted(unknown)} for reward {rtype!r}; its "
            f"parameters: {sorted(names) or 'none'}"
        )
    full = {p.name: p.check(params.get(p.name, p.default), rtype) for p in info.params}
    out = {"type": rtype, "weight": weight, "params": full}
    if label is not None:
        out["label"] = label
    return out


#: The old spelling of :func:`normalise_spec` (kept importable).
normalize_spec = normalise_spec


def from_spec(spec: Any, *, defaults: Mapping[str, Mapping[str, Any]] | None = None) -> AnyReward:
    """Build the reward a spec describes (see :func:`normalise_spec`).

    Args:
        spec: Spec dict, registry name, YAML text or path.
        defaults: ``{type: {param: value}}`` used for parameters the spec leaves out (e.g. the
            flat seed weights of an :class:`~reasoning_env.config.EnvConfig`).

    Returns:
        The bare registered reward for a single spec of weight 1, else a :class:`CombinedReward`.
    """
    raw = load_spec(spec) if not isinstance(spec, Mapping) else dict(spec)
    if defaults:
        raw = _inject_defaults(raw, defaults)
    norm = normalise_spec(raw)
    if norm["type"] == "combined":
        entries = tuple(
            Entry(reward_class(e["type"])(**e["params"]), weight=e["weight"] * norm["weight"], label=e["label"])
            for e in norm["rewards"]
        )
        return CombinedReward(entries)
    reward = reward_class(norm["type"])(**norm["params"])
    if norm["weight"] == 1.0:
        return reward
    return CombinedReward((Entry(reward, weight=norm["weight"], label=norm.get("label") or norm["type"]),))


def _inject_defaults(spec: dict, defaults: Mapping[str, Mapping[str, Any]]) -> dict:
    spec = dict(spec)
    if "type" not in spec and "name" in spec:
        spec["type"] = spec.pop("name")
    if "type" not in spec and set(spec) <= {"params", "weight"}:
        spec["type"] = "economics"
    rtype = spec.get("type")
    if rtype == "combined":
        members = spec.get("rewards", (spec.get("params") or {}).get("rewards"))
        if isinstance(members, (list, tuple)):
            new = [
                _inject_defaults(load_spec(m) if isinstance(m, str) else dict(m), defaults)
                if isinstance(m, (str, Mapping))
                else m
                for m in members
            ]
            if "rewards" in spec:
                spec["rewards"] = new
            else:
                spec["params"] = dict(spec["params"], rewards=new)
        return spec
    if rtype in defaults:
        # Old parameter names first, so a user's old key is not merged beside its default's new one.
        spec = rename_keys(spec, where="reward", error=RewardSpecError, stacklevel=4)
        params = spec.get("params") or {}
        params = (
            rename_keys(params, where="reward.params", error=RewardSpecError, stacklevel=4)
            if isinstance(params, Mapping)
            else params
        )
        inline = {k: spec.pop(k) for k in list(spec) if k not in SPEC_KEYS and k in defaults[rtype]}
        merged = dict(defaults[rtype])
        merged.update(inline)
        merged.update(params)
        spec["params"] = merged
    return spec


def spec_to_yaml(spec: Any) -> str:
    """YAML text of the normalised spec (what :func:`load_spec` reads back to the same spec)."""
    return yaml.safe_dump(normalise_spec(load_spec(spec) if not isinstance(spec, Mapping) else spec), sort_keys=False)
