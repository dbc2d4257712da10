"""The errors of the Reasoning Economics Workbench: one base class, one module (as ``gymnasium/error.py``).

Every error the project raises on purpose derives from :class:`ReasoningEconomicsError`, and its
message says what was wrong and how to fix it, so a front end can show it as it is and catch one
class::

    try:
        env.reset(seed=7, total_budget=budget)
    except ReasoningEconomicsError as exc:   # any of the errors below
        print(exc)

Each one also keeps the built-in class it had before this module existed (``ValueError`` for a bad
value, ``RuntimeError`` for something that cannot be done here, ``ConnectionError`` for a lost
server), so code that catches those keeps working. Anything else that escapes the library (a
``TypeError`` from a wrong argument type, an ``OSError`` from the disk) is not wrapped.

The hierarchy (the class is importable from here and from the module in brackets)::

    ReasoningEconomicsError
    ├── ConfigError (ValueError)                  [config]       an EnvConfig field or YAML key
    │   └── ServerConfigError                     [server]       a server setting or REE_* variable
    ├── EpisodeError (ValueError)                 [env]          a reset or step argument
    │   ├── EpisodeStateError                     [server]       a step with no episode in progress
    │   └── TokenizerNotAllowedError              [server]       a tokenizer the server refuses
    ├── SourceError (ValueError)                  [sources]      a source name, option or its data
    │   └── UnknownSourceError (UnknownNameError)                an unregistered source name
    ├── SourceUnavailable (RuntimeError)          [sources]      a source's data cannot be reached here
    ├── SamplingError (ValueError)                [sampler]      the pools cannot fill the episode
    ├── RewardSpecError (ValueError)              [rewards]      a reward spec or parameter
    │   ├── UnknownRewardError (UnknownNameError)                an unregistered reward type
    │   └── GroupRewardError                      [rewards]      a group reward outside a GRPO group
    ├── UnknownNameError (ValueError)             [registry]     a name no registry holds (sources,
    │                                                            rewards, policies)
    ├── PolicyError (RuntimeError)                [policies]     a policy cannot produce a response
    ├── CurveFitError (ValueError)                [policies]     rows that cannot identify a curve
    ├── UnmeasuredProblemTypeError (ValueError)   [policies]     a fitted curve set never measured this type
    ├── ChatFormatError (ValueError)              [conversation] a chat template cannot render an episode
    ├── TokenizerLoadError (RuntimeError)         [tokenization] a tokenizer cannot be loaded
    ├── ModelNotAvailableError (RuntimeError)     [offline_model] a model name resolves to nothing here
    ├── ModelServerError (RuntimeError)           [model_server] a local inference server cannot start
    ├── ServerError (RuntimeError)                [client]       the server answered with an error frame
    ├── ServerGoneError (ConnectionError)         [client]       the connection ended under a request
    └── EpisodeLostError (ConnectionError)        [remote]       no replica could continue an episode

The workbench and training packages derive theirs from the same base: ``workbench.play.PlayError``,
``workbench.runs.RunFolderError``, ``workbench.reward_lab.RescoreError`` (all ``ValueError``),
``training.grpo_train.TrainSetupError``, ``training.models.ModelLoadError`` and
``training.export.ExportError`` (all ``RuntimeError``). The server's two internal errors
(``server.protocol.FrameError``, ``server.sessions.AdmissionError``) become error frames and never
reach a caller. The grading package raises no error of its own to callers (bad arguments are a
``TypeError`` / ``ValueError``; its parse errors are caught inside ``grade()``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "ChatFormatError",
    "ConfigError",
    "CurveFitError",
    "UnmeasuredProblemTypeError",
    "EpisodeError",
    "EpisodeLostError",
    "EpisodeStateError",
    "GroupRewardError",
    "ModelNotAvailableError",
    "ModelServerError",
    "PolicyError",
    "ReasoningEconomicsError",
    "RewardSpecError",
    "SamplingError",
    "ServerConfigError",
    "ServerError",
    "ServerGoneError",
    "SourceError",
    "SourceUnavailable",
    "TokenizerLoadError",
    "TokenizerNotAllowedError",
    "UnknownNameError",
    "UnknownRewardError",
    "UnknownSourceError",
]


class ReasoningEconomicsError(Exception):
    """Base class of every error the project raises on purpose; the message says what was wrong
    and how to fix it."""


# ----------------------------------------------------------------------- configuration
class ConfigError(ReasoningEconomicsError, ValueError):
    """A configuration value is invalid; the message names the field and how to fix it."""


class ServerConfigError(ConfigError):
    """A server setting or ``REE_*`` variable is invalid; the message names it and the fix."""


# ----------------------------------------------------------------------------- episodes
class EpisodeError(ReasoningEconomicsError, ValueError):
    """A reset or step argument is invalid; the message says which and how to fix it."""


class EpisodeStateError(EpisodeError):
    """A step arrived when the session has no episode in progress (none yet, or it is over)."""


class TokenizerNotAllowedError(EpisodeError):
    """A client named a tokenizer that this server's policy refuses."""


# ------------------------------------------------------------------------- registries
class UnknownNameError(ReasoningEconomicsError, ValueError):
    """A name that no registry entry has (a source, reward or policy); the message lists the
    registered names.

    Attributes:
        kind: What was looked up (``"source"``, ``"reward"``, ``"policy"``).
        name: The name asked for.
        available: The registered names, in registration order.
    """

    def __init__(self, message: str, *, kind: str = "", name: str = "", available: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.kind = kind
        self.name = name
        self.available = tuple(available)

    def __reduce__(self) -> Any:  # keep the fields across processes (keyword-only arguments)
        return (_rebuild, (type(self), str(self), {"kind": self.kind, "name": self.name, "available": self.available}))


# ----------------------------------------------------------------------------- sources
class SourceError(ReasoningEconomicsError, ValueError):
    """A source name or option is invalid (a configuration mistake), or its data is malformed."""


class UnknownSourceError(UnknownNameError, SourceError):
    """A source name that is not registered (both an :class:`UnknownNameError` and a :class:`SourceError`)."""


class SourceUnavailable(ReasoningEconomicsError, RuntimeError):
    """A source's data cannot be loaded here (offline and no local copy); says how to fix it.

    Besides the message (which names the fix in config terms), the fields let a front end word
    its own fix (the app points at its "Data folder" field):

    Attributes:
        source: The source's registry name (``""`` when unknown).
        tried: What was tried, one phrase each (e.g. "the Hugging Face Hub is unreachable").
        local_patterns: File names (globs) the source looks for in a data folder.
    """

    def __init__(
        self, message: str, *, source: str = "", tried: Sequence[str] = (), local_patterns: Sequence[str] = ()
    ) -> None:
        super().__init__(message)
        self.source = source
        self.tried = tuple(tried)
        self.local_patterns = tuple(local_patterns)

    def __reduce__(self) -> Any:  # keep the fields across processes (keyword-only arguments)
        fields = {"source": self.source, "tried": self.tried, "local_patterns": self.local_patterns}
        return (_rebuild, (type(self), str(self), fields))


class ModelNotAvailableError(ReasoningEconomicsError, RuntimeError):
    """A model name resolves to no weights here: not a folder, not in the HF cache, the Hub
    unreachable, and (for the embedded name) the offline model not built; says how to build it."""


class ModelServerError(ReasoningEconomicsError, RuntimeError):
    """A local inference server (vLLM's CPU engine) cannot be started or stopped answering; the
    message names the command, the log file and its last lines."""


class SamplingError(ReasoningEconomicsError, ValueError):
    """The pools cannot provide the requested episode (empty pools, all weights zero...)."""


# ----------------------------------------------------------------------------- rewards
class RewardSpecError(ReasoningEconomicsError, ValueError):
    """A reward spec or parameter is invalid (unknown key, value out of its limits, bad YAML);
    the message names the spec path (``reward.rewards[1].params.alpha``) and what it accepts."""


class UnknownRewardError(UnknownNameError, RewardSpecError):
    """A reward type that is not registered (both an :class:`UnknownNameError` and a :class:`RewardSpecError`)."""


class GroupRewardError(RewardSpecError):
    """A group reward was asked for outside a group (e.g. inside one environment step)."""


# ---------------------------------------------------------------------------- policies
class PolicyError(ReasoningEconomicsError, RuntimeError):
    """A policy could not produce a response (endpoint down after retries, bad configuration,
    missing trusted context); the message says what failed and how to fix it."""


class CurveFitError(ReasoningEconomicsError, ValueError):
    """The rows cannot identify a curve (too few, one class only, accuracy not rising with tokens)."""


class UnmeasuredProblemTypeError(ReasoningEconomicsError, ValueError):
    """A fitted curve set is asked for a problem type of a family it was never measured on (instead of silently
    answering with the hand-chosen default curve); the message names what it covers."""


class ChatFormatError(ReasoningEconomicsError, ValueError):
    """The tokenizer's chat template cannot render an episode (message says why and the fix)."""


class TokenizerLoadError(ReasoningEconomicsError, RuntimeError):
    """A tokenizer could not be loaded; the message names it and lists what was tried."""


# ------------------------------------------------------------------- client and remote
class ServerError(ReasoningEconomicsError, RuntimeError):
    """The server answered a request with an error frame.

    Attributes:
        code: OpenEnv's error code (``VALIDATION_ERROR``, ``EXECUTION_ERROR``, ``CAPACITY_REACHED``,
            ``INVALID_JSON``, ``UNKNOWN_TYPE``, ``SESSION_ERROR``, ``UNAUTHORIZED``, ...).
        message: The server's explanation (what was wrong and how to fix it).
        data: The whole error payload.
    """

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = dict(data)
        self.code = str(self.data.get("code", "UNKNOWN"))
        self.message = str(self.data.get("message", "unknown error"))
        super().__init__(f"Server error: {self.message} (code: {self.code})")

    def __reduce__(self) -> Any:
        return (type(self), (self.data,))


class ServerGoneError(ReasoningEconomicsError, ConnectionError):
    """The connection to the server ended while a request was waiting for its answer.

    Attributes:
        url: The server's WebSocket URL.
        close_code: The WebSocket close code (``1012`` service restart, ``1006`` no close frame: the
            server or network died, ``4000`` closed idle by the server, ...), or ``None``.
        reason: The close reason the server gave, if any.
    """

    def __init__(self, url: str | None, close_code: int | None, reason: str = "") -> None:
        self.url = url
        self.close_code = close_code
        self.reason = reason
        what = f"close code {close_code}" + (f": {reason}" if reason else "") if close_code else "no close frame"
        super().__init__(
            f"the environment server at {url} went away during the request ({what}); the episode on this "
            "session is lost: reset again (the client reconnects), or play through reasoning_env.remote.RemoteEnv, "
            "which replays an episode from its seed on another replica"
        )

    def __reduce__(self) -> Any:
        return (type(self), (self.url, self.close_code, self.reason))


class EpisodeLostError(ReasoningEconomicsError, ConnectionError):
    """An episode could not be continued: its replica went away and no other replica could
    replay it (none reachable, or the replay differed). The message says which."""


def _rebuild(cls: type, message: str, fields: dict[str, Any]) -> BaseException:
    """Unpickle an error whose fields are keyword-only arguments."""
    return cls(message, **fields)
