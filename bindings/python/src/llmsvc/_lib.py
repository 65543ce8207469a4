# SPDX-License-Identifier: Apache-2.0
"""ctypes declarations of include/llmsvc/llmsvc.h and the loaded library (internal).

Structs are declared as the header has them; ``new_struct`` makes one the way the ABI asks:
the library's ``_init`` fills the defaults (into room larger than this module's struct, so a
newer library cannot write past it), then ``struct_size`` says how much of it this module
knows, so a newer library reads only that and an older one ignores the tail.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int, c_int32,
                    c_size_t, c_uint32, c_uint64, c_void_p)
from typing import Optional, Type, TypeVar

# ------------------------------------------------------------------ structs (llmsvc.h order)


class BindOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("target", c_char_p), ("model_path", c_char_p),
                ("n_threads", c_int32), ("n_ctx", c_int32), ("chunk_tokens", c_int32), ("state_dir", c_char_p),
                ("recompute_on_model_change", c_int32), ("kv_budget_bytes", c_uint64), ("kv_ratio", c_float),
                ("device", c_char_p), ("adapters", c_char_p)]


class ContextOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("id", c_char_p), ("system_prompt", c_char_p), ("raw", c_int32),
                ("tools_json", c_char_p), ("adapter", c_char_p)]


class ContextInfo(Structure):
    _fields_ = [("struct_size", c_size_t), ("id", c_char * 65), ("raw", c_int32), ("tokens", c_int32),
                ("turns", c_int32), ("chunks_total", c_int32), ("chunks_resident", c_int32),
                ("chunks_swapped", c_int32), ("chunks_dropped", c_int32), ("kv_resident_bytes", c_uint64),
                ("chunks_f16", c_int32), ("chunks_q8", c_int32), ("chunks_q4", c_int32), ("chunks_q2", c_int32),
                ("chunks_q3", c_int32), ("padding_1_4", c_int32), ("chunks_shared", c_int32)]


class Piece(Structure):
    _fields_ = [("struct_size", c_size_t), ("text", c_void_p), ("len", c_size_t), ("tokens", POINTER(c_int32)),
                ("n_tokens", c_size_t), ("logprobs", POINTER(c_float))]


TOKEN_FN = CFUNCTYPE(c_int, c_void_p, c_size_t, c_int32, c_void_p)
PIECE_FN = CFUNCTYPE(c_int, POINTER(Piece), c_void_p)
CONTEXT_FN = CFUNCTYPE(c_int, c_char_p, c_void_p)


class CallOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("seed", c_uint64), ("temperature", c_float), ("top_k", c_int32),
                ("top_p", c_float), ("min_p", c_float), ("repeat_penalty", c_float), ("repeat_last_n", c_int32),
                ("max_tokens", c_int32), ("stop", POINTER(c_char_p)), ("n_stop", c_size_t),
                ("slo_ttft_ratio", c_float), ("slo_tpot_ratio", c_float), ("on_tokens", PIECE_FN),
                ("on_tokens_user", c_void_p), ("logprobs", c_int32), ("json_schema", c_char_p), ("grammar", c_char_p),
                ("level_percent", c_int32), ("adapter", c_char_p), ("prompt_keep", c_float)]


class CallResult(Structure):
    _fields_ = [("struct_size", c_size_t), ("prompt_tokens", c_int32), ("generated_tokens", c_int32),
                ("context_tokens", c_int32), ("finish_reason", c_int32), ("switch_in_ms", c_double),
                ("ttft_ms", c_double), ("prefill_ms", c_double), ("decode_ms", c_double), ("tpot_ms", c_double),
                ("chunks_loaded", c_int32), ("chunks_recomputed", c_int32), ("constrain_ms", c_double),
                ("tool_calls", c_int32), ("tool_call_errors", c_int32), ("level_percent", c_int32),
                ("slo_missed", c_int32), ("prompt_kept", c_double)]


class Stats(Structure):
    _fields_ = [("struct_size", c_size_t), ("open_contexts", c_int32), ("known_contexts", c_int32),
                ("calls", c_uint64), ("prompt_tokens", c_uint64), ("generated_tokens", c_uint64),
                ("kv_bytes", c_uint64), ("weight_bytes", c_uint64), ("kv_peak_bytes", c_uint64),
                ("chunks_loaded", c_uint64), ("chunks_recomputed", c_uint64), ("swap_out_bytes", c_uint64),
                ("swap_out_failures", c_uint64)]


MAX_WEIGHT_TYPES = 8


class WeightType(Structure):
    _fields_ = [("name", c_char * 16), ("tensors", c_int32), ("bytes", c_uint64)]


class SpecialToken(Structure):
    _fields_ = [("id", c_int32), ("text", c_char * 257)]


class ModelInfo(Structure):
    _fields_ = [("struct_size", c_size_t), ("ready", c_int32), ("architecture", c_char * 65), ("name", c_char * 257),
                ("n_params", c_uint64), ("n_ctx_train", c_int32), ("n_ctx", c_int32), ("n_vocab", c_int32),
                ("n_layer", c_int32), ("n_embd", c_int32), ("n_head", c_int32), ("n_head_kv", c_int32),
                ("weight_bytes", c_uint64), ("n_weight_types", c_int32),
                ("weight_types", WeightType * MAX_WEIGHT_TYPES), ("has_chat_template", c_int32), ("bos", SpecialToken),
                ("eos", SpecialToken), ("eot", SpecialToken), ("devices", c_char * 256)]


class Message(Structure):
    _fields_ = [("struct_size", c_size_t), ("role", c_int32), ("content", c_void_p), ("content_len", c_size_t),
                ("tool_calls", c_void_p), ("tool_calls_len", c_size_t)]


MESSAGE_FN = CFUNCTYPE(c_int, POINTER(Message), c_void_p)


class CountOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("chat", c_int32), ("first_turn", c_int32), ("system_prompt", c_char_p),
                ("ids", POINTER(c_int32)), ("ids_capacity", c_size_t), ("messages", POINTER(Message)),
                ("n_messages", c_size_t)]


# ------------------------------------------------------------------ the library


def _load() -> ctypes.CDLL:
    """$LLMSVC_LIBRARY, else libllmsvc.so.1 on the loader's path."""
    path = os.environ.get("LLMSVC_LIBRARY") or "libllmsvc.so.1"
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        found = ctypes.util.find_library("llmsvc")
        if found and found != path:
            return ctypes.CDLL(found)
        raise ImportError(f"llmsvc: cannot load {path} ({e}); install libllmsvc or set LLMSVC_LIBRARY") from e


lib = _load()
_status = c_int

_SIGNATURES = {
    "llmsvc_abi_version": (c_uint32, []),
    "llmsvc_status_name": (c_char_p, [_status]),
    "llmsvc_last_error": (c_char_p, []),
    "llmsvc_bind_options_init": (None, [POINTER(BindOptions)]),
    "llmsvc_bind": (_status, [POINTER(BindOptions), POINTER(c_void_p)]),
    "llmsvc_unbind": (None, [c_void_p]),
    "llmsvc_context_options_init": (None, [POINTER(ContextOptions)]),
    "llmsvc_context_new": (_status, [c_void_p, POINTER(ContextOptions), POINTER(c_void_p)]),
    "llmsvc_context_open": (_status, [c_void_p, c_char_p, POINTER(c_void_p)]),
    "llmsvc_context_id": (c_char_p, [c_void_p]),
    "llmsvc_context_close": (None, [c_void_p]),
    "llmsvc_context_delete": (_status, [c_void_p, c_char_p]),
    "llmsvc_context_info_init": (None, [POINTER(ContextInfo)]),
    "llmsvc_context_info_get": (_status, [c_void_p, c_char_p, POINTER(ContextInfo)]),
    "llmsvc_context_list": (_status, [c_void_p, CONTEXT_FN, c_void_p]),
    "llmsvc_context_cancel": (_status, [c_void_p]),
    "llmsvc_call_options_init": (None, [POINTER(CallOptions)]),
    "llmsvc_call_result_init": (None, [POINTER(CallResult)]),
    "llmsvc_call": (_status, [c_void_p, c_void_p, c_size_t, POINTER(CallOptions), TOKEN_FN, c_void_p,
                              POINTER(CallResult)]),
    "llmsvc_stats_init": (None, [POINTER(Stats)]),
    "llmsvc_get_stats": (_status, [c_void_p, POINTER(Stats)]),
    "llmsvc_model_info_init": (None, [POINTER(ModelInfo)]),
    "llmsvc_model_info_get": (_status, [c_void_p, POINTER(ModelInfo)]),
    "llmsvc_count_options_init": (None, [POINTER(CountOptions)]),
    "llmsvc_count_tokens": (_status, [c_void_p, c_void_p, c_size_t, POINTER(CountOptions), POINTER(c_int32)]),
    "llmsvc_message_init": (None, [POINTER(Message)]),
    "llmsvc_context_append": (_status, [c_void_p, POINTER(Message), c_size_t]),
    "llmsvc_context_generate": (_status, [c_void_p, POINTER(CallOptions), TOKEN_FN, c_void_p, POINTER(CallResult)]),
    "llmsvc_context_truncate": (_status, [c_void_p, c_size_t]),
    "llmsvc_context_messages": (_status, [c_void_p, c_size_t, MESSAGE_FN, c_void_p]),
    "llmsvc_context_fork": (_status, [c_void_p, c_char_p, POINTER(c_void_p)]),
    "llmsvc_adapter_list": (_status, [c_void_p, CONTEXT_FN, c_void_p]),
}

missing = []
for _name, (_res, _args) in _SIGNATURES.items():
    _fn = getattr(lib, _name, None)
    if _fn is None:  # an older library: the functions it lacks raise UnsupportedError when used
        missing.append(_name)
        continue
    _fn.restype = _res
    _fn.argtypes = _args


def has(name: str) -> bool:
    return name not in missing


S = TypeVar("S", bound=Structure)

# Room for a newer library's version of any struct: its _init writes its own size.
_ROOM = 4096


def new_struct(cls: Type[S], init: Optional[str]) -> S:
    """A zeroed `cls` inside _ROOM bytes, filled by the library's `init` where it has one, with
    struct_size set to this module's size of it."""
    buf = ctypes.create_string_buffer(max(_ROOM, ctypes.sizeof(cls)))
    s = cls.from_buffer(buf)
    s._room = buf  # keeps the buffer alive with the struct
    if init and has(init):
        getattr(lib, init)(ctypes.byref(s))
    s.struct_size = ctypes.sizeof(cls)
    return s


def text(b: Optional[bytes]) -> str:
    return b.decode("utf-8", errors="replace") if b else ""
