# SPDX-License-Identifier: Apache-2.0
"""Exceptions for llmsvc status codes: every failure of the C API raises one, carrying the
status's name and llmsvc_last_error()'s detail."""
from __future__ import annotations

from typing import Dict, Type

from . import _lib


class Error(Exception):
    """A failed llmsvc call: `status` (the C status code), `name` (e.g. "LLMSVC_ERR_NOT_FOUND")
    and `detail` (the library's explanation)."""

    status = 15

    def __init__(self, status: int, detail: str) -> None:
        self.status = status
        self.name = _lib.text(_lib.lib.llmsvc_status_name(status))
        self.detail = detail
        super().__init__(f"{self.name}: {detail}" if detail else self.name)


class InvalidArgumentError(Error, ValueError):
    status = 1


class InvalidUtf8Error(Error, ValueError):
    status = 2


class ModelNotFoundError(Error):
    status = 3


class ModelInvalidError(Error):
    status = 4


class UnsupportedError(Error):
    status = 5


class OutOfMemoryError(Error, MemoryError):
    status = 6


class ContextOverflowError(Error):
    status = 7


class NotFoundError(Error, KeyError):
    status = 8

    def __str__(self) -> str:  # KeyError would quote the message
        return Exception.__str__(self)


class ExistsError(Error):
    status = 9


class CancelledError(Error):
    """The call was cancelled; `result` holds what it did (its tokens stay in the context)."""

    status = 10
    result = None


class BusyError(Error):
    status = 11


class StorageError(Error, OSError):
    status = 12


class UnavailableError(Error, ConnectionError):
    status = 13


class QuotaExceededError(Error):
    status = 14


class InternalError(Error):
    status = 15


class ModelMismatchError(Error):
    status = 16


_BY_STATUS: Dict[int, Type[Error]] = {
    c.status: c
    for c in (InvalidArgumentError, InvalidUtf8Error, ModelNotFoundError, ModelInvalidError, UnsupportedError, OutOfMemoryError,
              ContextOverflowError, NotFoundError, ExistsError, CancelledError, BusyError, StorageError,
              UnavailableError, QuotaExceededError, InternalError, ModelMismatchError)
}


def check(status: int) -> None:
    """Raises the exception for `status` (0, LLMSVC_OK, returns)."""
    if status == 0:
        return
    raise _BY_STATUS.get(status, Error)(status, _lib.text(_lib.lib.llmsvc_last_error()))


def require(function: str) -> None:
    """UnsupportedError when the loaded library is older than `function`."""
    if not _lib.has(function):
        raise UnsupportedError(5, f"the loaded libllmsvc has no {function} (it is older than this binding)")
