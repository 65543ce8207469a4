# SPDX-License-Identifier: Apache-2.0
"""A persistent context: calls (a whole reply, or a stream of pieces), its conversation of
messages, and what it holds."""
from __future__ import annotations

import ctypes
import enum
import json
import queue
import threading
from dataclasses import dataclass, field
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple,
                    Union)

from . import _lib
from ._handle import Handle
from .errors import CancelledError, Error, UnsupportedError, check, require

if TYPE_CHECKING:
    from .service import Service


class FinishReason(enum.IntEnum):
    """Why generation stopped (llmsvc_finish_reason)."""
    NONE = 0
    EOS = 1
    LENGTH = 2
    STOP = 3
    CANCELLED = 4
    CONTEXT_FULL = 5


class Role(enum.IntEnum):
    """A message's role (llmsvc_role)."""
    SYSTEM = 0
    USER = 1
    ASSISTANT = 2
    TOOL = 3


@dataclass(frozen=True)
class Message:
    """One message of a chat context's conversation. tool_calls: the calls an assistant reply
    of a context with tools made (OpenAI-style dicts: id, type, function with name and
    arguments), its content then the text around them; read back, and appended (an app's own
    history: the reply is stored as the model's template writes those calls)."""
    role: Role
    content: str
    tool_calls: Optional[List[Dict[str, Any]]] = None

    @staticmethod
    def of(m: "MessageLike") -> "Message":
        """A Message from a Message, a (role, content) pair or a {"role": ..., "content": ...}
        mapping (the role as a Role or its name: "user", "assistant", ...)."""
        if isinstance(m, Message):
            return m
        calls = None
        if isinstance(m, Mapping):
            role, content, calls = m["role"], m.get("content") or "", m.get("tool_calls")
        else:
            role, content = m
        if isinstance(role, str):
            try:
                role = Role[role.upper()]
            except KeyError:
                raise ValueError(f"no message role {role!r}") from None
        return Message(Role(role), content, list(calls) if calls else None)


MessageLike = Union[Message, Mapping[str, object], Sequence[object]]


def message_array(items: List[Message]) -> "Tuple[ctypes.Array[_lib.Message], List[bytes]]":
    """The messages as an llmsvc_message array, and the bytes it points into (keep both alive
    while the library reads them)."""
    data = [m.content.encode("utf-8") for m in items]
    calls = [json.dumps(m.tool_calls).encode("utf-8") if m.tool_calls else b"" for m in items]
    array = (_lib.Message * max(1, len(items)))()
    for i, (m, b, c) in enumerate(zip(items, data, calls)):
        _lib.lib.llmsvc_message_init(ctypes.byref(array[i]))
        array[i].struct_size = ctypes.sizeof(_lib.Message)
        array[i].role = int(m.role)
        array[i].content = ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p) if b else None
        array[i].content_len = len(b)
        array[i].tool_calls = ctypes.cast(ctypes.c_char_p(c), ctypes.c_void_p) if c else None
        array[i].tool_calls_len = len(c)
    array._tool_calls = calls  # type: ignore[attr-defined]  # kept alive with the array
    return array, data


@dataclass(frozen=True)
class Piece:
    """A streamed piece: valid UTF-8 text and the ids of the tokens behind it (with their
    log-probabilities when asked for). The pieces of a call together hold every generated token;
    a last piece with empty text may carry tokens whose text never streamed (the end of turn)."""
    text: str
    tokens: List[int]
    logprobs: Optional[List[float]] = None


@dataclass
class Reply:
    """What a call gave: the text, every generated token id (and log-probability when asked
    for), why it stopped, and the counts and times of llmsvc_call_result."""
    text: str = ""
    tokens: List[int] = field(default_factory=list)
    logprobs: Optional[List[float]] = None
    finish_reason: FinishReason = FinishReason.NONE
    prompt_tokens: int = 0
    generated_tokens: int = 0
    context_tokens: int = 0
    switch_in_ms: float = 0.0
    ttft_ms: float = 0.0
    prefill_ms: float = 0.0
    decode_ms: float = 0.0
    tpot_ms: float = 0.0
    chunks_loaded: int = 0
    chunks_recomputed: int = 0
    constrain_ms: float = 0.0
    tool_calls: int = 0  # calls parsed from the reply (a context with tools; read them from messages())
    tool_call_errors: int = 0  # 1: the reply started a call that did not parse (it stays text)
    level_percent: int = 0  # the elastic level the call ran at (100: the full model; 0 before ABI 1.5 / protocol 7)
    slo_missed: int = 0  # 1: the SLO ratios asked more than any level gives (the smallest ran)
    prompt_kept: float = 0.0  # the share of the prompt's tokens kept (1: none dropped; 0 before ABI 1.7 / protocol 9)

    def _take(self, r: _lib.CallResult) -> None:
        for name in ("prompt_tokens", "generated_tokens", "context_tokens", "switch_in_ms", "ttft_ms", "prefill_ms",
                     "decode_ms", "tpot_ms", "chunks_loaded", "chunks_recomputed", "constrain_ms", "tool_calls",
                     "tool_call_errors", "level_percent", "slo_missed", "prompt_kept"):
            setattr(self, name, getattr(r, name))
        self.finish_reason = FinishReason(r.finish_reason)


@dataclass(frozen=True)
class ContextInfo:
    """llmsvc_context_info: tokens, turns and the KV chunks by state and format; chunks_shared:
    the resident chunks it shares with a fork or its parent (0 from a library before ABI 1.4)."""
    id: str
    raw: bool
    tokens: int
    turns: int
    chunks_total: int
    chunks_resident: int
    chunks_swapped: int
    chunks_dropped: int
    kv_resident_bytes: int
    chunks_f16: int
    chunks_q8: int
    chunks_q4: int
    chunks_q3: int
    chunks_q2: int
    chunks_shared: int = 0

    @staticmethod
    def _of(i: _lib.ContextInfo) -> "ContextInfo":
        return ContextInfo(_lib.text(i.id), bool(i.raw), i.tokens, i.turns, i.chunks_total, i.chunks_resident,
                           i.chunks_swapped, i.chunks_dropped, i.kv_resident_bytes, i.chunks_f16, i.chunks_q8,
                           i.chunks_q4, i.chunks_q3, i.chunks_q2, i.chunks_shared)


_TOKEN_IDS_ABI = (1 << 16) | 2  # llmsvc_call_options.on_tokens
_MESSAGE_TOOLS_SIZE = ctypes.sizeof(_lib.Message)  # a library's llmsvc_message with tool_calls
_MESSAGES_ABI = (1 << 16) | 3  # llmsvc_context_append and the rest
_LEVELS_ABI = (1 << 16) | 5  # llmsvc_call_options.level_percent
_ADAPTERS_ABI = (1 << 16) | 6  # llmsvc_call_options.adapter
_KEEP_ABI = (1 << 16) | 7  # llmsvc_call_options.prompt_keep


def _need_messages() -> None:
    if _lib.lib.llmsvc_abi_version() < _MESSAGES_ABI or not _lib.has("llmsvc_context_append"):
        raise UnsupportedError(5, "the loaded libllmsvc is older than messages (ABI 1.3)")


class Context(Handle):
    """An open handle to a persistent context (`with` closes it; the context itself stays until
    Service.delete_context). One thread at a time may use it; cancel() works from any thread."""

    def __init__(self, service: "Service", handle: int) -> None:
        self._id = _lib.text(_lib.lib.llmsvc_context_id(handle))
        super().__init__(handle, _lib.lib.llmsvc_context_close, f"context {self._id!r}")
        self._service = service  # keeps the service, and its library state, alive

    @property
    def id(self) -> str:
        return self._id

    def __enter__(self) -> "Context":
        return self

    def info(self) -> ContextInfo:
        return self._service.context_info(self._id)

    def fork(self, id: Optional[str] = None) -> "Context":
        """A new context holding this one's tokens and conversation, opened (`id` None: a fresh
        one). It shares this context's KV memory until either goes on, and outlives it.
        BusyError inside a call on this context, ExistsError for an id in use."""
        require("llmsvc_context_fork")
        handle = ctypes.c_void_p()
        check(_lib.lib.llmsvc_context_fork(self._h(), id.encode("utf-8") if id is not None else None,
                                           ctypes.byref(handle)))
        return Context(self._service, handle.value)

    def cancel(self) -> None:
        """Cancels the call running on this context (none: nothing happens). Thread-safe."""
        if self._handle is not None:
            check(_lib.lib.llmsvc_context_cancel(self._handle))

    def append(self, messages: Iterable[MessageLike]) -> None:
        """Appends messages to the conversation without generating (user and assistant in turn,
        from a user message; all or none). Their KV is computed by the next call or generate()."""
        _need_messages()
        handle = self._h()
        array, data = message_array([Message.of(m) for m in messages])
        check(_lib.lib.llmsvc_context_append(handle, array, len(data)))

    def generate(self, **options: object) -> Reply:
        """The assistant's reply to the conversation, which ends with a user message (the options
        and the Reply of call(); prompt_tokens is 0). The reply becomes the next message."""
        _need_messages()
        return self._run(None, **options)  # type: ignore[arg-type]

    def truncate(self, n_messages: int) -> None:
        """Rewinds the conversation to its first n_messages (the KV before the cut is kept)."""
        _need_messages()
        check(_lib.lib.llmsvc_context_truncate(self._h(), n_messages))

    def messages(self, first: int = 0) -> List[Message]:
        """The conversation's messages from index `first`."""
        _need_messages()
        out: List[Message] = []

        @_lib.MESSAGE_FN
        def take(m: "ctypes._Pointer[_lib.Message]", _user: object) -> int:
            c = m.contents
            text = ctypes.string_at(c.content, c.content_len).decode("utf-8") if c.content_len else ""
            calls = None
            if c.struct_size >= _MESSAGE_TOOLS_SIZE and c.tool_calls_len:
                calls = json.loads(ctypes.string_at(c.tool_calls, c.tool_calls_len).decode("utf-8"))
            out.append(Message(Role(c.role), text, calls))
            return 0

        check(_lib.lib.llmsvc_context_messages(self._h(), first, take, None))
        return out

    def call(self, prompt: str, **options: object) -> Reply:
        """Appends `prompt` (a user turn, unless the context is raw) and generates the reply.
        Options: max_tokens (256), temperature (0: greedy), seed, top_k, top_p, min_p,
        repeat_penalty, repeat_last_n, stop (strings), logprobs (bool), json_schema (a JSON Schema,
        as a str or a dict) or grammar (GBNF) to hold the reply to, level (the elastic level in
        per cent: one of an elastic model's levels, 100 the full model; 0, the default: the
        service chooses; the Reply's level_percent says which ran), slo_ttft and slo_tpot (ratios of
        the full model's time to first token and per token: with level 0, the largest level
        predicted to meet both runs, with the least prompt compression that meets the TTFT ratio;
        the Reply's slo_missed is 1 when none can), keep (prompt compression: the share of the
        prompt's tokens to keep, in (0, 1], its least informative words dropped; 0: the service
        chooses; the Reply's prompt_kept says how much was kept), adapter (the name of
        a LoRA adapter the service offers to run this call with, in place of the context's), on_piece (sees each Piece as
        it streams; a true return value cancels the call). Cancelled: CancelledError, its
        `result` the Reply so far (kept in the context)."""
        return self._run(prompt, **options)  # type: ignore[arg-type]

    def _run(self, prompt: Optional[str], *, max_tokens: int = 256, temperature: float = 0.0, seed: int = 0, top_k: int = 0,
             top_p: float = 1.0, min_p: float = 0.0, repeat_penalty: float = 1.0, repeat_last_n: int = 64,
             stop: Sequence[str] = (), logprobs: bool = False, json_schema: Union[str, Mapping[str, object], None] = None,
             grammar: Optional[str] = None, level: int = 0, slo_ttft: float = 0.0, slo_tpot: float = 0.0,
             keep: float = 0.0, adapter: Optional[str] = None,
             on_piece: Optional[Callable[[Piece], object]] = None) -> Reply:
        """call(prompt), or generate() when prompt is None."""
        handle = self._h()
        reply = Reply(logprobs=[] if logprobs else None)
        pieces: List[str] = []
        failure: List[BaseException] = []
        want_ids = _lib.lib.llmsvc_abi_version() >= _TOKEN_IDS_ABI

        def deliver(piece: Piece) -> int:
            pieces.append(piece.text)
            reply.tokens.extend(piece.tokens)
            if reply.logprobs is not None and piece.logprobs is not None:
                reply.logprobs.extend(piece.logprobs)
            if on_piece is None:
                return 0
            try:
                return 1 if on_piece(piece) else 0
            except BaseException as e:  # re-raised once the call is back
                failure.append(e)
                return 1

        @_lib.PIECE_FN
        def on_tokens(p: "ctypes._Pointer[_lib.Piece]", _user: object) -> int:
            c = p.contents
            text = ctypes.string_at(c.text, c.len).decode("utf-8") if c.len else ""
            ids = [c.tokens[i] for i in range(c.n_tokens)]
            lps = [c.logprobs[i] for i in range(c.n_tokens)] if c.logprobs else None
            return deliver(Piece(text, ids, lps))

        @_lib.TOKEN_FN
        def on_text(ptr: int, n: int, token: int, _user: object) -> int:  # a library without token ids
            return deliver(Piece(ctypes.string_at(ptr, n).decode("utf-8"), [token]))

        o = _lib.new_struct(_lib.CallOptions, "llmsvc_call_options_init")
        o.seed, o.temperature, o.top_k, o.top_p, o.min_p = seed, temperature, top_k, top_p, min_p
        o.repeat_penalty, o.repeat_last_n, o.max_tokens = repeat_penalty, repeat_last_n, max_tokens
        o.slo_ttft_ratio, o.slo_tpot_ratio = slo_ttft, slo_tpot
        stops = [s.encode("utf-8") for s in stop]
        stop_array = (ctypes.c_char_p * max(1, len(stops)))(*stops)
        o.stop, o.n_stop = (stop_array if stops else None), len(stops)
        if json_schema is not None or grammar is not None:
            _need_messages()  # structured output came with ABI 1.3
            if json_schema is not None and not isinstance(json_schema, str):
                json_schema = json.dumps(json_schema)
            o.json_schema = json_schema.encode("utf-8") if json_schema is not None else None
            o.grammar = grammar.encode("utf-8") if grammar is not None else None
        if level:
            if _lib.lib.llmsvc_abi_version() < _LEVELS_ABI:  # an older library would not read the field
                raise UnsupportedError(5, "the loaded libllmsvc is older than elastic levels (ABI 1.5)")
            o.level_percent = level
        if keep:
            if _lib.lib.llmsvc_abi_version() < _KEEP_ABI:
                raise UnsupportedError(5, "the loaded libllmsvc is older than prompt compression (ABI 1.7)")
            o.prompt_keep = keep
        if adapter:
            if _lib.lib.llmsvc_abi_version() < _ADAPTERS_ABI:
                raise UnsupportedError(5, "the loaded libllmsvc is older than LoRA adapters (ABI 1.6)")
            o.adapter = adapter.encode("utf-8")
        if want_ids:
            o.on_tokens, o.logprobs = on_tokens, int(logprobs)
        elif logprobs:
            raise UnsupportedError(5, "the loaded libllmsvc is older than log-probabilities (ABI 1.2)")
        result = _lib.new_struct(_lib.CallResult, "llmsvc_call_result_init")
        text_fn = _lib.TOKEN_FN() if want_ids else on_text
        if prompt is None:
            status = _lib.lib.llmsvc_context_generate(handle, ctypes.byref(o), text_fn, None, ctypes.byref(result))
        else:
            data = prompt.encode("utf-8")
            status = _lib.lib.llmsvc_call(handle, data, len(data), ctypes.byref(o), text_fn, None,
                                          ctypes.byref(result))
        reply.text = "".join(pieces)
        if failure:
            raise failure[0]
        if status == CancelledError.status:
            reply._take(result)
            try:
                check(status)
            except CancelledError as e:
                e.result = reply
                raise
        check(status)
        reply._take(result)
        return reply

    def stream(self, prompt: Optional[str] = None, **options: object) -> "Stream":
        """The reply as an iterator of Pieces (the call runs on a thread of its own); leaving the
        loop early cancels the call. After the last piece, `Stream.reply` holds the Reply.
        Without a prompt: the reply to the conversation, as generate()."""
        if prompt is None:
            _need_messages()
        return Stream(self, prompt, options)


class Stream:
    """Iterator over a call's pieces (see Context.stream); a context manager that cancels the
    call on exit if it is still running."""

    _END = object()

    def __init__(self, context: Context, prompt: Optional[str], options: dict) -> None:
        self._context = context
        self._queue: "queue.Queue[object]" = queue.Queue()
        self._stop = threading.Event()
        self.reply: Optional[Reply] = None
        self._error: Optional[BaseException] = None

        def on_piece(piece: Piece) -> bool:
            self._queue.put(piece)
            return self._stop.is_set()

        def run() -> None:
            try:
                self.reply = context._run(prompt, on_piece=on_piece, **options)  # type: ignore[arg-type]
            except CancelledError as e:
                self.reply = e.result
                if not self._stop.is_set():
                    self._error = e
            except BaseException as e:
                self._error = e
            finally:
                self._queue.put(Stream._END)

        self._thread = threading.Thread(target=run, name="llmsvc-stream", daemon=True)
        self._thread.start()

    def __iter__(self) -> Iterator[Piece]:
        while True:
            item = self._queue.get()
            if item is Stream._END:
                self._thread.join()
                if self._error is not None:
                    raise self._error
                return
            yield item  # type: ignore[misc]

    def close(self) -> None:
        """Cancels the call if it still runs and waits for it."""
        if self._thread.is_alive():
            self._stop.set()
            try:
                self._context.cancel()
            except Error:
                pass
            self._thread.join()

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
