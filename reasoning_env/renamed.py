"""Renamed settings and parameters: the old spellings keep working, with a ``FutureWarning``.

The project spells its public names in British English, as its records and figures always did
(``utilisation``, ``normalise``). One setting was spelled the other way, and is renamed here:

============================ ============================ =========================================
old name (still read)        new name                     where
============================ ============================ =========================================
``target_utilization``       ``target_utilisation``       :class:`~reasoning_env.config.EnvConfig`
                                                          setting (YAML), the ``economics`` and
                                                          ``budget_aware`` reward parameter (spec
                                                          ``params``, keyword of the reward class)
============================ ============================ =========================================

A YAML file, a saved run's ``config.yaml`` or a reward spec written with the old key loads as
before and warns once (``FutureWarning``, shown by default) naming the new key; giving both
spellings is an error. Names the project does not own keep their owner's spelling (vLLM's and
Unsloth's ``gpu_memory_utilization``).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

__all__ = ["RENAMED_KEYS", "accept_renamed_keywords", "rename_keys", "rename_spec_keys"]

#: Old key -> new key, for configuration settings and reward parameters.
RENAMED_KEYS: dict[str, str] = {"target_utilization": "target_utilisation"}

C = TypeVar("C", bound=type)


def _message(old: str, new: str, where: str) -> str:
    return f"{where}: {old!r} is the old spelling of {new!r}; it still works for now, but write {new!r} instead"


def rename_keys(
    values: Mapping[str, Any], *, where: str, error: Callable[[str], Exception] = ValueError, stacklevel: int = 3
) -> dict[str, Any]:
    """A copy of ``values`` with every old key of :data:`RENAMED_KEYS` under its new name.

    Args:
        values: Settings or parameters (a mapping of names to values).
        where: What holds them, for the messages (``"EnvConfig"``, ``"reward.params"``).
        error: Builds the exception raised when both spellings are given.
        stacklevel: Passed to :func:`warnings.warn` (the caller's caller by default).

    Returns:
        The renamed copy (the same keys when nothing was renamed).

    Raises:
        whatever ``error`` builds: both the old and the new key are present.

    Warns:
        FutureWarning: once per old key found.
    """
    out = dict(values)
    for old, new in RENAMED_KEYS.items():
        if old not in out:
            continue
        if new in out:
            raise error(f"{where}: give {new!r} only; {old!r} is its old spelling and both are set")
        warnings.warn(_message(old, new, where), FutureWarning, stacklevel=stacklevel)
        out[new] = out.pop(old)
    return out


def rename_spec_keys(spec: Any, *, where: str = "reward", stacklevel: int = 4) -> Any:
    """A reward spec (a mapping) with the old parameter names renamed, inline, in ``params`` and in
    the members of a ``combined`` spec; anything else is returned unchanged (the spec's own
    validation reports it).

    Raises:
        ValueError: a parameter given under both spellings.

    Warns:
        FutureWarning: once per old key found.
    """
    if not isinstance(spec, Mapping):
        return spec
    out = rename_keys(spec, where=where, stacklevel=stacklevel)
    params = out.get("params")
    if isinstance(params, Mapping):
        out["params"] = params = rename_keys(params, where=f"{where}.params", stacklevel=stacklevel)
    for holder, key in ((out, "rewards"), (params if isinstance(params, dict) else {}, "rewards")):
        members = holder.get(key)
        if isinstance(members, (list, tuple)):
            holder[key] = [
                rename_spec_keys(m, where=f"{where}.rewards[{i}]", stacklevel=stacklevel + 1)
                for i, m in enumerate(members)
            ]
    return out


def accept_renamed_keywords(cls: C) -> C:
    """Class decorator: the constructor also takes the old keyword names of :data:`RENAMED_KEYS`
    (with a ``FutureWarning``), and reading an old attribute name returns the new one's value.

    Used on the reward classes (frozen dataclasses), whose fields must stay exactly their
    registered parameters.
    """
    init = cls.__init__
    fields = set(getattr(cls, "__dataclass_fields__", {}))
    renamed = {old: new for old, new in RENAMED_KEYS.items() if new in fields}
    if not renamed:
        return cls

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if any(old in kwargs for old in renamed):
            kwargs = rename_keys(kwargs, where=cls.__name__, error=TypeError)
        init(self, *args, **kwargs)

    def __getattr__(self: Any, name: str) -> Any:  # only called when the normal lookup fails
        if name in renamed:
            warnings.warn(_message(name, renamed[name], cls.__name__), FutureWarning, stacklevel=2)
            return getattr(self, renamed[name])
        raise AttributeError(f"{cls.__name__!r} object has no attribute {name!r}")

    cls.__init__ = __init__  # type: ignore[method-assign]
    cls.__getattr__ = __getattr__  # type: ignore[attr-defined]
    return cls
