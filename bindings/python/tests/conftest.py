# SPDX-License-Identifier: Apache-2.0
"""The target the suite runs against: LLMSVC_PY_TARGET=embedded (default; the engine in this
process, state in a fresh directory) or daemon (a real llmsvcd, the binary named by $LLMSVCD,
started on a fresh socket for the session and stopped with SIGTERM: it must exit 0).
LLMSVC_PY_ADAPTER names a LoRA adapter for the model that the service offers as "suite"."""
import os
import subprocess
import tempfile
import time
from typing import Iterator

import pytest

import llmsvc


ADAPTER = os.environ.get("LLMSVC_PY_ADAPTER", "")


def _start_daemon(binary: str, root: str) -> "subprocess.Popen[bytes]":
    sock = os.path.join(root, "s.sock")
    args = [binary, "--listen", sock, "--state-dir", os.path.join(root, "state"), "--threads", "2"]
    if ADAPTER:
        config = os.path.join(root, "llmsvcd.toml")
        with open(config, "w") as f:
            f.write(f'[adapters]\nsuite = "{ADAPTER}"\n')
        args += ["--config", config]
    if os.getuid() == 0:
        args.append("--allow-root")  # it drops every capability; as root (CI) it must be told
    log = open(os.path.join(root, "llmsvcd.log"), "wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with open(os.path.join(root, "llmsvcd.log"), "rb") as f:
            if b"listening on" in f.read():
                return proc
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    with open(os.path.join(root, "llmsvcd.log"), "rb") as f:
        raise RuntimeError("llmsvcd did not start:\n" + f.read().decode(errors="replace"))


@pytest.fixture(scope="session")
def target() -> Iterator[str]:
    kind = os.environ.get("LLMSVC_PY_TARGET", "embedded")
    with tempfile.TemporaryDirectory(prefix="llmsvc-py-") as root:
        if kind == "embedded":
            os.environ["LLMSVC_STATE_DIR"] = os.path.join(root, "state")
            yield "embedded"
            return
        assert kind == "daemon", f"LLMSVC_PY_TARGET: {kind}"
        proc = _start_daemon(os.environ["LLMSVCD"], root)
        try:
            yield "unix:" + os.path.join(root, "s.sock")
        finally:
            proc.terminate()
            assert proc.wait(timeout=60) == 0, open(os.path.join(root, "llmsvcd.log")).read()


@pytest.fixture(scope="session")
def embedded(target: str) -> bool:
    return target == "embedded"


@pytest.fixture
def svc(target: str) -> Iterator[llmsvc.Service]:
    adapters = {"suite": ADAPTER} if ADAPTER and target == "embedded" else None
    with llmsvc.Service(target, n_threads=2, adapters=adapters) as s:
        yield s


_ids = iter(range(1 << 30))


@pytest.fixture
def fresh_id() -> str:
    return f"py-{os.getpid()}-{next(_ids)}"
