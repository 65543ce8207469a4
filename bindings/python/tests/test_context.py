# SPDX-License-Identifier: Apache-2.0
"""Contexts: lifecycle, persistence across bindings, and the errors a mistake gets."""
import threading

import pytest

import llmsvc


def test_lifecycle(svc, fresh_id):
    with svc.new_context(fresh_id, system_prompt="You are terse.") as ctx:
        assert ctx.id == fresh_id
        assert fresh_id in svc.contexts()
        with pytest.raises(llmsvc.ExistsError):
            svc.new_context(fresh_id)
        with pytest.raises(llmsvc.BusyError):
            svc.delete_context(fresh_id)  # a handle is open
        ctx.call("Hello!", max_tokens=4)
        info = ctx.info()
        assert info.id == fresh_id and not info.raw and info.turns == 1 and info.tokens > 0
        assert info.chunks_total == info.chunks_resident + info.chunks_swapped + info.chunks_dropped
    svc.delete_context(fresh_id)
    assert fresh_id not in svc.contexts()
    with pytest.raises(llmsvc.NotFoundError):
        svc.open_context(fresh_id)


def test_a_context_persists_across_bindings(target, fresh_id):
    with llmsvc.Service(target, n_threads=2) as a:
        with a.new_context(fresh_id, system_prompt="Remember what you are told.") as ctx:
            ctx.call("My name is Ada.", max_tokens=8)
            tokens = ctx.info().tokens
    with llmsvc.Service(target, n_threads=2) as b:
        with b.open_context(fresh_id) as ctx:
            assert ctx.info().tokens == tokens and ctx.info().turns == 1
            r = ctx.call("What is my name?", max_tokens=12)
            # The history went in with the new turn: the reply's context holds both turns.
            assert r.context_tokens > tokens + r.prompt_tokens - 1 and ctx.info().turns == 2
        b.delete_context(fresh_id)


def test_generated_ids_are_fresh_and_valid(svc):
    with svc.new_context() as ctx:
        cid = ctx.id
        assert cid and len(cid) <= 64
    svc.delete_context(cid)


def test_bad_input_gets_a_clear_error(svc, embedded):
    with pytest.raises(llmsvc.InvalidArgumentError) as e:
        svc.new_context("no/slashes")
    assert e.value.name == "LLMSVC_ERR_INVALID_ARGUMENT" and e.value.detail
    with pytest.raises(llmsvc.NotFoundError):
        svc.context_info("py-no-such-context")
    if embedded:
        with pytest.raises(llmsvc.InvalidArgumentError):
            llmsvc.Service("embedded", kv_ratio=2.0)
        with pytest.raises(llmsvc.ModelNotFoundError):
            llmsvc.Service("embedded", model_path="/nonexistent/model.gguf")
    with pytest.raises(llmsvc.UnavailableError):
        llmsvc.Service("unix:/nonexistent/llmsvc.sock")


def test_a_closed_handle_is_refused(svc, fresh_id):
    ctx = svc.new_context(fresh_id)
    ctx.close()
    with pytest.raises(ValueError):
        ctx.call("Hello")
    svc.delete_context(fresh_id)


def test_two_threads_call_two_contexts(svc, fresh_id):
    replies = {}

    def run(k):
        with svc.new_context(f"{fresh_id}-{k}") as ctx:
            replies[k] = ctx.call("Name a planet.", max_tokens=8)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert replies[0].tokens == replies[1].tokens and replies[0].generated_tokens > 0  # greedy, same state
    for k in range(2):
        svc.delete_context(f"{fresh_id}-{k}")
