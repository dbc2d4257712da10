"""Shared fixtures of the policy/evaluation tests: a small offline question pool and helpers.

The pool mimics the project's problem types (GSM8K without difficulty labels, MATH-500 levels
1-5 with LaTeX answers, NuminaMath-TIR) so that tests need neither the Hub nor ../shared/data.
"""

from __future__ import annotations

from pathlib import Path

from reasoning_env.config import EnvConfig
from reasoning_env.questions import Question
from reasoning_env.sources import PoolSet

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = (REPO / ".." / "shared" / "data").resolve()
TOKENIZER = "Qwen/Qwen2.5-0.5B-Instruct"

_GSM = [
    ("Tom has 3 apples and buys 5 more. How many apples does he have?", "8"),
    ("A shop sells pens at 2 dollars each. How much do 12 pens cost?", "24"),
    ("Sara reads 15 pages a day. How many pages does she read in a week?", "105"),
    ("A train travels 60 miles per hour for 3 hours. How far does it go?", "180"),
    ("There are 48 cookies shared equally by 6 children. How many does each get?", "8"),
    ("Ben saved 1,200 dollars and spent 450. How much is left?", "750"),
    ("A farmer has 17 cows and sells 9. How many cows remain?", "8"),
    ("Each box holds 24 eggs. How many eggs are in 7 boxes?", "168"),
    ("Lisa is 4 years older than Max, who is 11. How old is Lisa?", "15"),
    ("A recipe needs 3 cups of flour per cake. How many cups for 9 cakes?", "27"),
    ("A car uses 5 liters per 100 km. How many liters for 340 km?", "17"),
    ("Pencils cost 35 cents. How many cents do 20 pencils cost?", "700"),
]
_MATH = [
    ("What is $\\frac{1}{2} + \\frac{1}{3}$?", "\\frac{5}{6}", 1),
    ("Solve for $x$: $2x + 3 = 11$.", "4", 1),
    ("Simplify $\\sqrt{50}$.", "5\\sqrt{2}", 2),
    ("What is the sum of the roots of $x^2 - 7x + 10 = 0$?", "7", 2),
    ("Find the distance between $(1,2)$ and $(4,6)$.", "5", 3),
    ("Compute $\\binom{8}{3}$.", "56", 3),
    ("What is the remainder when $2^{10}$ is divided by 7?", "2", 4),
    ("Find the area of a circle of radius 3.", "9\\pi", 4),
    ("How many positive divisors does 360 have?", "24", 5),
    ("Find the largest prime factor of 1001.", "13", 5),
    ("Which choice is prime: (A) 21 (B) 23 (C) 25?", "\\text{(B)}", 3),
    ("Express $0.\\overline{3}$ as a fraction.", "\\frac{1}{3}", 2),
]
_NUMINA = [
    ("Let $f(x) = x^2 + 1$. Compute $f(f(1))$.", "5", 4),
    ("How many ways can 5 books be arranged on a shelf?", "120", 3),
    ("Find $x$ if $\\log_2 x = 5$.", "32", 3),
    ("What is $\\gcd(84, 126)$?", "42", 4),
]


def questions() -> list[Question]:
    """All fixture questions."""
    out = [
        Question(id=f"gsm/{i}", text=t, gold_answer=a, problem_type="GSM8K", source="fixture")
        for i, (t, a) in enumerate(_GSM)
    ]
    out += [
        Question(
            id=f"math/{i}",
            text=t,
            gold_answer=a,
            problem_type="MATH-500",
            source="fixture",
            difficulty=d,
            subject="Algebra",
        )
        for i, (t, a, d) in enumerate(_MATH)
    ]
    out += [
        Question(
            id=f"numina/{i}", text=t, gold_answer=a, problem_type="NuminaMath-TIR", source="fixture", difficulty=d
        )
        for i, (t, a, d) in enumerate(_NUMINA)
    ]
    return out


def pools() -> PoolSet:
    """The fixture questions as pools per problem type."""
    by: dict[str, list[Question]] = {}
    for q in questions():
        by.setdefault(q.problem_type, []).append(q)
    return PoolSet(
        pools={k: tuple(v) for k, v in sorted(by.items())},
        sources_used=({"source": "fixture", "used": "fixture", "questions": len(questions()), "reason": None},),
    )


def config(**changes) -> EnvConfig:
    """An EnvConfig whose sources are irrelevant (the tests pass :func:`pools`)."""
    base = dict(sources=["gsm8k"], data_dir=str(SHARED_DATA))
    base.update(changes)
    return EnvConfig(**base)


def make_env(cfg: EnvConfig | None = None):
    """An in-process env on the fixture pools."""
    from reasoning_env.env import ReasoningEconomicsEnv

    return ReasoningEconomicsEnv(cfg or config(), pools=pools())


def episode_info(env, obs, cfg: EnvConfig, *, trusted: bool = True, episode: int = 0):
    """The EpisodeInfo the evaluator would build after ``obs = env.reset(...)``."""
    from reasoning_env.policies import EpisodeInfo
    from reasoning_env.tokenization import get_tokenizer

    md = obs.metadata
    return EpisodeInfo(
        episode=episode,
        seed=md["seed"],
        total_budget=md["total_budget"],
        num_questions=md["num_questions"],
        tokenizer_name=md["tokenizer_name"],
        tokenizer=get_tokenizer(md["tokenizer_name"]),
        min_tokens=cfg.min_tokens,
        max_tokens=cfg.max_tokens,
        max_tokens_per_step=cfg.max_tokens_per_step,
        hard_cap_mode=cfg.hard_cap_mode,
        reset_metadata=md,
        questions=env.questions if trusted else None,
    )


def play(env, policy, cfg: EnvConfig, *, seed: int, total_budget: int | None = None):
    """Play one episode; returns ``(outputs, last_steps, final_obs)``."""
    from reasoning_env.models import ReasoningEconomicsAction

    obs = env.reset(seed=seed, tokenizer_name=cfg.tokenizer_name, total_budget=total_budget)
    policy.reset(episode_info(env, obs, cfg, trusted=policy.needs_trusted_context))
    outs, steps = [], []
    while not obs.done:
        out = policy.act(obs)
        md = {"grading_response": out.grading_response} if out.grading_response else {}
        obs = env.step(ReasoningEconomicsAction(response=out.response, metadata=md))
        outs.append(out)
        steps.append(obs.last_step)
    return outs, steps, obs
