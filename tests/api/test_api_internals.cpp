// SPDX-License-Identifier: Apache-2.0
// The C API's inner pieces: id/UTF-8 validation, option reading and result writing,
// and the Service's open-handle bookkeeping over a minimal in-memory transport.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <type_traits>

#include "runtime/api/info_options.h"
#include "runtime/api/options.h"
#include "runtime/api/service.h"
#include "runtime/api/validate.h"
#include "runtime/core/engine/token_trail.h"

namespace llmsvc::api {
namespace {

TEST(Validate, Ids) {
  EXPECT_TRUE(check_id("a").ok());
  EXPECT_TRUE(check_id("chat-2024_01.v2").ok());
  EXPECT_TRUE(check_id(std::string(64, 'x').c_str()).ok());
  EXPECT_EQ(check_id(nullptr).code(), Code::invalid_argument);
  EXPECT_EQ(check_id("").code(), Code::invalid_argument);
  EXPECT_EQ(check_id(std::string(65, 'x').c_str()).code(), Code::invalid_argument);
  EXPECT_EQ(check_id("a b").code(), Code::invalid_argument);
  EXPECT_EQ(check_id("a/b").code(), Code::invalid_argument);
  EXPECT_EQ(check_id("..").code(), Code::invalid_argument);
  EXPECT_EQ(check_id(".").code(), Code::invalid_argument);
  EXPECT_EQ(check_id("caf\xc3\xa9").code(), Code::invalid_argument);  // UTF-8, but not in the set
  EXPECT_EQ(check_id("ab\xff").code(), Code::invalid_utf8);
  EXPECT_FALSE(check_id("a b").message().empty());
}

TEST(Validate, Utf8) {
  EXPECT_TRUE(check_utf8(nullptr, 0, "prompt").ok());
  EXPECT_EQ(check_utf8(nullptr, 3, "prompt").code(), Code::invalid_argument);
  EXPECT_TRUE(check_utf8("h\xc3\xa9llo", 6, "prompt").ok());
  EXPECT_EQ(check_utf8("\xc3", 1, "prompt").code(), Code::invalid_utf8);
  EXPECT_EQ(check_utf8("\xed\xa0\x80", 3, "prompt").code(), Code::invalid_utf8);  // a surrogate
  EXPECT_EQ(check_utf8("\xc0\xaf", 2, "prompt").code(), Code::invalid_utf8);      // overlong
  EXPECT_NE(check_utf8("\xff", 1, "prompt").message().find("prompt"), std::string::npos);
  EXPECT_EQ(check_cstr(nullptr, "x").code(), Code::invalid_argument);
}

TEST(Options, StructSizesCoverV1) {
  // These constants must never change once published. The bind options' v1 (ABI 1.0) ends
  // with kv_ratio; fields added since (device, ABI 1.1) lie past it, read as zero from a
  // caller's smaller struct.
  EXPECT_EQ(kBindOptionsV1, offsetof(llmsvc_bind_options, kv_ratio) + sizeof(float));
  EXPECT_GE(offsetof(llmsvc_bind_options, device), kBindOptionsV1);
  EXPECT_LE(kCallOptionsV1, sizeof(llmsvc_call_options));
  EXPECT_GT(kCallResultV1, offsetof(llmsvc_call_result, tpot_ms));
}

// A caller built against ABI 1.0 passes the smaller struct: whatever lies past it (here
// garbage where 1.1's device field would be) is never read.
TEST(Options, AnAbi10CallersBindOptionsReadNoDevice) {
  llmsvc_bind_options o;
  llmsvc_bind_options_init(&o);
  o.target = "unix:/run/llmsvc/llmsvc.sock";  // no model needed
  o.struct_size = kBindOptionsV1;
  std::memset(reinterpret_cast<char*>(&o) + kBindOptionsV1, 0xA5, sizeof(o) - kBindOptionsV1);
  auto config = read_bind_options(&o);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_TRUE(config->engine.device.empty());
  o.struct_size = sizeof(o);
  o.device = "cpu";
  o.adapters = nullptr;  // the whole struct is the caller's now: every field set
  config = read_bind_options(&o);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->engine.device, "cpu");
}

TEST(Options, CallDefaultsMapToSampler) {
  auto p = read_call_options(nullptr);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->sampling.temperature, 0.0f);
  EXPECT_EQ(p->sampling.top_p, 1.0f);
  EXPECT_EQ(p->sampling.repeat_last_n, 64);
  EXPECT_EQ(p->max_tokens, 256);
  EXPECT_TRUE(p->stop.empty());
  EXPECT_EQ(p->cancel, nullptr);
  EXPECT_EQ(p->level_percent, 0);  // the service chooses
}

TEST(Options, CallCopiesFields) {
  llmsvc_call_options o;
  init(&o);
  o.seed = 99;
  o.temperature = 0.7f;
  o.top_k = 40;
  o.top_p = 0.9f;
  o.min_p = 0.05f;
  o.repeat_penalty = 1.1f;
  o.repeat_last_n = -1;
  o.max_tokens = 0;
  const char* stops[] = {"\n\n", "User:"};
  o.stop = stops;
  o.n_stop = 2;
  o.level_percent = 30;
  auto p = read_call_options(&o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->level_percent, 30);
  EXPECT_EQ(p->sampling.seed, 99u);
  EXPECT_EQ(p->sampling.top_k, 40);
  EXPECT_EQ(p->sampling.min_p, 0.05f);
  EXPECT_EQ(p->sampling.repeat_last_n, -1);
  EXPECT_EQ(p->max_tokens, 0);
  EXPECT_EQ(p->stop, (std::vector<std::string>{"\n\n", "User:"}));
}

TEST(Options, CallRefusesBadValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const char* bad_utf8[] = {"ok", "\xc3"};
  const char* empty[] = {""};
  const char* null_entry[] = {nullptr};
  std::string long_stop(257, 'x');
  const char* too_long[] = {long_stop.c_str()};
  struct Case {
    const char* what;
    void (*set)(llmsvc_call_options&);
    Code code;
  };
  const Case cases[] = {
      {"struct_size", [](llmsvc_call_options& o) { o.struct_size = 8; }, Code::invalid_argument},
      {"temperature NaN", [](llmsvc_call_options& o) { o.temperature = std::nanf(""); }, Code::invalid_argument},
      {"top_k", [](llmsvc_call_options& o) { o.top_k = -1; }, Code::invalid_argument},
      {"top_p", [](llmsvc_call_options& o) { o.top_p = 1.5f; }, Code::invalid_argument},
      {"min_p", [](llmsvc_call_options& o) { o.min_p = -0.1f; }, Code::invalid_argument},
      {"repeat_penalty", [](llmsvc_call_options& o) { o.repeat_penalty = 0.0f; }, Code::invalid_argument},
      {"repeat_last_n", [](llmsvc_call_options& o) { o.repeat_last_n = -2; }, Code::invalid_argument},
      {"max_tokens", [](llmsvc_call_options& o) { o.max_tokens = -1; }, Code::invalid_argument},
      {"slo", [](llmsvc_call_options& o) { o.slo_ttft_ratio = -1.0f; }, Code::invalid_argument},
      {"level_percent 101", [](llmsvc_call_options& o) { o.level_percent = 101; }, Code::invalid_argument},
      {"level_percent -1", [](llmsvc_call_options& o) { o.level_percent = -1; }, Code::invalid_argument},
      {"stop NULL", [](llmsvc_call_options& o) { o.n_stop = 1; }, Code::invalid_argument},
      {"n_stop",
       [](llmsvc_call_options& o) {
         static const char* s[17] = {};
         o.stop = s, o.n_stop = 17;
       },
       Code::invalid_argument},
  };
  for (const auto& c : cases) {
    llmsvc_call_options o;
    init(&o);
    c.set(o);
    auto p = read_call_options(&o);
    ASSERT_FALSE(p.ok()) << c.what;
    EXPECT_EQ(p.status().code(), c.code) << c.what;
    EXPECT_FALSE(p.status().message().empty()) << c.what;
  }
  llmsvc_call_options o;
  init(&o);
  o.top_p = nan;
  EXPECT_EQ(read_call_options(&o).status().code(), Code::invalid_argument);
  init(&o);
  o.stop = bad_utf8, o.n_stop = 2;
  EXPECT_EQ(read_call_options(&o).status().code(), Code::invalid_utf8);
  o.stop = empty, o.n_stop = 1;
  EXPECT_EQ(read_call_options(&o).status().code(), Code::invalid_argument);
  o.stop = null_entry;
  EXPECT_EQ(read_call_options(&o).status().code(), Code::invalid_argument);
  o.stop = too_long;
  EXPECT_EQ(read_call_options(&o).status().code(), Code::invalid_argument);
}

TEST(Options, ContextOptions) {
  auto d = read_context_options(nullptr);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->id.empty());
  EXPECT_FALSE(d->raw);
  llmsvc_context_options o;
  init(&o);
  o.id = "my-ctx";
  o.system_prompt = "Be brief.";
  o.raw = 1;
  auto c = read_context_options(&o);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->id, "my-ctx");
  EXPECT_EQ(c->system_prompt, "Be brief.");
  EXPECT_TRUE(c->raw);
  o.id = "bad id";
  EXPECT_EQ(read_context_options(&o).status().code(), Code::invalid_argument);
  o.id = nullptr;
  o.system_prompt = "\xfe";
  EXPECT_EQ(read_context_options(&o).status().code(), Code::invalid_utf8);
  o.system_prompt = nullptr;
  o.struct_size = sizeof(size_t);
  EXPECT_EQ(read_context_options(&o).status().code(), Code::invalid_argument);
}

// An older caller's result struct (v1 only, within a bigger buffer) gets nothing past v1;
// a newer caller's tail is left as it was.
TEST(Options, ResultsRespectStructSize) {
  CallStats stats;
  stats.prompt_tokens = 5;
  stats.generated_tokens = 7;
  stats.finish = FinishReason::length;
  stats.tpot_ms = 12.5;
  struct Newer {
    llmsvc_call_result v1;
    uint64_t tail;
  } r;
  std::memset(&r, 0, sizeof r);
  r.v1.struct_size = sizeof r;
  r.tail = 0x1234;
  write_call_result(stats, &r.v1);
  EXPECT_EQ(r.v1.struct_size, sizeof r);
  EXPECT_EQ(r.v1.prompt_tokens, 5);
  EXPECT_EQ(r.v1.generated_tokens, 7);
  EXPECT_EQ(r.v1.finish_reason, LLMSVC_FINISH_LENGTH);
  EXPECT_EQ(r.v1.tpot_ms, 12.5);
  EXPECT_EQ(r.tail, 0x1234u);
  EXPECT_FALSE(check_result_size(kCallResultV1 - 1, kCallResultV1, "llmsvc_call_result").ok());
  EXPECT_TRUE(check_result_size(sizeof r, kCallResultV1, "llmsvc_call_result").ok());
}

// Every figure the C structs have, a new one included, is written from its table's line
// (stats_fields.h) with its own value.
TEST(Options, WritersCopyEveryPublicFigure) {
  int n = 0;
#define LLMSVC_FILL(type, name, ...) in.name = static_cast<type>(++n);
  // A generic lambda, so that the lines whose field the C struct lacks are never named.
  auto check = [](const auto& in, const auto& out) {
#define LLMSVC_CHECK(type, name, since, c, ...)   \
  if constexpr (InCStruct::c == InCStruct::yes) { \
    EXPECT_EQ(out.name, in.name) << #name;        \
  }
    using In = std::remove_cvref_t<decltype(in)>;
    if constexpr (std::is_same_v<In, CallStats>) {
      LLMSVC_CALL_STATS_FIELDS(LLMSVC_CHECK)
    } else if constexpr (std::is_same_v<In, EngineStats>) {
      LLMSVC_ENGINE_STATS_FIELDS(LLMSVC_CHECK)
    } else {
      LLMSVC_CONTEXT_INFO_FIELDS(LLMSVC_CHECK)
    }
#undef LLMSVC_CHECK
  };
  {
    CallStats in;
    LLMSVC_CALL_STATS_FIELDS(LLMSVC_FILL)
    llmsvc_call_result out;
    init(&out);
    write_call_result(in, &out);
    check(in, out);
  }
  {
    EngineStats in;
    LLMSVC_ENGINE_STATS_FIELDS(LLMSVC_FILL)
    llmsvc_stats out;
    init(&out);
    write_stats(in, 99, &out);
    EXPECT_EQ(out.open_contexts, 99);
    check(in, out);
  }
  {
    ContextInfo in;
    LLMSVC_CONTEXT_INFO_FIELDS(LLMSVC_FILL)
    llmsvc_context_info out;
    init(&out);
    write_context_info(in, &out);
    check(in, out);
  }
#undef LLMSVC_FILL
}

// Just enough of a transport to exercise the Service's bookkeeping: a set of ids.
class SetTransport final : public Transport {
 public:
  Result<std::string> create_context(const ContextOptions& o) override {
    std::string id = o.id.empty() ? "gen" + std::to_string(next_++) : o.id;
    if (!ids_.insert(id).second) return Status(Code::exists, "exists");
    return id;
  }
  Status open_context(std::string_view id) override {
    return ids_.count(std::string(id)) ? Status::Ok() : Status(Code::not_found, "no such context");
  }
  Status delete_context(std::string_view id) override {
    return ids_.erase(std::string(id)) ? Status::Ok() : Status(Code::not_found, "no such context");
  }
  Status call(std::string_view, std::string_view, const CallParams&, const PieceFn&, CallStats*) override {
    return Status(Code::unsupported, "no model");
  }
  void cancel(std::string_view) override {}
  Result<EngineStats> stats() override {
    EngineStats s;
    s.known_contexts = static_cast<int32_t>(ids_.size());
    return s;
  }
  Result<std::vector<std::string>> list_contexts() override { return std::vector<std::string>(ids_.begin(), ids_.end()); }
  Result<ContextInfo> context_info(std::string_view id) override {
    if (!ids_.count(std::string(id))) return Status(Code::not_found, "no such context");
    ContextInfo i;
    i.id = std::string(id);
    return i;
  }

 private:
  std::set<std::string> ids_;
  int next_ = 0;
};

// ABI 1.2: on_tokens reaches the engine as CallParams::on_tokens, each piece as an llmsvc_piece
// of this library's size; an ABI 1.0 caller's struct (without the fields) streams no ids.
TEST(Options, CallTokenStreamCrosses) {
  struct Seen {
    size_t size = 0;
    std::string text;
    std::vector<int32_t> ids;
    bool logprobs = false;
  } seen;
  llmsvc_call_options o;
  init(&o);
  o.on_tokens = [](const llmsvc_piece* p, void* user) {
    auto* s = static_cast<Seen*>(user);
    s->size = p->struct_size;
    s->text.assign(p->text, p->len);
    s->ids.assign(p->tokens, p->tokens + p->n_tokens);
    s->logprobs = p->logprobs != nullptr;
    return s->ids.size() > 2 ? 1 : 0;  // three ids: cancel
  };
  o.on_tokens_user = &seen;
  o.logprobs = 1;
  auto p = read_call_options(&o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(static_cast<bool>(p->on_tokens));
  EXPECT_TRUE(p->logprobs);
  const int32_t ids[] = {5, 6};
  const float lps[] = {-0.5f, -1.0f};
  EXPECT_TRUE(p->on_tokens(TokenPiece{"ab", 6, ids, lps}));
  EXPECT_EQ(seen.size, sizeof(llmsvc_piece));
  EXPECT_EQ(seen.text, "ab");
  EXPECT_EQ(seen.ids, (std::vector<int32_t>{5, 6}));
  EXPECT_TRUE(seen.logprobs);
  const int32_t three[] = {1, 2, 3};
  EXPECT_FALSE(p->on_tokens(TokenPiece{"", -1, three, {}}));
  EXPECT_FALSE(seen.logprobs);
  o.level_percent = 50;
  o.struct_size = offsetof(llmsvc_call_options, level_percent);  // an ABI 1.4 caller: no level
  auto v14 = read_call_options(&o);
  ASSERT_TRUE(v14.ok());
  EXPECT_TRUE(v14->logprobs);
  EXPECT_EQ(v14->level_percent, 0);
  o.struct_size = kCallOptionsV1;  // an ABI 1.0 caller: the fields past it are not read
  auto old = read_call_options(&o);
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(static_cast<bool>(old->on_tokens));
  EXPECT_FALSE(old->logprobs);
}

TEST(Options, CountOptions) {
  auto d = read_count_options(nullptr);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->params, CountParams{});
  EXPECT_EQ(d->ids, nullptr);
  llmsvc_count_options o;
  init(&o);
  o.chat = 7;
  o.first_turn = 1;
  o.system_prompt = "sys";
  int32_t ids[4];
  o.ids = ids;
  o.ids_capacity = 4;
  auto r = read_count_options(&o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->params, (CountParams{true, true, "sys", {}}));
  EXPECT_EQ(r->ids, ids);
  EXPECT_EQ(r->ids_capacity, 4u);
  o.ids = nullptr;
  EXPECT_EQ(read_count_options(&o).status().code(), Code::invalid_argument);
  o.ids_capacity = 0;
  o.system_prompt = "\xc3";
  EXPECT_EQ(read_count_options(&o).status().code(), Code::invalid_utf8);
  o.system_prompt = nullptr;
  o.struct_size = kCountOptionsV1 - 1;
  EXPECT_EQ(read_count_options(&o).status().code(), Code::invalid_argument);
}

// Strings are cut to their field at a code point, the weight types to the C struct's eight, the
// devices joined; a caller's struct of the first size gets nothing past it.
TEST(Options, ModelInfoIsWrittenWithinItsFields) {
  ModelInfo in;
  in.ready = true;
  in.architecture = "llama";
  for (int i = 0; i < 100; ++i) in.name += "\xe6\x97\xa5";  // 300 bytes of 3-byte code points
  in.n_ctx = 8192;
  for (int i = 0; i < 10; ++i) in.weight_types.push_back({"T" + std::to_string(i), i + 1, uint64_t(100 - i)});
  in.eos = {2, "<|im_end|>"};
  in.devices = {"opencl:0", "cpu"};
  llmsvc_model_info out;
  init(&out);
  write_model_info(in, &out);
  EXPECT_EQ(out.ready, 1);
  EXPECT_STREQ(out.architecture, "llama");
  EXPECT_EQ(std::strlen(out.name), 255u) << "85 whole code points of 3 bytes";
  EXPECT_EQ(out.n_weight_types, LLMSVC_MAX_WEIGHT_TYPES);
  EXPECT_STREQ(out.weight_types[7].name, "T7");
  EXPECT_EQ(out.eos.id, 2);
  EXPECT_STREQ(out.eos.text, "<|im_end|>");
  EXPECT_EQ(out.bos.id, -1);
  EXPECT_STREQ(out.devices, "opencl:0,cpu");
  EXPECT_EQ(out.n_ctx, 8192);
}

TEST(TokenTrail, LogProbabilities) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {0.0f, std::log(3.0f), nan, -inf};
  EXPECT_NEAR(log_sum_exp(logits), std::log(4.0f), 1e-6);
  EXPECT_NEAR(token_logprob(logits, 1), std::log(0.75f), 1e-6);
  EXPECT_EQ(token_logprob(logits, 2), std::numeric_limits<float>::lowest()) << "NaN: no chance, but finite";
  EXPECT_EQ(token_logprob(logits, 3), std::numeric_limits<float>::lowest());
  EXPECT_EQ(token_logprob(logits, 9), std::numeric_limits<float>::lowest());
  EXPECT_LE(token_logprob(std::vector<float>{5.0f}, 0), 0.0f);
  TokenTrail trail(true);
  trail.add(7, -0.5f);
  trail.add(8, -1.5f);
  TokenPiece p = trail.take("xy", 8);
  EXPECT_EQ(std::vector<int32_t>(p.ids.begin(), p.ids.end()), (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(p.logprobs.size(), 2u);
  EXPECT_TRUE(trail.empty());
  TokenTrail plain(false);
  plain.add(1, 0.0f);
  EXPECT_TRUE(plain.take("", -1).logprobs.empty());
}

TEST(Service, DeleteWithOpenHandleIsBusy) {
  Service svc(std::make_unique<SetTransport>());
  ContextOptions o;
  o.id = "a";
  auto id = svc.create(o);  // counts one handle
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(svc.open_handles(), 1);
  ASSERT_TRUE(svc.open("a").ok());
  EXPECT_EQ(svc.open_handles(), 2);
  EXPECT_EQ(svc.remove("a").code(), Code::busy);
  svc.close("a");
  EXPECT_EQ(svc.remove("a").code(), Code::busy);  // one handle still open
  svc.close("a");
  EXPECT_EQ(svc.open_handles(), 0);
  EXPECT_TRUE(svc.remove("a").ok());
  EXPECT_EQ(svc.open("a").code(), Code::not_found);
  EXPECT_EQ(svc.remove("a").code(), Code::not_found);
  EXPECT_EQ(svc.open_handles(), 0);
}

TEST(Service, FailedCreateOrOpenCountsNothing) {
  Service svc(std::make_unique<SetTransport>());
  ContextOptions o;
  o.id = "x";
  ASSERT_TRUE(svc.create(o).ok());
  EXPECT_EQ(svc.create(o).status().code(), Code::exists);
  EXPECT_EQ(svc.open("y").code(), Code::not_found);
  EXPECT_EQ(svc.open_handles(), 1);
  svc.close("y");  // never opened: ignored
  EXPECT_EQ(svc.open_handles(), 1);
}

}  // namespace
}  // namespace llmsvc::api
