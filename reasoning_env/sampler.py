"""Episode sampling: an even (or weighted) mix across problem types, without replacement.

Deterministic in the seed in any process: it uses ``random.Random(seed)`` (Mersenne Twister,
whose integer seeding does not depend on hash randomisation) and iterates problem types in
sorted order.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from reasoning_env.errors import SamplingError
from reasoning_env.questions import Question


def allocate_counts(
    types: Sequence[str], weights: Mapping[str, float], n: int, capacity: Mapping[str, int], rng: random.Random
) -> dict[str, int]:
    """Split ``n`` questions across ``types`` in proportion to ``weights`` (largest remainder).

    Ties in the remainders are broken by ``rng`` so that, with equal weights, which types get
    the extra question varies from episode to episode. A type never gets more than its
    ``capacity``; the excess moves to the other types.

    Returns:
        problem type -> count, summing to ``min(n, total capacity of weighted types)``.
    """
    active = [t for t in types if weights.get(t, 1.0) > 0 and capacity.get(t, 0) > 0]
    if not active:
        raise SamplingError("no problem type has both a positive weight and questions")
    counts = {t: 0 for t in active}
    remaining = min(n, sum(capacity[t] for t in active))
    while remaining > 0:
        open_types = [t for t in active if counts[t] < capacity[t]]
        total_w = sum(weights.get(t, 1.0) for t in open_types)
        shares = {t: remaining * weights.get(t, 1.0) / total_w for t in open_types}
        floors = {t: min(int(shares[t]), capacity[t] - counts[t]) for t in open_types}
        for t in open_types:
            counts[t] += floors[t]
        given = sum(floors.values())
        left = remaining - given
        if left > 0:
            order = sorted(open_types, key=lambda t: (-(shares[t] - int(shares[t])), rng.random()))
            for t in order:
                if left == 0:
                    break
                if counts[t] < capacity[t]:
                    counts[t] += 1
                    left -= 1
            given = remaining - left
        if given == 0:
            break
        remaining -= given
    return {t: c for t, c in counts.items() if c > 0}


def sample_episode(
    pools: Mapping[str, Sequence[Question]],
    num_questions: int,
    seed: int,
    weights: Mapping[str, float] | None = None,
) -> list[Question]:
    """Draw one episode's questions.

    Args:
        pools: problem type -> questions.
        num_questions: Questions wanted (fewer only if the pools hold fewer in total).
        seed: Episode seed; same seed and pools give the same list in any process.
        weights: problem type -> weight (unlisted types weigh 1.0, i.e. an even mix).

    Returns:
        ``num_questions`` distinct questions in a seeded random order.

    Raises:
        SamplingError: no pool can provide questions.
    """
    rng = random.Random(seed)
    weights = dict(weights or {})
    types = sorted(pools)
    capacity = {t: len(pools[t]) for t in types}
    counts = allocate_counts(types, weights, num_questions, capacity, rng)
    chosen: list[Question] = []
    for t in types:
        k = counts.get(t, 0)
        if k:
            chosen.extend(rng.sample(list(pools[t]), k))
    rng.shuffle(chosen)
    return chosen
