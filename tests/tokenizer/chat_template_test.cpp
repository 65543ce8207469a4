// SPDX-License-Identifier: Apache-2.0
// Chat format detection and the pieces read from templates. (Whole conversations are
// compared with Jinja's rendering of each GGUF's template in expected_test.cpp.)
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "runtime/core/tokenizer/chat_template.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace llmsvc::test {
namespace {

ChatTemplate template_of(const std::string& path) {
  auto f = gguf::GgufFile::open(path);
  EXPECT_TRUE(f.ok()) << path;
  return f.ok() ? make_chat_template(*f.value()) : ChatTemplate{};
}

TEST(ChatTemplate, DetectsFamilyAndDefaults) {
  const ChatTemplate smol = template_of(tokenizer_data("bpe_smollm.gguf"));  // SmolLM2's template
  EXPECT_EQ(smol.format, ChatFormat::chatml);
  EXPECT_EQ(smol.default_system, "You are a helpful AI assistant named SmolLM, trained by Hugging Face");

  const ChatTemplate qwen = template_of(tokenizer_data("bpe_qwen2.gguf"));  // Qwen2.5's (escaped "\n")
  EXPECT_EQ(qwen.format, ChatFormat::chatml);
  EXPECT_EQ(qwen.default_system, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");

  const ChatTemplate gemma = template_of(tokenizer_data("spm_gemma.gguf"));
  EXPECT_EQ(gemma.format, ChatFormat::gemma);
  EXPECT_EQ(gemma.system_separator, "\n\n");

  // No template, but the vocabulary has <|im_start|> / <|im_end|>: ChatML without a default.
  const ChatTemplate llama = template_of(tokenizer_data("bpe_llama-bpe.gguf"));
  EXPECT_EQ(llama.format, ChatFormat::chatml);
  EXPECT_EQ(llama.default_system, "");

  // A template of no family written out here is executed: this one writes each message's
  // content on a line of its own.
  const ChatTemplate other = template_of(tokenizer_data("bpe_gpt-2.gguf"));
  EXPECT_EQ(other.format, ChatFormat::jinja);
  EXPECT_TRUE(other.error.ok()) << other.error.message();
  EXPECT_EQ(other.user_turn("Hi", "", true), "Hi\n");
  EXPECT_EQ(other.assistant_end(), "\n");
  EXPECT_EQ(template_of(tokenizer_data("spm_llama.gguf")).format, ChatFormat::raw);  // none at all
}

TEST(ChatTemplate, ChatmlTurns) {
  ChatTemplate t;
  t.format = ChatFormat::chatml;
  EXPECT_EQ(t.system_prefix(""), "");  // no default, no system turn
  t.default_system = "Default.";
  EXPECT_EQ(t.system_prefix(""), "<|im_start|>system\nDefault.<|im_end|>\n");
  EXPECT_EQ(t.system_prefix("Custom."), "<|im_start|>system\nCustom.<|im_end|>\n");
  EXPECT_EQ(t.user_turn("Hi", "ignored", true), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.assistant_end(), "<|im_end|>\n");
}

TEST(ChatTemplate, GemmaPutsSystemIntoFirstUserTurn) {
  ChatTemplate t;
  t.format = ChatFormat::gemma;
  EXPECT_EQ(t.system_prefix("Be brief."), "");
  EXPECT_EQ(t.user_turn(" \tHi there\n ", "Be brief.", true),
            "<start_of_turn>user\nBe brief.\n\nHi there<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(t.user_turn("Again", "Be brief.", false), "<start_of_turn>user\nAgain<end_of_turn>\n<start_of_turn>model\n");
  // Jinja's trim strips Unicode whitespace too (here NBSP and an ideographic space).
  EXPECT_EQ(t.user_turn("\xC2\xA0x\xE3\x80\x80", "", true), "<start_of_turn>user\nx<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(t.assistant_end(), "<end_of_turn>\n");
}

TEST(ChatTemplate, RawIsTheTextItself) {
  ChatTemplate t;
  EXPECT_EQ(t.system_prefix("sys"), "");
  EXPECT_EQ(t.user_turn("just text", "sys", true), "just text");
  EXPECT_EQ(t.assistant_end(), "");
}

TEST(ChatTemplate, DefaultModelIsSmolLM2ChatML) {
  const std::string model = default_model_path();
  if (!std::filesystem::exists(model)) FAIL() << "default model not fetched: " << model;
  const ChatTemplate t = template_of(model);
  EXPECT_EQ(t.format, ChatFormat::chatml);
  EXPECT_EQ(t.system_prefix(""),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n");
}

}  // namespace
}  // namespace llmsvc::test
