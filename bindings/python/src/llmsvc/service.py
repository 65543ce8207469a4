# SPDX-License-Identifier: Apache-2.0
"""A bound service (embedded engine or the llmsvcd daemon): contexts, model information, token
counts and statistics."""
from __future__ import annotations

import ctypes
import json
from dataclasses import dataclass
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _lib
from ._handle import Handle
from .context import _ADAPTERS_ABI, Context, ContextInfo, Message, MessageLike, message_array
from .errors import UnsupportedError, check, require


@dataclass(frozen=True)
class SpecialToken:
    id: int  # -1: the model has none
    text: str


@dataclass(frozen=True)
class WeightType:
    name: str  # GGUF type name, e.g. "Q4_1"
    tensors: int
    bytes: int


@dataclass(frozen=True)
class ModelInfo:
    """llmsvc_model_info: the service's model, and whether calls are served (`ready`)."""
    ready: bool
    architecture: str
    name: str
    n_params: int
    n_ctx_train: int
    n_ctx: int
    n_vocab: int
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    weight_bytes: int
    weight_types: List[WeightType]
    has_chat_template: bool
    bos: SpecialToken
    eos: SpecialToken
    eot: SpecialToken
    devices: List[str]


@dataclass(frozen=True)
class Stats:
    """llmsvc_stats: this service's (through llmsvcd: this app's) counters."""
    open_contexts: int
    known_contexts: int
    calls: int
    prompt_tokens: int
    generated_tokens: int
    kv_bytes: int
    weight_bytes: int
    kv_peak_bytes: int
    chunks_loaded: int
    chunks_recomputed: int
    swap_out_bytes: int
    swap_out_failures: int


def _need_adapters() -> None:
    if _lib.lib.llmsvc_abi_version() < _ADAPTERS_ABI or not _lib.has("llmsvc_adapter_list"):
        raise UnsupportedError(5, "the loaded libllmsvc is older than LoRA adapters (ABI 1.6)")


def _opt(s: Optional[str]) -> Optional[bytes]:
    return s.encode("utf-8") if s is not None else None


def _special(t: _lib.SpecialToken) -> SpecialToken:
    return SpecialToken(t.id, _lib.text(t.text))


class Service(Handle):
    """A binding to llmsvc: `target` "embedded" (the engine in this process; the other
    arguments configure it) or "unix:PATH" (llmsvcd); None: $LLMSVC_TARGET, else embedded.
    Use it as a context manager, or close() it."""

    def __init__(self, target: Optional[str] = None, *, model_path: Optional[str] = None, n_threads: int = 0,
                 n_ctx: int = 0, chunk_tokens: int = 0, state_dir: Optional[str] = None,
                 recompute_on_model_change: bool = False, kv_budget_bytes: int = 0, kv_ratio: float = 0.0,
                 device: Optional[str] = None, adapters: Optional[Mapping[str, str]] = None) -> None:
        o = _lib.new_struct(_lib.BindOptions, "llmsvc_bind_options_init")
        o.target, o.model_path, o.state_dir, o.device = _opt(target), _opt(model_path), _opt(state_dir), _opt(device)
        if adapters:  # embedded: the LoRA adapters offered, {name: GGUF path}
            _need_adapters()
            for name, path in adapters.items():
                if ";" in name + path or "=" in name:
                    raise ValueError(f"adapter {name!r}: a name or path with ';' (or a name with '=')")
            o.adapters = ";".join(f"{n}={p}" for n, p in adapters.items()).encode("utf-8")
        o.n_threads, o.n_ctx, o.chunk_tokens = n_threads, n_ctx, chunk_tokens
        o.recompute_on_model_change, o.kv_budget_bytes, o.kv_ratio = int(recompute_on_model_change), kv_budget_bytes, kv_ratio
        handle = ctypes.c_void_p()
        check(_lib.lib.llmsvc_bind(ctypes.byref(o), ctypes.byref(handle)))
        # close() unbinds; contexts still open stay usable (they keep the engine alive).
        super().__init__(handle.value, _lib.lib.llmsvc_unbind, "the service")

    def __enter__(self) -> "Service":
        return self

    # -------------------------------------------------------------- contexts

    def new_context(self, id: Optional[str] = None, *, system_prompt: Optional[str] = None,
                    raw: bool = False, tools: Optional[Union[str, Sequence[Mapping[str, Any]]]] = None,
                    adapter: Optional[str] = None) -> Context:
        """A new persistent context (`id` None: a fresh one is generated). `tools`: the tools its
        conversation may call, OpenAI-style ({"type": "function", "function": {"name",
        "description", "parameters"}}), as a list or its JSON text; replies are parsed for calls
        (Reply.tool_calls, Message.tool_calls) and results go back as Role.TOOL messages.
        `adapter`: the LoRA adapter (one of adapters()) every call of the context runs with."""
        o = _lib.new_struct(_lib.ContextOptions, "llmsvc_context_options_init")
        o.id, o.system_prompt, o.raw = _opt(id), _opt(system_prompt), int(raw)
        if adapter:
            _need_adapters()
            o.adapter = adapter.encode("utf-8")
        if tools is not None:
            if _lib.lib.llmsvc_abi_version() < ((1 << 16) | 4):
                raise UnsupportedError(5, "the loaded libllmsvc is older than tools (ABI 1.4)")
            o.tools_json = (tools if isinstance(tools, str) else json.dumps(list(tools))).encode("utf-8")
        handle = ctypes.c_void_p()
        check(_lib.lib.llmsvc_context_new(self._h(), ctypes.byref(o), ctypes.byref(handle)))
        return Context(self, handle.value)

    def open_context(self, id: str) -> Context:
        """Reopens an existing context (NotFoundError when there is none)."""
        handle = ctypes.c_void_p()
        check(_lib.lib.llmsvc_context_open(self._h(), id.encode("utf-8"), ctypes.byref(handle)))
        return Context(self, handle.value)

    def delete_context(self, id: str) -> None:
        """Deletes a context and its state (BusyError while a handle to it is open)."""
        check(_lib.lib.llmsvc_context_delete(self._h(), id.encode("utf-8")))

    def context_info(self, id: str) -> ContextInfo:
        info = _lib.new_struct(_lib.ContextInfo, "llmsvc_context_info_init")
        check(_lib.lib.llmsvc_context_info_get(self._h(), id.encode("utf-8"), ctypes.byref(info)))
        return ContextInfo._of(info)

    def contexts(self) -> List[str]:
        """The ids of the contexts this service holds for the app, in order."""
        ids: List[str] = []

        @_lib.CONTEXT_FN
        def each(cid: bytes, _user: object) -> int:
            ids.append(_lib.text(cid))
            return 0

        check(_lib.lib.llmsvc_context_list(self._h(), each, None))
        return ids

    # -------------------------------------------------------------- model, tokens, stats

    def adapters(self) -> List[str]:
        """The LoRA adapters the service offers, by name (embedded: the adapters given to the
        constructor; through llmsvcd: its configuration's)."""
        _need_adapters()
        names: List[str] = []

        @_lib.CONTEXT_FN
        def add(name: bytes, _user: object) -> int:
            names.append(name.decode("utf-8"))
            return 0

        check(_lib.lib.llmsvc_adapter_list(self._h(), add, None))
        return names

    def model_info(self) -> ModelInfo:
        """The service's model; `ready` says whether calls are served now (ABI 1.2)."""
        require("llmsvc_model_info_get")
        i = _lib.new_struct(_lib.ModelInfo, "llmsvc_model_info_init")
        check(_lib.lib.llmsvc_model_info_get(self._h(), ctypes.byref(i)))
        types = [WeightType(_lib.text(w.name), w.tensors, w.bytes) for w in i.weight_types[:i.n_weight_types]]
        devices = [d for d in _lib.text(i.devices).split(",") if d]
        return ModelInfo(bool(i.ready), _lib.text(i.architecture), _lib.text(i.name), i.n_params, i.n_ctx_train,
                         i.n_ctx, i.n_vocab, i.n_layer, i.n_embd, i.n_head, i.n_head_kv, i.weight_bytes, types,
                         bool(i.has_chat_template), _special(i.bos), _special(i.eos), _special(i.eot), devices)

    def count_tokens(self, text: str = "", *, chat: bool = False, first_turn: bool = False,
                     system_prompt: Optional[str] = None, messages: Optional[Iterable["MessageLike"]] = None) -> int:
        """The tokens `text` adds as a prompt (chat: as a user turn, with the template's tokens;
        first_turn: as a new context's first prompt, BOS and system turn included) (ABI 1.2).
        With `messages` (chat only, no text; ABI 1.3): what Context.append stores for them."""
        return self._count(text, chat, first_turn, system_prompt, 0, messages)[0]

    def tokenize(self, text: str, *, chat: bool = False, first_turn: bool = False,
                 system_prompt: Optional[str] = None) -> List[int]:
        """The token ids count_tokens() counts, as a call would feed them (ABI 1.2)."""
        n, ids = self._count(text, chat, first_turn, system_prompt, 256)
        if n > len(ids):
            n, ids = self._count(text, chat, first_turn, system_prompt, n)
        return ids[:n]

    def _count(self, text: str, chat: bool, first_turn: bool, system_prompt: Optional[str],
               capacity: int, messages: Optional[Iterable["MessageLike"]] = None) -> Tuple[int, List[int]]:
        require("llmsvc_count_tokens")
        o = _lib.new_struct(_lib.CountOptions, "llmsvc_count_options_init")
        o.chat, o.first_turn, o.system_prompt = int(chat), int(first_turn), _opt(system_prompt)
        keep = None
        if messages is not None:
            keep = message_array([Message.of(m) for m in messages])  # alive until the call returns
            o.messages, o.n_messages = keep[0], len(keep[1])
        buf = (ctypes.c_int32 * max(1, capacity))()
        if capacity:
            o.ids, o.ids_capacity = ctypes.cast(buf, ctypes.POINTER(ctypes.c_int32)), capacity
        data = text.encode("utf-8")
        count = ctypes.c_int32()
        check(_lib.lib.llmsvc_count_tokens(self._h(), data, len(data), ctypes.byref(o), ctypes.byref(count)))
        return count.value, list(buf[:min(count.value, capacity)])

    def stats(self) -> Stats:
        s = _lib.new_struct(_lib.Stats, "llmsvc_stats_init")
        check(_lib.lib.llmsvc_get_stats(self._h(), ctypes.byref(s)))
        return Stats(s.open_contexts, s.known_contexts, s.calls, s.prompt_tokens, s.generated_tokens, s.kv_bytes,
                     s.weight_bytes, s.kv_peak_bytes, s.chunks_loaded, s.chunks_recomputed, s.swap_out_bytes,
                     s.swap_out_failures)


def abi_version() -> Tuple[int, int]:
    """The loaded library's ABI (major, minor)."""
    v = _lib.lib.llmsvc_abi_version()
    return v >> 16, v & 0xFFFF
