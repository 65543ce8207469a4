# SPDX-License-Identifier: Apache-2.0
"""A chat context's conversation: append, generate, truncate, messages, and streaming a reply."""
import pytest

import llmsvc
from llmsvc import Message, Role


def test_append_then_generate_replies_as_a_call_does(svc, fresh_id):
    with svc.new_context() as ref:
        want = ref.call("What is the capital of France?", max_tokens=10)
        ref_id = ref.id
    svc.delete_context(ref_id)
    with svc.new_context(fresh_id) as ctx:
        ctx.append([{"role": "user", "content": "What is the capital of France?"}])
        got = ctx.generate(max_tokens=10)
        assert got.tokens == want.tokens and got.prompt_tokens == 0
        assert ctx.messages() == [Message(Role.USER, "What is the capital of France?"),
                                  Message(Role.ASSISTANT, got.text)]
    svc.delete_context(fresh_id)


def test_a_seeded_exchange_continues_and_truncate_rewinds(svc, fresh_id):
    with svc.new_context(fresh_id) as ctx:
        ctx.append([("user", "Remember the number 7."), (Role.ASSISTANT, "I will remember 7."),
                    Message(Role.USER, "Which number?")])
        streamed = list(ctx.stream(max_tokens=8))
        assert streamed and ctx.messages()[-1].content == "".join(p.text for p in streamed)
        assert [m.role for m in ctx.messages()] == [Role.USER, Role.ASSISTANT, Role.USER, Role.ASSISTANT]
        tokens_before = ctx.info().tokens
        ctx.truncate(2)
        assert len(ctx.messages()) == 2 and ctx.info().tokens < tokens_before and ctx.info().turns == 1
        assert ctx.messages(1) == [Message(Role.ASSISTANT, "I will remember 7.")]
        ctx.truncate(0)
        assert ctx.messages() == [] and ctx.info().tokens == 0
    svc.delete_context(fresh_id)


def test_mistakes_get_clear_errors(svc, fresh_id):
    with svc.new_context(fresh_id) as ctx:
        with pytest.raises(llmsvc.InvalidArgumentError) as e:
            ctx.append([("assistant", "Hi.")])
        assert "message 0" in e.value.detail
        with pytest.raises(llmsvc.InvalidArgumentError):
            ctx.generate(max_tokens=4)  # nothing to reply to
        with pytest.raises(llmsvc.InvalidArgumentError):
            ctx.append([("tool", "{}")])  # no reply called a tool
        with pytest.raises(ValueError):
            ctx.append([("narrator", "Once upon a time")])
        with pytest.raises(llmsvc.InvalidArgumentError):
            ctx.truncate(3)
    svc.delete_context(fresh_id)
    with svc.new_context(raw=True) as raw:
        with pytest.raises(llmsvc.InvalidArgumentError):
            raw.messages()
        raw_id = raw.id
    svc.delete_context(raw_id)


def test_structured_output_follows_the_schema(svc, fresh_id):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}},
              "required": ["city"], "additionalProperties": False}
    with svc.new_context(fresh_id) as ctx:
        r = ctx.call("What is the capital of France? Answer as JSON.", json_schema=schema, max_tokens=40)
        import json
        value = json.loads(r.text)
        assert set(value) == {"city"} and isinstance(value["city"], str)
        assert r.finish_reason == llmsvc.FinishReason.EOS and r.constrain_ms > 0
        assert ctx.call("Yes or no?", grammar='root ::= "yes" | "no"', max_tokens=4).text in ("yes", "no")
        with pytest.raises(llmsvc.InvalidArgumentError):
            ctx.call("Hi", json_schema="{not json", max_tokens=4)
    svc.delete_context(fresh_id)


def test_a_message_list_counts_what_append_stores(svc, fresh_id):
    messages = [("user", "Remember the number 7."), ("assistant", "I will."), ("user", "Which number?")]
    counted = svc.count_tokens(chat=True, first_turn=True, system_prompt="Be brief.", messages=messages)
    with svc.new_context(fresh_id, system_prompt="Be brief.") as ctx:
        ctx.append(messages)
        assert ctx.info().tokens == counted
    svc.delete_context(fresh_id)
    with pytest.raises(llmsvc.InvalidArgumentError):
        svc.count_tokens(chat=True, messages=[("assistant", "first")])
