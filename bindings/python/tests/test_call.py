# SPDX-License-Identifier: Apache-2.0
"""Calls: a whole reply, its tokens and log-probabilities, options, determinism."""
import math
import os

import pytest

import llmsvc


def test_greedy_reply_with_every_token(svc, fresh_id):
    with svc.new_context(fresh_id, system_prompt="You answer in one short sentence.") as ctx:
        r = ctx.call("What is the capital of France?", max_tokens=24)
    assert "Paris" in r.text
    assert len(r.tokens) == r.generated_tokens > 0
    assert r.finish_reason in (llmsvc.FinishReason.EOS, llmsvc.FinishReason.LENGTH)
    assert r.context_tokens >= r.prompt_tokens + r.generated_tokens
    assert r.ttft_ms > 0 and r.prefill_ms >= 0
    assert r.logprobs is None
    svc.delete_context(fresh_id)


def test_the_same_prompt_gives_the_same_tokens(svc, fresh_id):
    replies = []
    for k in range(2):
        with svc.new_context(f"{fresh_id}-{k}") as ctx:
            replies.append(ctx.call("Count to five.", max_tokens=16, temperature=0.8, seed=42))
        svc.delete_context(f"{fresh_id}-{k}")
    assert replies[0].tokens == replies[1].tokens and replies[0].text == replies[1].text


def test_log_probabilities_come_with_each_token(svc, fresh_id):
    with svc.new_context(fresh_id) as ctx:
        r = ctx.call("Say hello.", max_tokens=8, logprobs=True)
    assert r.logprobs is not None and len(r.logprobs) == len(r.tokens) > 0
    assert all(lp <= 0 and math.isfinite(lp) for lp in r.logprobs)
    svc.delete_context(fresh_id)


def test_max_tokens_and_stop_strings(svc, fresh_id):
    with svc.new_context(fresh_id, raw=True) as ctx:
        r = ctx.call("1, 2, 3, 4,", max_tokens=3)
        assert r.generated_tokens == 3 and r.finish_reason == llmsvc.FinishReason.LENGTH
    with svc.new_context(fresh_id + "-stop", raw=True) as ctx:
        r = ctx.call("1, 2, 3, 4, 5, 6, 7, 8, 9,", max_tokens=40, stop=[" 12"])
        assert r.finish_reason == llmsvc.FinishReason.STOP and " 12" not in r.text and "11" in r.text
        r = ctx.call(" 20,", max_tokens=0)  # prefill only
        assert r.generated_tokens == 0 and r.text == ""
    svc.delete_context(fresh_id)
    svc.delete_context(fresh_id + "-stop")


def test_a_callback_that_returns_true_cancels(svc, fresh_id):
    seen = []
    with svc.new_context(fresh_id) as ctx:
        with pytest.raises(llmsvc.CancelledError) as e:
            ctx.call("Write a long story about a dragon.", max_tokens=64, on_piece=lambda p: seen.append(p) or True)
        assert e.value.result is not None and e.value.result.finish_reason == llmsvc.FinishReason.CANCELLED
        assert len(seen) == 1 and e.value.result.text == seen[0].text
    svc.delete_context(fresh_id)


def test_an_exception_in_the_callback_reaches_the_caller(svc, fresh_id):
    def boom(piece):
        raise RuntimeError("from the callback")

    with svc.new_context(fresh_id) as ctx:
        with pytest.raises(RuntimeError, match="from the callback"):
            ctx.call("Hello!", max_tokens=16, on_piece=boom)
        assert ctx.call("Hello again!", max_tokens=2).generated_tokens > 0  # the context still works
    svc.delete_context(fresh_id)


def test_the_elastic_level_is_reported_and_checked(svc, fresh_id):
    # The suite's model is plain: its one level is 100, the one a call without a level runs at.
    with svc.new_context(fresh_id) as a, svc.new_context(fresh_id + "-b") as b:
        chosen = a.call("Name a colour.", max_tokens=6)
        assert chosen.level_percent == 100
        tokens = b.info().tokens
        with pytest.raises(llmsvc.InvalidArgumentError) as e:
            b.call("Name a colour.", max_tokens=6, level=50)
        assert "level_percent 50" in e.value.detail and "100" in e.value.detail
        for bad in (101, -1):
            with pytest.raises(llmsvc.InvalidArgumentError):
                b.call("Name a colour.", max_tokens=6, level=bad)
        assert b.info().tokens == tokens  # nothing added by the refused calls
        full = b.call("Name a colour.", max_tokens=6, level=100)
        assert full.level_percent == 100 and full.tokens == chosen.tokens
        streamed = b.stream("And another?", max_tokens=4, level=100)
        pieces = list(streamed)
        assert pieces and streamed.reply is not None and streamed.reply.level_percent == 100
        # SLO ratios: the plain model's one level meets ratios of 1, not 0.5 (it runs, missed).
        met = b.call("One more?", max_tokens=2, slo_ttft=1.0, slo_tpot=1.0)
        assert met.level_percent == 100 and met.slo_missed == 0
        missed = b.call("And one more?", max_tokens=2, slo_tpot=0.5)
        assert missed.level_percent == 100 and missed.slo_missed == 1
    svc.delete_context(fresh_id)
    svc.delete_context(fresh_id + "-b")


def test_prompt_compression_keeps_a_share_and_reports_it(svc, fresh_id):
    text = ("The river runs past the old mill, under the stone bridge and through the meadow where the "
            "village children play in summer. In winter it freezes and the wheel stands still. Where does it run?")
    with svc.new_context(fresh_id) as ctx:
        whole = ctx.call(text, max_tokens=1)
        assert whole.prompt_kept == 1.0
        half = ctx.call(text, max_tokens=1, keep=0.5)
        assert 0.0 < half.prompt_kept <= 0.6 and half.prompt_tokens < whole.prompt_tokens
        for bad in (1.5, -0.5):
            with pytest.raises(llmsvc.InvalidArgumentError) as e:
                ctx.call(text, max_tokens=1, keep=bad)
            assert "prompt_keep" in e.value.detail
    svc.delete_context(fresh_id)


def test_adapter_by_context_and_by_call(svc: llmsvc.Service, fresh_id: str) -> None:
    if not os.environ.get("LLMSVC_PY_ADAPTER"):
        pytest.skip("no adapter offered (LLMSVC_PY_ADAPTER)")
    assert svc.adapters() == ["suite"]
    prompt = "Name three colours."
    with svc.new_context(fresh_id + "-a", adapter="suite") as a, svc.new_context(fresh_id + "-b") as b, \
            svc.new_context(fresh_id + "-c") as c:
        by_context = a.call(prompt, max_tokens=8)
        by_call = b.call(prompt, max_tokens=8, adapter="suite")
        plain = c.call(prompt, max_tokens=8)
        assert by_context.tokens == by_call.tokens
        assert by_context.tokens != plain.tokens
        with pytest.raises(llmsvc.InvalidArgumentError):
            c.call(prompt, max_tokens=4, adapter="no-such-adapter")
    for suffix in ("-a", "-b", "-c"):
        svc.delete_context(fresh_id + suffix)
    with pytest.raises(llmsvc.InvalidArgumentError):
        svc.new_context(fresh_id + "-d", adapter="no-such-adapter")
