"""Procedural questions from ``reasoning-gym`` (offline, deterministic per seed).

Options: ``datasets`` (generator names; default :data:`DEFAULT_DATASETS`, the math-flavoured ones),
``size`` (questions per generator, default 200), ``seed`` (default 0), ``config`` (generator name ->
its keyword arguments, e.g. ``{basic_arithmetic: {min_terms: 4, max_terms: 6}}``: reasoning-gym's
difficulty options), ``difficulty`` (generator name -> our 1-5 label; default :data:`DEFAULT_DIFFICULTY`),
``label`` (a short name for this entry's tier, e.g. ``hard``: its problem types become
``"reasoning_gym/<generator>/<label>"``).
Problem type: ``"reasoning_gym/<generator>"`` (with ``label``: ``"reasoning_gym/<generator>/<label>"``).
Gold: the generator's ``answer``.

Question ids are ``"reasoning_gym/<generator>/<seed>/<i>"`` for a generator at its default settings and
``"reasoning_gym/<generator>/<seed>/<digest>/<i>"`` for a configured one (``digest``: 8 hex digits of the
SHA-256 of its ``config`` as sorted JSON), so the same generator at two difficulties (two source
entries with different ``config``, same seed) gives distinct ids and both sets are kept; to weigh them
apart in a ``mix`` or tell them apart in the prompt, give each entry its own ``label``.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from reasoning_env.questions import Question
from reasoning_env.sources.base import LoadContext, QuestionSource, SourceError, register_source

DEFAULT_DATASETS = (
    "basic_arithmetic",
    "chain_sum",
    "simple_equations",
    "fraction_simplification",
    "gcd",
    "lcm",
    "decimal_arithmetic",
    "gsm_symbolic",
)
DEFAULT_DIFFICULTY = {
    "basic_arithmetic": 1,
    "chain_sum": 1,
    "decimal_arithmetic": 1,
    "gcd": 2,
    "lcm": 2,
    "fraction_simplification": 2,
    "simple_equations": 2,
    "gsm_symbolic": 2,
}
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")


def config_digest(config: dict[str, Any]) -> str:
    """8 hex digits naming a generator's ``config`` (sorted JSON, SHA-256): part of configured ids."""
    text = json.dumps(config, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _names() -> list[str]:
    from reasoning_gym.factory import DATASETS

    return sorted(DATASETS)


@register_source
class ReasoningGymSource(QuestionSource):
    name = "reasoning_gym"
    description = "reasoning-gym procedural generators (offline), e.g. basic_arithmetic, simple_equations"
    options = {
        "datasets": "Generator names (default: a math-flavoured set).",
        "size": "Questions per generator (default 200).",
        "seed": "Generator seed (default 0).",
        "config": "Generator name -> keyword arguments (reasoning-gym's difficulty options).",
        "difficulty": "Generator name -> difficulty label 1-5.",
        "label": "This entry's tier name (letters, digits, _ . -): problem types become reasoning_gym/<gen>/<label>.",
    }

    def validate(self, options: dict[str, Any]) -> None:
        super().validate(options)
        size = options.get("size", 200)
        if not isinstance(size, int) or size < 1:
            raise SourceError(f"reasoning_gym: size must be a positive integer, got {size!r}")
        names = options.get("datasets", DEFAULT_DATASETS)
        names = [names] if isinstance(names, str) else list(names)
        known = set(_names())
        bad = [n for n in names if n not in known]
        if bad:
            raise SourceError(f"reasoning_gym: unknown generator(s) {bad}; see reasoning_gym.factory.DATASETS")
        for key in ("config", "difficulty"):
            if not isinstance(options.get(key, {}), dict):
                raise SourceError(f"reasoning_gym: {key} must be a mapping of generator name -> value")
        label = options.get("label")
        if label is not None and (not isinstance(label, str) or not _LABEL.match(label)):
            raise SourceError(
                f"reasoning_gym: label must be 1-32 letters, digits, '_', '.' or '-' (e.g. 'hard'), got {label!r}"
            )

    def load(self, options: dict[str, Any], ctx: LoadContext) -> list[Question]:
        import reasoning_gym

        self.validate(options)
        names = options.get("datasets", DEFAULT_DATASETS)
        names = [names] if isinstance(names, str) else list(names)
        size = options.get("size", 200)
        seed = options.get("seed", 0)
        configs = options.get("config", {})
        labels = {**DEFAULT_DIFFICULTY, **options.get("difficulty", {})}
        tier = options.get("label")
        out: list[Question] = []
        for name in names:
            config = dict(configs.get(name, {}))
            stem = f"reasoning_gym/{name}/{seed}" + (f"/{config_digest(config)}" if config else "")
            ptype = f"reasoning_gym/{name}" + (f"/{tier}" if tier else "")
            try:
                ds = reasoning_gym.create_dataset(name, size=size, seed=seed, **config)
            except TypeError as exc:
                raise SourceError(f"reasoning_gym: bad config for {name!r}: {exc}") from None
            for i, entry in enumerate(ds):
                out.append(
                    Question(
                        id=f"{stem}/{i}",
                        text=str(entry["question"]),
                        gold_answer=str(entry["answer"]),
                        problem_type=ptype,
                        source=self.name,
                        difficulty=labels.get(name),
                        metadata={"generator": name, "generator_config": config, **({"label": tier} if tier else {})},
                    )
                )
        return out
