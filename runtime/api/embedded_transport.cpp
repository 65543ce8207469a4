// SPDX-License-Identifier: Apache-2.0
// EmbeddedTransport: a thin adapter over llmsvc::Engine, which is already thread-safe.
#include "runtime/api/embedded_transport.h"

#include <utility>

namespace llmsvc::api {
namespace {

class EmbeddedTransport final : public Transport {
 public:
  explicit EmbeddedTransport(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {}

  Result<std::string> create_context(const ContextOptions& options) override {
    return engine_->create_context(options);
  }
  Status open_context(std::string_view id) override { return engine_->open_context(id); }
  // The app's last handle closed: the engine lets the context go, so another binding (or
  // process) on the same state can delete or open it; a reopen loads it from its files.
  void close_context(std::string_view id) override { engine_->release_context(id); }
  Status delete_context(std::string_view id) override { return engine_->delete_context(id); }
  Result<std::string> fork_context(std::string_view parent, std::string_view id) override {
    return engine_->fork_context(parent, id);
  }
  Status call(std::string_view id, std::string_view prompt, const CallParams& params, const PieceFn& on_piece,
              CallStats* stats) override {
    return engine_->call(id, prompt, params, on_piece, stats);
  }
  // The engine polls the handle's flag itself; nothing else to tell it.
  void cancel(std::string_view) override {}
  Result<EngineStats> stats() override { return engine_->stats(); }
  Result<std::vector<std::string>> list_contexts() override { return engine_->list_contexts(); }
  Result<ContextInfo> context_info(std::string_view id) override { return engine_->context_info(id); }
  Result<ModelInfo> model_info() override { return engine_->model_info(); }
  Result<std::vector<std::string>> adapters() override { return engine_->model_info().adapters; }
  Status append_messages(std::string_view id, std::span<const ChatMessage> messages) override {
    return engine_->append_messages(id, messages, 0);
  }
  Status truncate_messages(std::string_view id, size_t n) override { return engine_->truncate_messages(id, n); }
  Result<std::vector<ChatMessage>> messages(std::string_view id, size_t first, size_t max) override {
    return engine_->messages(id, first, max);
  }
  Result<TokenCount> count_tokens(std::string_view text, const CountParams& params, size_t max_ids) override {
    std::vector<int32_t> ids;
    if (params.messages.empty()) {
      ids = engine_->prompt_ids(text, params);
    } else {
      auto counted = engine_->message_ids(params);
      if (!counted.ok()) return counted.status();
      ids = std::move(counted).value();
    }
    TokenCount c;
    c.count = static_cast<int32_t>(ids.size());
    if (ids.size() > max_ids) ids.resize(max_ids);
    c.ids = std::move(ids);
    return c;
  }

 private:
  std::unique_ptr<Engine> engine_;
};

}  // namespace

Result<std::unique_ptr<Transport>> make_embedded_transport(const EngineOptions& options) {
  auto engine = Engine::create(options);
  if (!engine.ok()) return engine.status();
  return std::unique_ptr<Transport>(std::make_unique<EmbeddedTransport>(std::move(engine).value()));
}

}  // namespace llmsvc::api
