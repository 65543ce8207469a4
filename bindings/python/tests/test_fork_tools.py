# SPDX-License-Identifier: Apache-2.0
"""Context.fork (a fork holds its parent's conversation, shares its KV memory, goes on alone and
outlives it; the refusals) and tools as far as the default model shows them (checked; refused
where its template renders none; no tool messages without them)."""
import threading

import pytest

import llmsvc

_DOC = ("The lighthouse keeper wrote in his log every evening: the wind, the colour of the sea, "
        "the ships that passed. Over forty years the log grew to twelve volumes. Summarise it.")


def test_a_fork_shares_memory_and_answers_as_its_parent(svc, fresh_id):
    with svc.new_context(fresh_id) as parent:
        parent.call(_DOC, max_tokens=6)
        before = svc.stats().kv_bytes
        with parent.fork() as a, parent.fork(fresh_id + "-b") as b:
            assert b.id == fresh_id + "-b" and a.id not in (parent.id, b.id)
            assert a.messages() == parent.messages()
            info = a.info()
            assert info.tokens == parent.info().tokens and info.chunks_shared > 0
            assert svc.stats().kv_bytes == before  # shared chunks count once
            ra = a.call("In one word?", max_tokens=5)
            rb = b.call("In one word?", max_tokens=5)
            assert ra.tokens == rb.tokens  # twins
            assert parent.info().tokens < a.info().tokens  # the parent did not grow with them
            a_id, b_id = a.id, b.id
    svc.delete_context(fresh_id)
    with svc.open_context(a_id) as a:  # outlives its parent
        assert a.call("Who kept it?", max_tokens=4).tokens
    svc.delete_context(a_id)
    svc.delete_context(b_id)


def test_fork_refusals(svc, fresh_id):
    with svc.new_context(fresh_id) as parent:
        parent.call("Hello.", max_tokens=2)
        n = len(svc.contexts())
        with pytest.raises(llmsvc.ExistsError):
            parent.fork(fresh_id)
        with pytest.raises(llmsvc.InvalidArgumentError):
            parent.fork("../escape")
        # Inside a call (from a second handle while the first waits in its callback): busy.
        seen = []

        def on_piece(_piece):
            if not seen:
                def try_fork():
                    with svc.open_context(fresh_id) as other:
                        try:
                            other.fork().close()
                            seen.append(None)
                        except llmsvc.Error as e:
                            seen.append(e)
                t = threading.Thread(target=try_fork)
                t.start()
                t.join()
            return False

        parent.call("Again.", max_tokens=3, on_piece=on_piece)
        assert seen and isinstance(seen[0], llmsvc.BusyError)
        assert len(svc.contexts()) == n
    svc.delete_context(fresh_id)


def test_tools_are_checked_and_a_context_without_them_refuses_tool_messages(svc, fresh_id):
    weather = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    with pytest.raises(llmsvc.InvalidArgumentError) as e:
        svc.new_context(tools=[{"type": "function", "function": {"name": "bad name"}}])
    assert "tools[0]" in e.value.detail
    try:  # the default model's template renders no tools: refused, never ignored
        svc.new_context(fresh_id, tools=weather).close()
        svc.delete_context(fresh_id)
    except llmsvc.UnsupportedError as e:
        assert "tools" in e.detail
    with svc.new_context(fresh_id, tools="[]") as ctx:
        r = ctx.call("Hello.", max_tokens=3)
        assert r.tool_calls == 0 and r.tool_call_errors == 0
        assert all(m.tool_calls is None for m in ctx.messages())
        with pytest.raises(llmsvc.InvalidArgumentError):
            ctx.append([("tool", "{}")])
        call = {"type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
        with pytest.raises(llmsvc.InvalidArgumentError) as e:
            ctx.append([("user", "Weather?"), {"role": "assistant", "content": "", "tool_calls": [call]}])
        assert "no tools" in e.value.detail
    svc.delete_context(fresh_id)
