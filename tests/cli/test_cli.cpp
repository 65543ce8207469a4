// SPDX-License-Identifier: Apache-2.0
// The llmsvc CLI as a user meets it: argument errors, the missing-model hint, and (with
// the default model fetched) info, tokenize, run --json and chat.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli/cli_runner.h"
#include "tests/common/test_paths.h"

namespace {

namespace fs = std::filesystem;
using Outcome = llmsvc::test::CliOutcome;
using llmsvc::test::slurp;
using llmsvc::test::shell_quote;

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/llmsvc-cli-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directory(dir_ / "empty");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs the CLI with `args`; `env` is prepended as VAR=value words; stdin from `input`.
  Outcome cli(const std::vector<std::string>& args, const std::string& env = "", const std::string& input = "") {
    return llmsvc::test::run_cli(dir_, LLMSVC_CLI, args, env, input);
  }

  std::string no_model_env() { return "LLMSVC_MODEL_DIR=" + shell_quote((dir_ / "empty").string()); }

  fs::path dir_;
};

TEST_F(Cli, NoSubcommandFails) {
  Outcome r = cli({});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(r.err.empty());
}

TEST_F(Cli, HelpListsSubcommands) {
  Outcome r = cli({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* sub : {"run", "chat", "tokenize", "info"}) EXPECT_NE(r.out.find(sub), std::string::npos) << sub;
}

TEST_F(Cli, BadArgumentsFail) {
  EXPECT_NE(cli({"frobnicate"}).exit_code, 0);
  EXPECT_NE(cli({"run"}).exit_code, 0);                           // no prompt
  EXPECT_NE(cli({"run", "--top-k", "many", "hi"}).exit_code, 0);  // not a number
  EXPECT_NE(cli({"run", "--no-such-flag", "hi"}).exit_code, 0);
  EXPECT_NE(cli({"tokenize"}).exit_code, 0);
  EXPECT_NE(cli({"info", "a.gguf", "b.gguf"}).exit_code, 0);
}

// Option values are checked before the model is touched, with the C API's messages.
TEST_F(Cli, BadSamplingValuesAreReported) {
  Outcome r = cli({"run", "--top-p", "2", "hi"}, no_model_env());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("llmsvc: LLMSVC_ERR_INVALID_ARGUMENT: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("top_p"), std::string::npos) << r.err;
}

TEST_F(Cli, InvalidUtf8PromptIsReported) {
  Outcome r = cli({"run", "bad \xff prompt"}, no_model_env());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("llmsvc: LLMSVC_ERR_INVALID_UTF8: "), std::string::npos) << r.err;
}

TEST_F(Cli, MissingDefaultModelGivesTheFetchHint) {
  for (std::vector<std::string> args :
       {std::vector<std::string>{"run", "hello"}, {"chat"}, {"tokenize", "hello"}, {"info"}}) {
    Outcome r = cli(args, no_model_env(), "hello\n");
    EXPECT_EQ(r.exit_code, 1) << args[0];
    EXPECT_NE(r.err.find("llmsvc: LLMSVC_ERR_MODEL_NOT_FOUND: "), std::string::npos) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("tools/scripts/fetch_model.sh"), std::string::npos) << args[0] << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << args[0] << ": " << r.out;
  }
}

TEST_F(Cli, MissingExplicitModelNamesIt) {
  const std::string missing = (dir_ / "nope.gguf").string();
  Outcome r = cli({"info", missing});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("LLMSVC_ERR_MODEL_NOT_FOUND"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
  r = cli({"run", "--model", missing, "hi"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
}

TEST_F(Cli, MalformedModelIsReported) {
  std::ofstream(dir_ / "junk.gguf") << "this is not a gguf file at all";
  Outcome r = cli({"info", (dir_ / "junk.gguf").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("llmsvc: LLMSVC_ERR_MODEL_INVALID: "), std::string::npos) << r.err;
}

// ---- with the default model

class CliModel : public Cli {
 protected:
  void SetUp() override {
    Cli::SetUp();
    model_ = llmsvc::test::default_model_path();
    if (!fs::exists(model_)) FAIL() << "default model not at " << model_ << "; run tools/scripts/fetch_model.sh";
  }
  std::string model_;
};

TEST_F(CliModel, InfoShowsMetadataAndTensors) {
  Outcome r = cli({"info", model_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("general.architecture"), std::string::npos);
  EXPECT_NE(r.out.find("\"llama\""), std::string::npos);
  EXPECT_NE(r.out.find("[49152 strings]"), std::string::npos);  // the vocabulary, summarized
  EXPECT_NE(r.out.find("token_embd.weight"), std::string::npos);
  EXPECT_NE(r.out.find("Q4_1"), std::string::npos) << "tensor types named";
  EXPECT_EQ(cli({"info"}).out, r.out);  // the default model is that file
}

TEST_F(CliModel, TokenizeJson) {
  Outcome r = cli({"tokenize", "--json", "Hello world"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["ids"].is_array());
  ASSERT_EQ(j["ids"].size(), j["pieces"].size());
  ASSERT_EQ(j["n_tokens"], j["ids"].size());
  std::string joined;
  for (const auto& p : j["pieces"]) joined += p.get<std::string>();
  EXPECT_NE(joined.find("Hello world"), std::string::npos) << joined;

  Outcome special = cli({"tokenize", "--json", "<|im_start|>"});
  Outcome plain = cli({"tokenize", "--json", "--no-special", "<|im_start|>"});
  ASSERT_EQ(special.exit_code, 0);
  ASSERT_EQ(plain.exit_code, 0);
  EXPECT_LT(nlohmann::json::parse(special.out)["ids"].size(), nlohmann::json::parse(plain.out)["ids"].size());
}

TEST_F(CliModel, TokenizeText) {
  Outcome r = cli({"tokenize", "Hi there"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tokens"), std::string::npos);
}

TEST_F(CliModel, RunJsonHasTheFields) {
  Outcome r = cli({"run", "--json", "--max-tokens", "8", "--threads", "2", "What is the capital of France?"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"n_prompt_tokens", "n_tokens", "tokens", "text", "prefill_ms", "decode_ms", "ttft_ms",
                        "tokens_per_s", "finish_reason", "level"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["level"], 100);  // the default model is plain: its one level, chosen for a call without --level
  EXPECT_GT(j["n_prompt_tokens"].get<int>(), 0);
  EXPECT_GT(j["n_tokens"].get<int>(), 0);
  EXPECT_LE(j["n_tokens"].get<int>(), 8);
  // Every generated id, and the prompt's ids.
  ASSERT_TRUE(j["tokens"].is_array());
  EXPECT_EQ(j["tokens"].size(), j["n_tokens"].get<size_t>());
  ASSERT_TRUE(j["prompt_tokens"].is_array());
  EXPECT_EQ(j["prompt_tokens"].size(), j["n_prompt_tokens"].get<size_t>());
  EXPECT_TRUE(j["text"].is_string());
  EXPECT_TRUE(j["finish_reason"] == "eos" || j["finish_reason"] == "length") << j["finish_reason"];
  EXPECT_GE(j["prefill_ms"].get<double>(), 0.0);

  // The streamed reply is the same text.
  Outcome s = cli({"run", "--max-tokens", "8", "--threads", "2", "What is the capital of France?"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  std::string text = j["text"];
  EXPECT_EQ(s.out.substr(0, text.size()), text);

  // --level: 100 is the plain model's level, the same reply; a level it does not have is
  // refused naming the levels it has.
  Outcome full = cli({"run", "--json", "--level", "100", "--max-tokens", "8", "--threads", "2",
                      "What is the capital of France?"});
  ASSERT_EQ(full.exit_code, 0) << full.err;
  auto jf = nlohmann::json::parse(full.out);
  EXPECT_EQ(jf["level"], 100);
  EXPECT_EQ(jf["tokens"], j["tokens"]);
  Outcome half = cli({"run", "--level", "50", "--max-tokens", "8", "--threads", "2", "Hi"});
  EXPECT_NE(half.exit_code, 0);
  EXPECT_NE(half.err.find("LLMSVC_ERR_INVALID_ARGUMENT"), std::string::npos) << half.err;
  EXPECT_NE(half.err.find("its one level is 100"), std::string::npos) << half.err;
  EXPECT_NE(cli({"run", "--level", "101", "Hi"}).exit_code, 0);  // refused before a model loads
}

// Issue 22: --json listed one id per streamed piece (the last token of each), so a reply whose
// code points take several tokens lost most of them (6 of 12 on this prompt). Now "tokens" is
// every generated id and "prompt_tokens" the prompt's ids; --logprobs gives one per token.
TEST_F(CliModel, RunJsonReportsEveryTokenId) {
  const std::string prompt = "\xE6\x97\xA5\xE6\x9C\xAC\xE3\x81\xAE\xE9\xA6\x96\xE9\x83\xBD\xE3\x81\xAF"
                             "\xE3\x81\xA9\xE3\x81\x93\xE3\x81\xA7\xE3\x81\x99\xE3\x81\x8B\xEF\xBC\x9F";  // 日本の首都はどこですか？
  Outcome r = cli({"run", "--json", "--logprobs", "--max-tokens", "12", "--threads", "2", prompt});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["n_tokens"].get<int>(), 12);
  ASSERT_TRUE(j["tokens"].is_array());
  EXPECT_EQ(j["tokens"].size(), 12u) << j["tokens"].dump();
  EXPECT_EQ(j["logprobs"].size(), 12u);
  for (const auto& lp : j["logprobs"]) EXPECT_LE(lp.get<double>(), 0.0);
  ASSERT_TRUE(j["prompt_tokens"].is_array());
  EXPECT_EQ(j["prompt_tokens"].size(), j["n_prompt_tokens"].get<size_t>());
  // The same ids as the tokenizer gives for the templated turn would be a second
  // implementation; the chat template's first token (<|im_start|>, special) is enough here.
  Outcome t = cli({"tokenize", "--json", "<|im_start|>"});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_EQ(j["prompt_tokens"][0], nlohmann::json::parse(t.out)["ids"][0]);
}

// Structured output from the command line: --json-schema (and its file form) holds the reply to
// the schema, --grammar to the grammar; a bad schema is reported before anything runs.
TEST_F(CliModel, RunHoldsTheReplyToASchemaOrAGrammar) {
  const std::string schema =
      R"({"type": "object", "properties": {"city": {"type": "string", "maxLength": 24}}, "required": ["city"],)"
      R"( "additionalProperties": false})";
  Outcome r = cli({"run", "--json", "--max-tokens", "24", "--threads", "2", "--json-schema", schema,
                   "Where is the Eiffel Tower? Answer in JSON."});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  auto reply = nlohmann::json::parse(j["text"].get<std::string>());  // the reply is JSON itself
  ASSERT_TRUE(reply.is_object()) << reply.dump();
  EXPECT_EQ(reply.size(), 1u);
  EXPECT_TRUE(reply["city"].is_string());
  EXPECT_EQ(j["finish_reason"], "eos");
  EXPECT_GT(j["constrain_ms"].get<double>(), 0.0);
  const std::string file = (dir_ / "grammar.gbnf").string();
  std::ofstream(file) << "root ::= (\"yes\" | \"no\")\n";
  Outcome g = cli({"run", "--max-tokens", "4", "--threads", "2", "--grammar-file", file, "Is the sky blue?"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_TRUE(g.out.rfind("yes", 0) == 0 || g.out.rfind("no", 0) == 0) << g.out;
  Outcome bad = cli({"run", "--threads", "2", "--json-schema", "{\"type\": ", "Hi"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("json_schema"), std::string::npos) << bad.err;
}

TEST_F(CliModel, ProfileWritesAValidSwitchCostProfile) {
  const std::string state = (dir_ / "state").string();
  Outcome r = cli({"profile", "--threads", "2", "--reps", "1", "--state-dir", state});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("recompute per layer"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(slurp(dir_ / "state" / "switch-profile.json"));
  EXPECT_EQ(j["version"], 1);
  for (const char* k : {"rc_fixed_s", "rc_token_s", "rc_token_ctx_s", "io_fixed_s", "io_chunk_s", "io_byte_s"}) {
    ASSERT_TRUE(j[k].is_number()) << k;
    EXPECT_GE(j[k].get<double>(), 0.0) << k;
  }
  // Time is spent somewhere: recomputing a token and loading a byte both cost something.
  // Recomputing a chunk is not free (the fit may put all of it on any of the three terms:
  // under noise, non-negative least squares can zero the other two).
  EXPECT_GT(j["rc_fixed_s"].get<double>() + 16 * (j["rc_token_s"].get<double>() + 256 * j["rc_token_ctx_s"].get<double>()), 0.0);
  EXPECT_GT(j["io_fixed_s"].get<double>() + j["io_chunk_s"].get<double>() + j["io_byte_s"].get<double>(), 0.0);
  EXPECT_FALSE(fs::exists(dir_ / "state" / "switch-profile.tmp")) << "scratch chunk files left behind";
  // --out elsewhere.
  Outcome o = cli({"profile", "--threads", "2", "--reps", "1", "--state-dir", state, "--out", (dir_ / "p.json").string()});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_TRUE(fs::exists(dir_ / "p.json"));
}

TEST_F(CliModel, ChatTakesOneTurnPerLine) {
  Outcome r =
      cli({"chat", "--max-tokens", "8", "--threads", "2"}, "", "Hello!\nWhat did I just say?\n/exit\nignored\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.find("> "), std::string::npos) << "no prompt when stdin is not a terminal";
}

}  // namespace

namespace {

// `llmsvc elastify` on a committed random model: a report (anchors, unit, the check against the
// input), a file the run command takes at its levels, and clear failures for bad input.
TEST_F(Cli, ElastifyWritesAModelWhoseLevelsRun) {
  const std::string in = std::string(LLMSVC_TEST_DATA) + "/models/llama-Q8_0.gguf", out = (dir_ / "e.gguf").string();
  Outcome r = cli({"elastify", in, "-o", out, "--json", "-q", "--calib-tokens", "256", "--layer-tokens", "128", "--window",
                   "64", "-t", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ffn_unit"], 32);
  EXPECT_EQ(j["anchors"].size(), 1u);  // 20 % of 2 layers, rounded up
  EXPECT_EQ(j["check"]["argmax_agree"], j["check"]["positions"]);
  EXPECT_EQ(j["levels"].back(), 100);
  ASSERT_TRUE(fs::exists(out));
  Outcome small = cli({"run", "--model", out, "--raw", "--json", "--level", "20", "--max-tokens", "4", "--threads", "2",
                       "Once upon a time"});
  ASSERT_EQ(small.exit_code, 0) << small.err;
  EXPECT_EQ(nlohmann::json::parse(small.out)["level"], 20);
  Outcome slo = cli({"run", "--model", out, "--raw", "--json", "--slo-tpot", "0.01", "--max-tokens", "2", "--threads",
                     "2", "Once upon a time"});
  ASSERT_EQ(slo.exit_code, 0) << slo.err;
  auto js = nlohmann::json::parse(slo.out);
  EXPECT_EQ(js["level"], 20);  // the smallest, and the SLO missed
  EXPECT_EQ(js["slo_missed"], true);
  // Bad input: an elastic file again, an unknown order, a missing calibration text.
  Outcome again = cli({"elastify", out, "-o", (dir_ / "e2.gguf").string(), "-q"});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.err.find("elastic already"), std::string::npos) << again.err;
  EXPECT_NE(cli({"elastify", in, "-o", (dir_ / "e3.gguf").string(), "--score", "magic", "-q"}).exit_code, 0);
  Outcome no_text = cli({"elastify", in, "-o", (dir_ / "e4.gguf").string(), "--calib", (dir_ / "none.txt").string(), "-q"});
  EXPECT_NE(no_text.exit_code, 0);
  EXPECT_NE(no_text.err.find("none.txt"), std::string::npos) << no_text.err;
  EXPECT_FALSE(fs::exists(dir_ / "e2.gguf"));
}

}  // namespace
