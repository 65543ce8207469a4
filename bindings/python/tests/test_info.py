# SPDX-License-Identifier: Apache-2.0
"""Model information, token counts and statistics through the binding."""
import llmsvc


def test_abi_is_at_least_1_2():
    assert llmsvc.abi_version() >= (1, 2)


def test_model_info_describes_the_default_model(svc):
    info = svc.model_info()
    assert info.ready
    assert info.architecture == "llama"  # SmolLM2
    assert info.n_vocab == 49152 and info.n_layer == 30 and info.n_head == 9 and info.n_head_kv == 3
    assert info.n_ctx_train == 8192 and 16 <= info.n_ctx
    assert info.has_chat_template
    assert info.eos.text == "<|im_end|>" and info.eos.id == 2 and info.bos.id >= 0 and info.eot.id >= 0
    assert info.weight_types and info.weight_types[0].name == "Q4_1"
    assert sum(w.bytes for w in info.weight_types) <= info.weight_bytes
    assert info.devices == ["cpu"]
    assert 100_000_000 < info.n_params < 200_000_000


def test_count_and_tokenize_agree(svc):
    text = "The quick brown fox jumps over the lazy dog."
    ids = svc.tokenize(text)
    assert len(ids) == svc.count_tokens(text) > 5
    assert all(0 <= t < 49152 for t in ids)
    # A chat turn adds the template's tokens around the text; a first turn the system turn too.
    assert svc.count_tokens(text, chat=True) > len(ids)
    assert svc.count_tokens(text, chat=True, first_turn=True, system_prompt="Be brief.") > svc.count_tokens(
        text, chat=True)


def test_a_long_text_comes_back_whole(svc):
    text = "word " * 700  # more ids than the first buffer holds
    assert len(svc.tokenize(text)) == svc.count_tokens(text) >= 700


def test_first_turn_count_is_what_the_call_reports(svc, fresh_id):
    prompt = "Name a colour."
    want = svc.count_tokens(prompt, chat=True, first_turn=True, system_prompt="Be brief.")
    with svc.new_context(fresh_id, system_prompt="Be brief.") as ctx:
        assert ctx.call(prompt, max_tokens=1).prompt_tokens == want
    svc.delete_context(fresh_id)


def test_stats_count_calls_and_tokens(svc, fresh_id):
    before = svc.stats()
    with svc.new_context(fresh_id) as ctx:
        r = ctx.call("Hi!", max_tokens=4)
        during = svc.stats()
    assert during.calls == before.calls + 1
    assert during.generated_tokens == before.generated_tokens + r.generated_tokens
    assert during.open_contexts >= 1 and during.weight_bytes > 0
    svc.delete_context(fresh_id)
