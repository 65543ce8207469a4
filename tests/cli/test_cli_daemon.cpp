// SPDX-License-Identifier: Apache-2.0
// The llmsvc CLI through a real llmsvcd (started on a socket in a temp directory): chat
// --context resumes a context across runs, ctx list / show --json / delete, run --json, all
// with --target unix:PATH or $LLMSVC_TARGET; ctx show --json has the same fields as embedded.
// The CLI's own state directory is pointed at an empty one: nothing may land there.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/cli/cli_runner.h"
#include "tests/common/test_paths.h"
#include "tests/service/daemon_process.h"

namespace {

namespace fs = std::filesystem;
using llmsvc::test::CliOutcome;
using llmsvc::test::shell_quote;

// The paths of every key of a JSON object, nested ones as "a.b".
std::set<std::string> key_paths(const nlohmann::json& j, const std::string& prefix = "") {
  std::set<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) {
    keys.insert(prefix + it.key());
    if (it->is_object())
      for (const std::string& k : key_paths(*it, prefix + it.key() + ".")) keys.insert(k);
  }
  return keys;
}

class CliDaemon : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(llmsvc::test::default_model_path()))
        << "default model not found; run tools/scripts/fetch_model.sh";
    char tmpl[] = "/tmp/llmsvc-cli-daemon-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directory(dir_ / "daemon");
    fs::create_directory(dir_ / "local");
    daemon_ = std::make_unique<llmsvc::test::DaemonProcess>((dir_ / "daemon").string());
    ASSERT_TRUE(daemon_->start()) << "llmsvcd did not start; see " << daemon_->log_path();
  }
  void TearDown() override {
    if (daemon_ && daemon_->pid() > 0) {
      const int status = daemon_->kill_and_wait(SIGTERM);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "llmsvcd exit status " << status;
    }
    daemon_.reset();
    fs::remove_all(dir_);
  }

  // The CLI with the embedded engine's state in dir_/local and no target from the environment.
  CliOutcome cli(const std::vector<std::string>& args, const std::string& input = "", const std::string& env = "") {
    const std::string base = "-u LLMSVC_TARGET LLMSVC_STATE_DIR=" + shell_quote((dir_ / "local").string());
    return llmsvc::test::run_cli(dir_, LLMSVC_CLI, args, base + " " + env, input);
  }
  std::string target() const { return daemon_->target(); }

  fs::path dir_;
  std::unique_ptr<llmsvc::test::DaemonProcess> daemon_;
};

nlohmann::json show_json(const CliOutcome& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

TEST_F(CliDaemon, ChatResumesAContextAndCtxCommandsSeeIt) {
  const std::vector<std::string> chat = {"chat", "--context", "notes", "--max-tokens", "8", "--target", target()};
  CliOutcome first = cli(chat, "My name is Ada.\n");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_FALSE(first.out.empty());
  const auto after_one = show_json(cli({"ctx", "show", "notes", "--json", "--target", target()}));
  EXPECT_EQ(after_one["turns"], 1);

  CliOutcome second = cli(chat, "What is my name?\n");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_FALSE(second.out.empty());
  const auto after_two = show_json(cli({"ctx", "show", "notes", "--json", "--target", target()}));
  EXPECT_EQ(after_two["id"], "notes");
  EXPECT_EQ(after_two["turns"], 2) << "the second run resumed the first one's context";
  EXPECT_GT(after_two["tokens"].get<int>(), after_one["tokens"].get<int>());
  // Version 2's figures arrived: the daemon holds the context, its resident chunks by format
  // add up (embedded-only fields would read 0 here).
  const auto& chunks = after_two["chunks"];
  EXPECT_GT(chunks["total"].get<int>(), 0);
  EXPECT_GT(chunks["resident"].get<int>(), 0);
  EXPECT_EQ(chunks["resident"].get<int>() + chunks["swapped"].get<int>() + chunks["dropped"].get<int>(),
            chunks["total"].get<int>());
  int by_format = 0;
  for (const char* f : {"f16", "q8", "q4", "q2"}) by_format += chunks["resident_by_format"][f].get<int>();
  EXPECT_EQ(by_format, chunks["resident"].get<int>());
  EXPECT_GT(after_two["kv_resident_bytes"].get<uint64_t>(), 0u);

  // The daemon's, not the CLI's: nothing in the local state directory.
  EXPECT_FALSE(fs::exists(dir_ / "local" / "contexts" / "notes"));

  // list, as text and JSON, through --target and through $LLMSVC_TARGET.
  CliOutcome list = cli({"ctx", "list", "--target", target()});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(list.out.rfind("notes ", 0), 0u) << list.out;
  const std::string env_target = "LLMSVC_TARGET=" + shell_quote(target());
  CliOutcome list_json = cli({"ctx", "list", "--json"}, "", env_target);
  ASSERT_EQ(list_json.exit_code, 0) << list_json.err;
  const auto arr = nlohmann::json::parse(list_json.out);
  ASSERT_EQ(arr.size(), 1u) << list_json.out;
  EXPECT_EQ(arr[0]["id"], "notes");
  EXPECT_EQ(arr[0]["turns"], 2);

  // Same fields as embedded: the same conversation in the CLI's own state directory.
  const std::vector<std::string> local_chat = {"chat", "--context", "notes", "--max-tokens", "8", "--threads", "2"};
  ASSERT_EQ(cli(local_chat, "My name is Ada.\n").exit_code, 0);
  ASSERT_EQ(cli(local_chat, "What is my name?\n").exit_code, 0);
  const auto local = show_json(cli({"ctx", "show", "notes", "--json", "--target", "embedded"}));
  EXPECT_EQ(key_paths(local), key_paths(after_two));
  EXPECT_EQ(local["tokens"], after_two["tokens"]);  // greedy, the same model: the same history
  EXPECT_EQ(local["turns"], after_two["turns"]);
  EXPECT_EQ(local["chunks"]["total"], after_two["chunks"]["total"]);

  // delete, then it is gone from the daemon (and only there).
  CliOutcome del = cli({"ctx", "delete", "notes", "--target", target()});
  ASSERT_EQ(del.exit_code, 0) << del.err;
  CliOutcome gone = cli({"ctx", "show", "notes", "--target", target()});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_NE(gone.err.find("LLMSVC_ERR_NOT_FOUND"), std::string::npos) << gone.err;
  CliOutcome empty = cli({"ctx", "list", "--json", "--target", target()});
  ASSERT_EQ(empty.exit_code, 0) << empty.err;
  EXPECT_EQ(nlohmann::json::parse(empty.out).size(), 0u);
  EXPECT_EQ(show_json(cli({"ctx", "show", "notes", "--json", "--target", "embedded"}))["turns"], 2);
}

TEST_F(CliDaemon, RunThroughTheDaemonMatchesEmbedded) {
  const std::vector<std::string> run = {"run", "--json", "--max-tokens", "8", "--threads", "2", "Name a color."};
  std::vector<std::string> remote_args = run;
  remote_args.insert(remote_args.begin() + 1, {"--target", target()});
  CliOutcome remote = cli(remote_args);
  ASSERT_EQ(remote.exit_code, 0) << remote.err;
  EXPECT_NE(remote.err.find("--threads"), std::string::npos) << "a note that the daemon ignores it: " << remote.err;
  CliOutcome local = cli(run);
  ASSERT_EQ(local.exit_code, 0) << local.err;
  const auto r = nlohmann::json::parse(remote.out), l = nlohmann::json::parse(local.out);
  EXPECT_FALSE(r["text"].get<std::string>().empty());
  EXPECT_EQ(r["text"], l["text"]);
  EXPECT_EQ(r["tokens"], l["tokens"]);
  EXPECT_EQ(r["tokens"].size(), r["n_tokens"].get<size_t>());
  EXPECT_EQ(r["prompt_tokens"], l["prompt_tokens"]);
  EXPECT_EQ(r["n_prompt_tokens"], l["n_prompt_tokens"]);
  EXPECT_EQ(r["finish_reason"], l["finish_reason"]);
  EXPECT_EQ(key_paths(r), key_paths(l));
  // The one-shot context is gone again.
  CliOutcome list = cli({"ctx", "list", "--target", target()});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(list.out, "");
}

TEST_F(CliDaemon, UnreachableTargetIsReported) {
  const std::string nowhere = "unix:" + (dir_ / "nobody.sock").string();
  for (std::vector<std::string> args : {std::vector<std::string>{"run", "--target", nowhere, "hi"},
                                        {"chat", "--target", nowhere},
                                        {"ctx", "list", "--target", nowhere}}) {
    CliOutcome r = cli(args, "hello\n");
    EXPECT_EQ(r.exit_code, 1) << args[0];
    EXPECT_NE(r.err.find("llmsvc: LLMSVC_ERR_UNAVAILABLE: "), std::string::npos) << args[0] << ": " << r.err;
  }
  CliOutcome bad = cli({"ctx", "list", "--target", "tcp:1.2.3.4"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("LLMSVC_ERR_INVALID_ARGUMENT"), std::string::npos) << bad.err;
}

}  // namespace
