"""Procedural questions from ``reasoning-gym`` (offline, deterministic per seed).

Options: ``datasets`` (generator names; default :data:`DEFAULT_DATASETS`, the math-flavoured ones),
``size`` (questions per generator, default 200), ``seed`` (default 0), ``config`` (generator name ->
its keyword arguments, e.g. ``{basic_arithmetic: {min_terms: 4, max_terms: 6}}``: reasoning-gym's
difficulty options), ``difficulty`` (generator name -> our 1-5 label; default :data:`DEFAULT_DIFFICULTY`).
Problem type: ``"reasoning_gym/<generator>"``. Gold: the generator's ``answer``.
"""

from __future__ import annotations

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

    def load(self, options: dict[str, Any], ctx: LoadContext) -> list[Question]:
        import reasoning_gym

        self.validate(options)
        names = options.get("datasets", DEFAULT_DATASETS)
        names = [names] if isinstance(names, str) else list(names)
        size = options.get("size", 200)
        seed = options.get("seed", 0)
        configs = options.get("config", {})
        labels = {**DEFAULT_DIFFICULTY, **options.get("difficulty", {})}
        out: list[Question] = []
        for name in names:
            try:
                ds = reasoning_gym.create_dataset(name, size=size, seed=seed, **configs.get(name, {}))
            except TypeError as exc:
                raise SourceError(f"reasoning_gym: bad config for {name!r}: {exc}") from None
            for i, entry in enumerate(ds):
                out.append(
                    Question(
                        id=f"reasoning_gym/{name}/{seed}/{i}",
                        text=str(entry["question"]),
                        gold_answer=str(entry["answer"]),
                        problem_type=f"reasoning_gym/{name}",
                        source=self.name,
                        difficulty=labels.get(name),
                        metadata={"generator": name, "generator_config": dict(configs.get(name, {}))},
                    )
                )
        return out
