# SPDX-License-Identifier: Apache-2.0
"""Streaming: pieces with their token ids, and leaving the loop early."""
import llmsvc


def test_pieces_add_up_to_the_reply(svc, fresh_id):
    with svc.new_context(fresh_id) as ctx:
        stream = ctx.stream("List three fruits.", max_tokens=24, logprobs=True)
        pieces = list(stream)
        reply = stream.reply
    assert reply is not None and pieces
    assert "".join(p.text for p in pieces) == reply.text
    assert [t for p in pieces for t in p.tokens] == reply.tokens
    assert len(reply.tokens) == reply.generated_tokens
    assert all(p.logprobs is not None and len(p.logprobs) == len(p.tokens) for p in pieces)
    svc.delete_context(fresh_id)


def test_a_japanese_reply_keeps_every_token(svc, fresh_id):
    # Multi-byte text streams as whole code points: several tokens may make one piece.
    with svc.new_context(fresh_id) as ctx:
        reply = ctx.call("日本語で「こんにちは」と言ってください。", max_tokens=12)
    assert len(reply.tokens) == reply.generated_tokens
    reply.text.encode("utf-8")  # valid text
    svc.delete_context(fresh_id)


def test_leaving_the_loop_cancels_the_call(svc, fresh_id):
    with svc.new_context(fresh_id) as ctx:
        with ctx.stream("Write a long story about a lighthouse keeper.", max_tokens=200) as stream:
            for n, _ in enumerate(stream, 1):
                if n == 3:
                    break
        # The call stopped early; what it generated stays in the context.
        reply = stream.reply
        assert reply is not None and reply.finish_reason == llmsvc.FinishReason.CANCELLED
        assert reply.generated_tokens < 200
        assert ctx.info().tokens == reply.context_tokens
        assert ctx.call("Thanks.", max_tokens=2).generated_tokens > 0  # usable again
    svc.delete_context(fresh_id)
