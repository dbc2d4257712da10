"""An Atropos environment (``atroposlib`` 0.4) that plays whole Reasoning Economics episodes.

Atropos (NousResearch) splits RL training into a trainer, a trajectory API (``run-api``) and
environments that generate scored groups for it. :class:`ReasoningEconomicsAtroposEnv` is such an
environment (a ``BaseEnv``): each item is one episode seed, and a group is ``group_size`` episodes of
that seed (same questions, order and budget), played by the policy served behind Atropos's server
manager. Nothing is re-implemented here: the episode is played by :class:`training.rollout.EpisodeRunner`
(the one episode format that training and evaluation share: :mod:`reasoning_env.conversation`), the
environment, grader and rewards are :class:`reasoning_env.env.ReasoningEconomicsEnv`'s, and the token
counts use the policy's tokenizer (``tokenizer_name``, resolved by :mod:`reasoning_env.tokenization`,
so ``embedded:qwen2.5`` works offline).

One episode becomes one sequence of a ``ScoredDataGroup`` (Atropos's conventions):

- ``tokens``: first prompt + every model turn and environment turn, as one id sequence;
- ``masks``: the id at model-generated positions, ``-100`` at prompt and environment positions;
- ``inference_logprobs``: the sampling log-prob of each model token, ``1.0`` elsewhere (as
  Atropos's ``ManagedServer`` writes them);
- ``scores``: the episode reward the environment paid (the sum of its step rewards);
- ``generation_params``: the sampling temperature and top-p (the trainer reads the temperature);
- ``overrides[i]["reasoning_env"]``: the episode's summary (seed, reward components, accuracy,
  tokens spent, per-step records: :meth:`training.rollout.EpisodeTrace.summary`).

Generation goes through ``ServerManager.tokens_and_logprobs_completion`` (token ids in, sampled ids
and log-probs out), so the trainer gets exactly the ids that were sampled. Which server serves it:

- ``server_type: openai`` (the default of Atropos's config): any OpenAI-compatible server whose
  ``/v1/completions`` takes a prompt of token ids and returns the sampled ids with their log-probs
  (vLLM's stock ``vllm serve``: ``logprobs: 0`` + ``return_tokens_as_token_ids``). Atropos's own
  ``OpenAIServer`` returns text only, so this adapter replaces it with :class:`CompletionsTokenServer`,
  which speaks that protocol; a server that answers without token ids (or has no ``/v1/completions``)
  is refused at start-up with the reason (:meth:`ReasoningEconomicsAtroposEnv.setup` sends one 1-token
  probe).
- ``server_type: vllm`` (Atropos's ``example_trainer/vllm_api_server.py``, ``POST /generate``),
  ``sglang`` (SGLang's native ``/generate``) or ``trl``: Atropos's own token-level servers. A ``vllm``
  server without ``/generate`` (a stock ``vllm serve``) is refused at start-up with the fix
  (``server_type: openai``).

Atropos itself was archived upstream in July 2026; ``atroposlib`` 0.4.0 is its last release
(docs/integrations.md, "Atropos").

The episode loop is synchronous (the environment grades in this process), so it runs in a worker
thread; each turn's generate calls are sent to the event loop that owns the server manager.

Command line (Atropos's ``BaseEnv.cli()``; YAML keys ``env:`` / ``openai:``, CLI ``--env.x`` /
``--openai.x`` override the YAML)::

    python -m training.atropos_env serve --config examples/atropos/reasoning_economics.yaml
    python -m training.atropos_env process --config examples/atropos/reasoning_economics.yaml \\
        --env.data_path_to_save_groups rollouts.jsonl --env.total_steps 4

Needs ``requirements-atropos.txt`` in its own environment (docs/integrations.md, "Atropos").
"""

from __future__ import annotations

import asyncio
import logging
import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import aiohttp
from atroposlib.envs.base import BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.envs.server_handling.openai_server import OpenAIServer
from atroposlib.envs.server_handling.server_baseline import APIServerConfig, ServerBaseline
from atroposlib.envs.server_handling.vllm_server import VLLMServer
from pydantic import Field

from reasoning_env.config import DEFAULT_TOKENIZER_NAME, EnvConfig
from reasoning_env.conversation import ChatFormat
from reasoning_env.errors import ReasoningEconomicsError
from reasoning_env.policies.turn_cap import TurnCap
from reasoning_env.tokenization import get_tokenizer
from training.envs import InProcessEnvFactory
from training.generation import Generation, GenerationBackend, SamplingConfig, cut_generation
from training.models import eos_token_ids
from training.rollout import EpisodeRunner, EpisodeSpec, EpisodeTrace, RolloutLimits

logger = logging.getLogger(__name__)

#: Server types whose ``tokens_and_logprobs_completion`` returns the sampled token ids (``openai``: through
#: :class:`CompletionsTokenServer`, ``/v1/completions`` with token ids; the others: Atropos's own servers).
TOKEN_LEVEL_SERVER_TYPES = ("openai", "vllm", "sglang", "trl")
#: How a completions server names a sampled token when asked for ids (vLLM's ``return_tokens_as_token_ids``).
TOKEN_ID_PREFIX = "token_id:"
#: Log-prob Atropos writes at positions the model did not generate (``ManagedServer``'s value).
MASKED_LOGPROB = 1.0


class AtroposSetupError(ReasoningEconomicsError, ValueError):
    """The Atropos environment cannot run with these settings; the message says what to change."""


class ReasoningEconomicsAtroposConfig(BaseEnvConfig):
    """Atropos's ``BaseEnvConfig`` plus what an episode needs. ``tokenizer_name`` is the policy's
    tokenizer (the environment counts tokens with it); ``max_token_length`` is the most tokens one
    episode sequence may reach (prompt + all turns): the trainer's ``max_token_len`` must be larger."""

    env_config_path: str | None = Field(
        default=None,
        description="The environment's own YAML (reasoning_env EnvConfig: sources, questions per episode, "
        "budget, rewards), e.g. examples/sources/builtin.yaml; none = the default config.",
    )
    seed: int = Field(default=0, ge=0, description="Episode seed of the first group; group k plays seed + k.")
    temperature: float = Field(default=1.0, ge=0, description="Sampling temperature (0 = greedy).")
    top_p: float = Field(default=1.0, gt=0, le=1, description="Nucleus sampling top-p.")
    reasoning_mode: str = Field(
        default="auto", description="Chat template thinking switch: auto, on or off (reasoning_env.conversation)."
    )
    total_budget: int | None = Field(
        default=None, gt=0, description="Fixed token budget per episode; none = the environment's own budget."
    )
    turn_cap: str = Field(default="share", description="Per-answer cap rule: share or env (policies.turn_cap).")
    turn_factor: float = Field(default=2.0, gt=0, description="The share rule's multiple of the fair share.")
    min_turn_tokens: int = Field(
        default=8, ge=1, description="Least room worth a turn; below it the remaining questions are forfeited."
    )


class AtroposServerBackend(GenerationBackend):
    """A :class:`training.generation.GenerationBackend` over Atropos's ``ServerManager``.

    :meth:`generate` is called from the episode thread; it sends one
    ``tokens_and_logprobs_completion(input_ids=..., n=1, max_tokens=cap)`` per context to ``loop`` (the
    event loop that owns ``server``), waits for all of them, and cuts each at its cap and first EOS.

    Args:
        server: The environment's ``ServerManager``.
        loop: The running event loop of the environment.
        eos_ids: Ids that end a turn.
        sampling: Temperature and top-p sent with every call.
        split: ``"train"`` or ``"eval"`` (Atropos keeps separate request slots for evaluation).
    """

    def __init__(
        self,
        server: Any,
        loop: asyncio.AbstractEventLoop,
        eos_ids: list[int],
        sampling: SamplingConfig,
        split: str = "train",
    ) -> None:
        super().__init__(eos_ids)
        self.server = server
        self.loop = loop
        self.sampling = sampling
        self.split = split

    def _generate(self, contexts: list[list[int]], caps: list[int], call_max: int) -> list[Generation]:
        return asyncio.run_coroutine_threadsafe(self._generate_all(contexts, caps), self.loop).result()

    async def _generate_all(self, contexts: list[list[int]], caps: list[int]) -> list[Generation]:
        return list(await asyncio.gather(*(self._one(c, cap) for c, cap in zip(contexts, caps))))

    async def _one(self, context: list[int], cap: int) -> Generation:
        _, ids, logprobs, _ = await self.server.tokens_and_logprobs_completion(
            input_ids=list(context),
            n=1,
            max_tokens=int(cap),
            temperature=float(self.sampling.temperature),
            top_p=float(self.sampling.top_p),
            split=self.split,
        )
        return cut_generation(ids[0], logprobs[0], cap, self.eos_ids)


class CompletionsTokenServer(OpenAIServer):
    """Atropos's ``server_type: openai`` made token-level: ``tokens_and_logprobs_completion`` over a standard
    OpenAI-compatible ``POST {base_url}/completions``.

    One request per call: ``prompt`` = the context's token ids (the OpenAI API's token-array prompt, so
    nothing is re-tokenized), ``n``, ``max_tokens``, ``temperature``, ``top_p``, ``logprobs: 0`` (the sampled
    token's log-prob) and vLLM's ``return_tokens_as_token_ids: true`` (each sampled token named
    ``token_id:<id>``), ``skip_special_tokens: false``, and the end-of-turn ids as ``stop_token_ids``
    (:attr:`stop_token_ids`, set by the environment) with ``include_stop_str_in_output``. The reply's
    ``choices[i].logprobs.tokens`` / ``token_logprobs`` become the sampled ids and their log-probs, exactly
    as the server sampled them; a reply without token ids raises :class:`AtroposSetupError` (the server
    does not speak this protocol: a text-only API, or one that ignores ``return_tokens_as_token_ids``).

    The log-probs are what the server reports: vLLM's default (``--logprobs-mode raw_logprobs``) is the
    model's distribution before temperature and top-p, equal to the sampling distribution only at
    temperature 1 and top-p 1; start vLLM with ``--logprobs-mode processed_logprobs`` otherwise.

    Health (Atropos polls it every second): ``GET {base_url}/models`` answers 200.
    """

    #: Ids that end a turn, sent as ``stop_token_ids`` (the environment sets them; empty: the model's own EOS).
    stop_token_ids: list[int]

    def __init__(self, config: APIServerConfig, reasoning_config: Any = None) -> None:
        super().__init__(config, reasoning_config=reasoning_config)
        self.stop_token_ids = []

    @property
    def completions_url(self) -> str:
        return f"{str(self.config.base_url).rstrip('/')}/completions"

    def _headers(self) -> dict:
        return {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}

    async def check_server_status_task(self, chat_completion: bool = True) -> None:
        while True:
            try:
                async with aiohttp.ClientSession() as session:
                    async with session.get(
                        f"{str(self.config.base_url).rstrip('/')}/models",
                        headers=self._headers(),
                        timeout=aiohttp.ClientTimeout(total=min(30, self.config.timeout)),
                    ) as response:
                        response.raise_for_status()
                self.server_healthy = True
            except Exception:  # noqa: BLE001 - any failure means "not healthy yet", as Atropos's servers do
                self.server_healthy = False
            await asyncio.sleep(1)

    def request_body(self, input_ids: list[int], **kwargs: Any) -> dict:
        """The ``/v1/completions`` body for one call (``kwargs``: Atropos's sampling arguments)."""
        for alias in ("max_new_tokens", "max_completion_tokens"):
            if alias in kwargs:
                kwargs["max_tokens"] = kwargs.pop(alias)
        kwargs.pop("prompt", None)
        body: dict[str, Any] = {
            "model": kwargs.pop("model", self.config.model_name),
            "prompt": [int(t) for t in input_ids],
            "logprobs": 0,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
        }
        if self.stop_token_ids:
            body["stop_token_ids"] = list(self.stop_token_ids)
            body["include_stop_str_in_output"] = True
        body.update({k: v for k, v in kwargs.items() if v is not None})
        return body

    def parse_choice(self, choice: dict) -> tuple[list[int], list[float], str | None]:
        """The sampled ids, their log-probs and the finish reason of one ``choices[i]``.

        Raises:
            AtroposSetupError: the choice carries no ``token_id:<id>`` tokens or no log-probs for them.
        """
        lp = choice.get("logprobs") or {}
        tokens = lp.get("tokens")
        values = lp.get("token_logprobs")
        if tokens is None or values is None:
            raise AtroposSetupError(
                f"{self.completions_url} answered without per-token log-probs (choices[].logprobs.tokens / "
                "token_logprobs): this environment trains on the sampled token ids and needs a server whose "
                "/v1/completions honours logprobs and return_tokens_as_token_ids (vLLM's `vllm serve`); for "
                "SGLang use openai.server_type: sglang (its native /generate)"
            )
        ids = []
        for t in tokens:
            if not (isinstance(t, str) and t.startswith(TOKEN_ID_PREFIX)):
                raise AtroposSetupError(
                    f"{self.completions_url} returned the token {t!r}, not '{TOKEN_ID_PREFIX}<id>': the server "
                    "ignores return_tokens_as_token_ids, so the sampled ids cannot be known exactly. Serve the "
                    "policy with vLLM (`vllm serve`), or use openai.server_type: sglang / vllm (Atropos's "
                    "token-level servers)"
                )
            ids.append(int(t[len(TOKEN_ID_PREFIX) :]))
        if len(values) != len(ids) or any(v is None or not math.isfinite(float(v)) for v in values):
            raise AtroposSetupError(
                f"{self.completions_url} returned {len(ids)} tokens with log-probs {values[:8]!r}...: "
                "every sampled token needs a finite log-prob"
            )
        return ids, [float(v) for v in values], choice.get("finish_reason")

    async def _tokens_and_logprobs_completion_wrapper(self, **kwargs: Any) -> tuple[list, list, list, list]:
        if "input_ids" not in kwargs:
            raise AtroposSetupError(
                "CompletionsTokenServer takes token ids (input_ids=...), not text: the environment sends "
                "the exact context it trains on"
            )
        prompt = [int(t) for t in kwargs.pop("input_ids")]
        n = int(kwargs.get("n", 1) or 1)
        body = self.request_body(prompt, **kwargs)
        async with aiohttp.ClientSession() as session:
            async with session.post(
                self.completions_url,
                json=body,
                headers=self._headers(),
                timeout=aiohttp.ClientTimeout(total=self.config.timeout),
            ) as response:
                if response.status != 200:
                    text = (await response.text())[:300]
                    raise aiohttp.ClientResponseError(
                        response.request_info,
                        response.history,
                        status=response.status,
                        message=f"{self.completions_url}: {text}",
                    )
                reply = await response.json()
        choices = sorted(reply.get("choices") or [], key=lambda c: int(c.get("index", 0)))
        if len(choices) != n:
            raise AtroposSetupError(f"{self.completions_url} returned {len(choices)} choices for n={n}")
        parsed = [self.parse_choice(c) for c in choices]
        return prompt, [p[0] for p in parsed], [p[1] for p in parsed], [p[2] for p in parsed]


async def probe_token_server(server: Any, token_id: int, *, wait_s: float | None = None) -> None:
    """One 1-token generation from a one-token prompt, sent straight to ``server`` (no retries), so that a
    server that cannot serve this environment fails at start-up with the reason instead of in the first group.
    While nothing listens at the server's address (it is still starting), the probe waits and tries again, up
    to ``wait_s`` seconds (default: the server config's ``timeout``), as Atropos waits for a healthy server.

    Raises:
        AtroposSetupError: a :class:`CompletionsTokenServer` whose server answers without token ids or
            refuses the request; a ``vllm`` server (Atropos's ``VLLMServer``) without ``POST /generate``;
            no answer within ``wait_s``.
    """
    if not isinstance(server, (CompletionsTokenServer, VLLMServer)):
        return
    url = str(server.config.base_url)
    deadline = asyncio.get_running_loop().time() + float(server.config.timeout if wait_s is None else wait_s)
    waited = False
    while True:
        try:
            await _probe_once(server, token_id)
            return
        except AtroposSetupError:
            raise
        except aiohttp.ClientResponseError as exc:
            raise AtroposSetupError(
                f"the policy server {url} refused a 1-token probe (HTTP {exc.status}: {exc.message}); check "
                "openai.base_url and openai.model_name (the name the server serves), and that the server type "
                "fits: openai = /v1/completions with token-id prompts and token ids back (vLLM's `vllm serve`), "
                "vllm = Atropos's vllm_api_server (POST /generate), sglang = SGLang's native /generate"
            ) from None
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            if asyncio.get_running_loop().time() >= deadline:
                raise AtroposSetupError(
                    f"the policy server {url} did not answer a 1-token probe ({type(exc).__name__}: {exc}); "
                    "is it running at openai.base_url?"
                ) from None
            if not waited:
                logger.info("waiting for the policy server at %s (%s)", url, type(exc).__name__)
                waited = True
            await asyncio.sleep(2.0)


async def _probe_once(server: Any, token_id: int) -> None:
    if isinstance(server, CompletionsTokenServer):
        _, ids, _, _ = await server._tokens_and_logprobs_completion_wrapper(
            input_ids=[int(token_id)], n=1, max_tokens=1, temperature=1.0, model=server.config.model_name
        )
        if len(ids) != 1 or len(ids[0]) != 1:
            raise AtroposSetupError(f"{server.completions_url} returned {ids!r} for max_tokens=1")
        return
    root = str(server.config.base_url).replace("/v1", "")
    body = {"prompt": {"prompt_token_ids": [int(token_id)]}, "logprobs": 0, "max_tokens": 1}
    async with aiohttp.ClientSession() as session:
        async with session.post(
            f"{root}/generate", json=body, timeout=aiohttp.ClientTimeout(total=server.config.timeout)
        ) as response:
            if response.status == 404:
                raise AtroposSetupError(
                    f"{root}/generate: 404. openai.server_type: vllm means Atropos's own "
                    "example_trainer/vllm_api_server.py (POST /generate); a standard vLLM server "
                    "(`vllm serve`) has no such route. Fix: set openai.server_type: openai to generate "
                    "through its /v1/completions with token ids"
                )
            response.raise_for_status()


def scored_item(trace: EpisodeTrace) -> dict:
    """One played episode as Atropos's per-sequence fields (``tokens``, ``masks``,
    ``inference_logprobs``, ``scores``, ``overrides``); see the module docstring."""
    prompt = list(trace.prompt_ids)
    tokens = prompt + list(trace.completion_ids)
    masks = [-100] * len(prompt) + [t if m else -100 for t, m in zip(trace.completion_ids, trace.env_mask)]
    logprobs = [MASKED_LOGPROB] * len(prompt) + [
        float(lp) if m else MASKED_LOGPROB for lp, m in zip(trace.logprobs, trace.env_mask)
    ]
    return {
        "tokens": tokens,
        "masks": masks,
        "inference_logprobs": logprobs,
        "scores": float(trace.reward),
        "overrides": {"reasoning_env": trace.summary()},
    }


def scored_group(traces: list[EpisodeTrace], sampling: SamplingConfig) -> ScoredDataGroup:
    """A group of played episodes as one ``ScoredDataGroup``."""
    items = [scored_item(t) for t in traces]
    group = ScoredDataGroup()
    for key in ("tokens", "masks", "inference_logprobs", "scores", "overrides"):
        group[key] = [it[key] for it in items]
    group["generation_params"] = {"temperature": sampling.temperature, "top_p": sampling.top_p}
    return group


def _local_tokenizer_folder(name: str) -> str:
    """The folder ``name``'s tokenizer loads from (Atropos loads tokenizers with ``AutoTokenizer``, which
    knows neither embedded names nor this project's offline resolution). Raises ``TokenizerLoadError``."""
    return str(get_tokenizer(name).tokenizer.name_or_path)


def _servers_with_tokenizer(server_configs: Any, default_folder: str) -> Any:
    """Server configs whose ``tokenizer_name`` is a loadable folder: the policy's tokenizer where it
    says ``"none"``, its own tokenizer resolved to a folder otherwise."""

    def fix(cfg: ServerBaseline) -> ServerBaseline:
        name = cfg.tokenizer_name
        folder = default_folder if name in (None, "", "none") else _local_tokenizer_folder(name)
        return cfg.model_copy(update={"tokenizer_name": folder})

    if isinstance(server_configs, list):
        return [fix(c) for c in server_configs]
    return fix(server_configs)


class ReasoningEconomicsAtroposEnv(BaseEnv):
    """Reasoning Economics episodes for an Atropos trainer (see the module docstring)."""

    name = "reasoning_economics"
    env_config_cls = ReasoningEconomicsAtroposConfig

    def __init__(
        self,
        config: ReasoningEconomicsAtroposConfig,
        server_configs: ServerBaseline | list[APIServerConfig],
        slurm: bool = False,
        testing: bool = False,
    ) -> None:
        policy_tokenizer = config.tokenizer_name
        folder = _local_tokenizer_folder(policy_tokenizer)
        super().__init__(
            config.model_copy(update={"tokenizer_name": folder}),
            _servers_with_tokenizer(server_configs, folder),
            slurm=slurm,
            testing=testing,
        )
        self.config.tokenizer_name = policy_tokenizer  # the name sent to reset; the folder only loads it
        self.chat = ChatFormat(self.tokenizer, reasoning_mode=config.reasoning_mode)
        self.eos_ids = eos_token_ids(self.tokenizer)
        if not testing:
            # server_type: openai -> the same endpoint, spoken at token level (/v1/completions with token ids)
            self.server.servers = [self._token_level(s) if type(s) is OpenAIServer else s for s in self.server.servers]
        self.sampling = SamplingConfig(temperature=config.temperature, top_p=config.top_p)
        self.limits = RolloutLimits(
            max_episode_tokens=config.max_token_length,
            min_turn_tokens=config.min_turn_tokens,
            tokenizer_name=policy_tokenizer,
            total_budget=config.total_budget,
            turn_cap=TurnCap(config.turn_cap, factor=config.turn_factor),
        )
        self.env_factory: InProcessEnvFactory | None = None
        #: Index of the next group (its seed is ``config.seed + next_group``); saved in Atropos checkpoints.
        self.next_group = 0
        self._played: list[EpisodeTrace] = []
        # one thread per group in flight (Atropos runs up to max_num_workers groups at once); each waits on the
        # model server most of the time, so the default executor's few threads would queue groups needlessly
        self._episode_threads = ThreadPoolExecutor(
            max_workers=max(1, self.max_num_workers), thread_name_prefix="episode"
        )

    def _token_level(self, server: OpenAIServer) -> CompletionsTokenServer:
        token_server = CompletionsTokenServer(server.config, reasoning_config=server.reasoning_config)
        token_server.stop_token_ids = list(self.eos_ids)
        return token_server

    @classmethod
    def config_init(cls) -> tuple[ReasoningEconomicsAtroposConfig, list[APIServerConfig]]:
        """Defaults: the project's default policy tokenizer, groups of 8, one vLLM server on :9001."""
        env_config = ReasoningEconomicsAtroposConfig(
            tokenizer_name=DEFAULT_TOKENIZER_NAME,
            group_size=8,
            use_wandb=False,
            max_token_length=8192,
            wandb_name=cls.name,
            total_steps=1000,
            batch_size=64,
        )
        server = APIServerConfig(
            model_name=DEFAULT_TOKENIZER_NAME,
            base_url="http://localhost:9001/v1",
            api_key="x",
            server_type="openai",
        )
        return env_config, [server]

    async def setup(self) -> None:
        """Load the environment's config and question pools (a bad config fails here, with its reason)."""
        path = self.config.env_config_path
        env_config = EnvConfig.from_yaml(path) if path else EnvConfig()
        self.env_factory = InProcessEnvFactory(env_config)
        await asyncio.to_thread(self.env_factory.new_session().close)  # loads the pools and gold answers once
        for server in self.server.servers:
            await probe_token_server(server, self.eos_ids[0])
        if isinstance(self.server.servers[0], CompletionsTokenServer) and (
            self.config.temperature != 1.0 or self.config.top_p < 1.0
        ):
            logger.warning(
                "temperature %s / top_p %s: the trainer's inference_logprobs are the sampling distribution's only "
                "if the server reports processed log-probs (vLLM: --logprobs-mode processed_logprobs; its default "
                "raw_logprobs ignores temperature and top-p)",
                self.config.temperature,
                self.config.top_p,
            )

    async def get_next_item(self) -> dict:
        """The next group's episode: ``{"seed": config.seed + k}`` for the k-th group."""
        item = {"seed": int(self.config.seed) + self.next_group, "group": self.next_group}
        self.next_group += 1
        return item

    def save_checkpoint(self, step: int, data: dict | None = None) -> None:
        """Atropos's checkpoint plus the next group index, so a resumed run continues the seeds."""
        data = dict(data or {})
        data["next_group"] = self.next_group
        super().save_checkpoint(step, data)

    async def play(self, seed: int, n: int, group: int) -> list[EpisodeTrace]:
        """Play ``n`` episodes of ``seed`` in lockstep (one generate call per live episode and turn).

        Returns:
            ``n`` :class:`training.rollout.EpisodeTrace`, member order.
        """
        if self.env_factory is None:
            raise AtroposSetupError("setup() has not run: call it (BaseEnv's serve/process modes do) before play()")
        backend = AtroposServerBackend(self.server, asyncio.get_running_loop(), self.eos_ids, self.sampling)
        runner = EpisodeRunner(
            backend, self.env_factory, self.chat, limits=self.limits, run_id=f"atropos-{self.name}", policy="atropos"
        )
        specs = [EpisodeSpec(seed=int(seed), group=group, member=i, episode=group) for i in range(n)]
        return await asyncio.get_running_loop().run_in_executor(self._episode_threads, runner.play_lockstep, specs)

    async def collect_trajectories(self, item: dict) -> tuple[ScoredDataGroup, list]:
        """``group_size`` episodes of ``item["seed"]``, scored by the environment's rewards."""
        traces = await self.play(int(item["seed"]), self.config.group_size, int(item.get("group", 0)))
        self._played.extend(traces)
        return scored_group(traces, self.sampling), []

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        """No in-loop evaluation: evaluate a checkpoint with the project's own evaluation
        (``python -m workbench.evaluate``, docs/evaluation.md), which plays the same episode format."""
        logger.info("%s: no in-loop evaluation; use python -m workbench.evaluate on a checkpoint", self.name)

    async def wandb_log(self, wandb_metrics: dict | None = None) -> None:
        """Atropos's metrics plus the episodes played since the last log: mean reward, accuracy,
        tokens spent per question and the share of episodes that ran out of budget."""
        metrics = dict(wandb_metrics or {})
        played, self._played = self._played, []
        if played:
            metrics["train/episode_reward"] = sum(t.reward for t in played) / len(played)
            metrics["train/accuracy"] = sum(t.accuracy for t in played) / len(played)
            metrics["train/tokens_per_question"] = sum(t.tokens_per_question for t in played) / len(played)
            metrics["train/ran_dry"] = sum(t.ran_dry for t in played) / len(played)
        await super().wandb_log(metrics)


if __name__ == "__main__":
    ReasoningEconomicsAtroposEnv.cli()
