"""Seeing the whole generation batch from every process (``accelerate launch``, one process per GPU).

TRL calls a reward function on each process with that process's rows only, then gathers the
rewards and normalises them per GRPO group over the global batch. A reward or a statistic that
compares the members of a group (``kimi_length``, the share of groups tied on correctness) must
therefore gather the rows of every process first: a group's members can sit on two processes
(``per_device_train_batch_size`` smaller than ``num_generations``, or a group straddling the
boundary between two processes' slices).

:func:`gather_rows` returns every process's rows in global order (process 0's first, as TRL lays out
the batch: global position ``process_index * B_local + i``) and where this process's rows start.
With one process it is the identity; it never imports ``torch.distributed`` itself (accelerate does,
when several processes run).
"""

from __future__ import annotations

from typing import Any


def process_info() -> tuple[int, int]:
    """``(process_index, num_processes)`` of accelerate's state (``(0, 1)`` when accelerate was not
    set up, e.g. in a plain Python process)."""
    try:
        from accelerate import PartialState

        state = PartialState()
        return int(state.process_index), int(state.num_processes)
    except Exception:  # noqa: BLE001 - accelerate missing or no distributed state (any error): one process
        return 0, 1


def gather_rows(rows: list[Any]) -> tuple[list[Any], int]:
    """All processes' ``rows`` concatenated in process order, and the offset of this process's rows.

    Every process must call it (it is a collective call when several processes run), with picklable
    rows. The result is the same list on every process.

    Returns:
        ``(all_rows, offset)``: ``all_rows[offset:offset + len(rows)] == rows``.
    """
    rank, world = process_info()
    if world == 1:
        return list(rows), 0
    from accelerate.utils import gather_object

    lengths = gather_object([len(rows)])
    all_rows = gather_object(list(rows))
    return list(all_rows), int(sum(lengths[:rank]))
