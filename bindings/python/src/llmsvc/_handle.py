# SPDX-License-Identifier: Apache-2.0
"""An owned handle of the C API (internal): released once, by close(), `with` or collection."""
from __future__ import annotations

from typing import Callable, Optional


class Handle:
    def __init__(self, handle: int, release: Callable[[int], None], what: str) -> None:
        self._handle: Optional[int] = handle
        self._release = release
        self._what = what

    def close(self) -> None:
        if self._handle is not None:
            self._release(self._handle)
            self._handle = None

    def _h(self) -> int:
        if self._handle is None:
            raise ValueError(f"llmsvc: {self._what} is closed")
        return self._handle

    def __enter__(self):  # type: ignore[no-untyped-def]
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass
