"""Measurement behind the defaults of ``--scale_rewards`` and ``--loss_type`` (docs/training.md).

    python -m training.advantage_study                 # JSON: per scale_rewards / loss_type figures
    python -m training.advantage_study --groups 64 --num_generations 4 --sigma 0.5

GRPO groups of ``--num_generations`` members play the same seeded episode of the real environment
(default config: builtin questions, the economics reward) at the budget training plays: each reset
names the tokenizer (``tokenizer_name``, default the config's), so the budget is tokenizer-native
(``budget_ratio`` x the questions' tokens, about 1.7k tokens for 10 questions), as in
``training.rollout``; ``--total_budget`` fixes it instead, like training's ``--total_budget``. Each member is
a stochastic simulated solver: it splits the budget in proportion to difficulty times a lognormal
factor (``--sigma``, its own draw per question), writes responses of exactly that many tokens, and
is right with the probability the solver curves give for that length (``reasoning_env.policies``).
The environment grades and pays every step, so the rewards are the environment's.

From the group rewards, advantages are computed with TRL's formulas (``GRPOTrainer.
_generate_and_score_completions``, TRL 1.15/1.16: ``A = r - mean_group(r)``, divided by
``std_group(r) + 1e-4`` (``group``), by ``std_batch(r) + 1e-4`` (``batch``), or not (``none``)) and
the per-token weights of each loss aggregation (``grpo``: ``A / |o|`` per sequence, then the batch
mean; ``dapo``: ``A / sum |o|`` over the batch; ``dr_grpo``: ``A / (B * L_max)``). Printed:

- ``tied_share``: share of groups whose members all got the same number right (advantages there
  come from cost differences only);
- per ``scale_rewards``: ``tied_to_untied_adv`` = mean |A| in tied groups / mean |A| in untied
  groups, next to the same ratio for the raw reward gaps (``raw_tied_to_untied``): a scaling that
  keeps the reward's proportions has the two equal; ``group`` inflates tied groups' tiny cost gaps
  to full size;
- per ``loss_type``: ``long_to_short_token_weight`` = mean per-token weight |A| w of the longer
  half of the episodes over the shorter half (1 = every token weighs the same, whatever its
  episode's length), with ``scale_rewards="batch"``;
- ``budget`` (mean episode budget) and ``budget_source``.

What is measured and what holds by construction: ``tied_share``, ``raw_tied_to_untied`` and the
``group`` row depend on the environment, the budget and the simulated solver (its lognormal spread sets
the tie rate). For ``batch`` and ``none``, ``tied_to_untied_adv == raw_tied_to_untied`` by construction
(one divisor for the whole batch), and ``dapo`` / ``dr_grpo`` weigh a token ``A / constant``, so their
long/short ratio only restates how |A| varies with length; ``grpo``'s ``1/|o|`` is the formula.
"""

from __future__ import annotations

import argparse
import json
import random
import sys

import numpy as np

SCALES = ("group", "batch", "none")
LOSSES = ("grpo", "dapo", "dr_grpo")


def advantages(rewards: np.ndarray, group_size: int, scale: str) -> np.ndarray:
    """TRL's GRPO advantages for rewards laid out in consecutive groups of ``group_size``.

    Args:
        rewards: ``[B]`` episode rewards, ``B`` a multiple of ``group_size``.
        scale: ``"group"``, ``"batch"`` or ``"none"`` (TRL ``scale_rewards``).
    Returns:
        ``[B]`` advantages (TRL: population std with Bessel's correction, ``torch.std``, + 1e-4).
    Raises:
        ValueError: unknown scale or a batch that is not whole groups.
    """
    r = np.asarray(rewards, dtype=np.float64)
    if r.size % group_size:
        raise ValueError(f"{r.size} rewards are not whole groups of {group_size}")
    g = r.reshape(-1, group_size)
    centred = (g - g.mean(axis=1, keepdims=True)).reshape(-1)
    if scale == "group":
        return centred / (np.repeat(g.std(axis=1, ddof=1), group_size) + 1e-4)
    if scale == "batch":
        return centred / (r.std(ddof=1) + 1e-4)
    if scale == "none":
        return centred
    raise ValueError(f"scale_rewards must be one of {SCALES}, got {scale!r}")


def token_weights(adv: np.ndarray, lengths: np.ndarray, loss_type: str, max_len: int | None = None) -> np.ndarray:
    """Per-token gradient weight of each sequence under a TRL loss aggregation (``[B]``).

    ``grpo``: ``A_i / |o_i| / B``; ``dapo``: ``A_i / sum_j |o_j|``; ``dr_grpo``: ``A_i / (B * L_max)``.
    """
    n = np.asarray(lengths, dtype=np.float64)
    b = len(n)
    if loss_type == "grpo":
        return adv / n / b
    if loss_type == "dapo":
        return adv / n.sum()
    if loss_type == "dr_grpo":
        return adv / (b * float(max_len or n.max()))
    raise ValueError(f"loss_type must be one of {LOSSES}, got {loss_type!r}")


def play_groups(
    n_groups: int,
    group_size: int,
    sigma: float,
    seed: int,
    config=None,
    *,
    tokenizer_name: str | None = None,
    total_budget: int | None = None,
) -> dict:
    """Play ``n_groups`` groups on the real environment (see the module docstring).

    Args:
        tokenizer_name: Sent to every ``reset`` (the tokenizer-native budget, as training does);
            default the config's ``tokenizer_name``.
        total_budget: A fixed budget for every episode instead (training's ``--total_budget``).
    Returns:
        ``{"rewards": [B], "num_correct": [B], "tokens": [B], "group": [B], "budget": [B],
        "budget_source": [B]}`` (numpy arrays).
    """
    from reasoning_env.config import EnvConfig
    from reasoning_env.env import ReasoningEconomicsEnv
    from reasoning_env.models import ReasoningEconomicsAction
    from reasoning_env.policies import SolverCurves
    from reasoning_env.policies.text import write_response
    from reasoning_env.tokenization import get_tokenizer

    cfg = config or EnvConfig()
    env = ReasoningEconomicsEnv(cfg)
    tokenizer_name = tokenizer_name or cfg.tokenizer_name
    tok = get_tokenizer(tokenizer_name)
    curves = SolverCurves()
    rng = random.Random(seed)
    out = {"rewards": [], "num_correct": [], "tokens": [], "group": [], "budget": [], "budget_source": []}
    for g in range(n_groups):
        ep_seed = rng.randrange(2**31)
        for _m in range(group_size):
            obs = env.reset(seed=ep_seed, tokenizer_name=tokenizer_name, total_budget=total_budget)
            out["budget"].append(int(obs.total_budget))
            out["budget_source"].append(str((obs.metadata or {}).get("budget_source")))
            qs = env.questions
            diffs = np.array([float(q.difficulty or 3) for q in qs])
            shares = diffs * np.exp(np.array([rng.gauss(0.0, sigma) for _ in qs]))
            plan = np.maximum(8, shares / shares.sum() * obs.total_budget).astype(int)
            total = correct = 0
            while not obs.done:
                i = obs.question_index
                target = int(min(plan[i], obs.step_token_cap or plan[i]))
                right = rng.random() < float(curves.p(target, qs[i].problem_type, qs[i].difficulty))
                answer = qs[i].gold_answer if right else "-1"
                obs = env.step(ReasoningEconomicsAction(response=write_response(tok, target, answer, rng)))
                total += obs.last_step.tokens
                correct += int(obs.last_step.correct)
            out["rewards"].append(float(obs.metadata.get("episode_reward", 0.0)))
            out["num_correct"].append(correct)
            out["tokens"].append(total)
            out["group"].append(g)
    env.close()
    return {k: np.asarray(v) for k, v in out.items()}


def study(data: dict, group_size: int) -> dict:
    """The figures of the module docstring for played groups (``play_groups`` output)."""
    r, nc, n = data["rewards"], data["num_correct"], data["tokens"]
    grouped_nc = nc.reshape(-1, group_size)
    tied_groups = (grouped_nc == grouped_nc[:, :1]).all(axis=1)
    tied = np.repeat(tied_groups, group_size)
    gap = np.abs(r - np.repeat(r.reshape(-1, group_size).mean(axis=1), group_size))
    res: dict = {
        "episodes": int(len(r)),
        "groups": int(len(tied_groups)),
        "tied_share": round(float(tied_groups.mean()), 3),
    }
    raw = float(gap[tied].mean() / gap[~tied].mean()) if tied.any() and (~tied).any() else None
    res["raw_tied_to_untied"] = None if raw is None else round(raw, 3)
    res["scale_rewards"] = {}
    for scale in SCALES:
        a = np.abs(advantages(r, group_size, scale))
        ratio = float(a[tied].mean() / a[~tied].mean()) if tied.any() and (~tied).any() else None
        res["scale_rewards"][scale] = {
            "tied_to_untied_adv": None if ratio is None else round(ratio, 3),
            "mean_abs_adv": round(float(a.mean()), 4),
        }
    res["loss_type"] = {}
    a = np.abs(advantages(r, group_size, "batch"))
    long = n >= np.median(n)
    for loss in LOSSES:
        w = token_weights(a, n, loss)
        ratio = (
            float(w[long].mean() / w[~long].mean()) if long.any() and (~long).any() and w[~long].mean() > 0 else None
        )
        res["loss_type"][loss] = {"long_to_short_token_weight": None if ratio is None else round(ratio, 3)}
    res["mean_episode_tokens"] = round(float(n.mean()), 1)
    if "budget" in data:
        res["budget"] = round(float(np.mean(data["budget"])), 1)
        res["budget_source"] = sorted({str(s) for s in data["budget_source"]})
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training.advantage_study", description=__doc__.splitlines()[0])
    p.add_argument("--groups", type=int, default=48)
    p.add_argument("--num_generations", type=int, default=4)
    p.add_argument(
        "--sigma", type=float, default=0.5, help="Lognormal spread of each member's per-question allocation."
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num_questions", type=int, default=None, help="Questions per episode (default: the config's 10).")
    p.add_argument(
        "--tokenizer_name", default=None, help="Tokenizer of the tokenizer-native budget (default: the config's)."
    )
    p.add_argument(
        "--total_budget", type=int, default=None, help="A fixed budget instead (training's --total_budget)."
    )
    args = p.parse_args(argv)
    if args.groups < 2 or args.num_generations < 2:
        print("error: --groups and --num_generations must be >= 2", file=sys.stderr)
        return 2
    from reasoning_env.config import EnvConfig

    cfg = EnvConfig() if args.num_questions is None else EnvConfig().replace(num_questions=args.num_questions)
    data = play_groups(
        args.groups,
        args.num_generations,
        args.sigma,
        args.seed,
        cfg,
        tokenizer_name=args.tokenizer_name,
        total_budget=args.total_budget,
    )
    print(json.dumps({"settings": vars(args), **study(data, args.num_generations)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
