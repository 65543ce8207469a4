# SPDX-License-Identifier: Apache-2.0
"""llmsvc: the on-device LLM system service, from Python.

    import llmsvc
    with llmsvc.Service() as svc, svc.new_context(system_prompt="Be brief.") as ctx:
        print(ctx.call("What is the capital of France?").text)
        for piece in ctx.stream("And of Italy?"):
            print(piece.text, end="", flush=True)
        ctx.append([{"role": "user", "content": "And of Spain?"}])  # seed, then reply
        print(ctx.generate().text, ctx.messages()[-1])

ctypes over libllmsvc.so.1 ($LLMSVC_LIBRARY to name another file); every failure raises an
llmsvc.Error subclass carrying the C status and its detail.
"""
from .context import Context, ContextInfo, FinishReason, Message, Piece, Reply, Role, Stream
from .errors import (BusyError, CancelledError, ContextOverflowError, Error, ExistsError, InternalError,
                     InvalidArgumentError, InvalidUtf8Error, ModelInvalidError, ModelMismatchError, ModelNotFoundError,
                     NotFoundError, OutOfMemoryError, QuotaExceededError, StorageError, UnavailableError,
                     UnsupportedError)
from .service import ModelInfo, Service, SpecialToken, Stats, WeightType, abi_version

__all__ = [
    "Service", "Context", "Stream", "Piece", "Reply", "FinishReason", "Message", "Role", "ContextInfo", "ModelInfo", "SpecialToken",
    "WeightType", "Stats", "abi_version", "Error", "InvalidArgumentError", "InvalidUtf8Error", "ModelNotFoundError",
    "ModelInvalidError", "UnsupportedError", "OutOfMemoryError", "ContextOverflowError", "NotFoundError",
    "ExistsError", "CancelledError", "BusyError", "StorageError", "UnavailableError", "QuotaExceededError",
    "InternalError", "ModelMismatchError",
]
