// SPDX-License-Identifier: Apache-2.0
// The C entry points of llmsvc.h: argument checks, then dispatch to the service's transport.
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "llmsvc/llmsvc.h"
#include "runtime/api/boundary.h"
#include "runtime/api/embedded_transport.h"
#include "runtime/api/handles.h"
#include "runtime/api/last_error.h"
#include "runtime/api/options.h"
#include "runtime/api/validate.h"
#include "runtime/client/unix_transport.h"

using llmsvc::api::fail;
using llmsvc::api::guarded;

namespace {

llmsvc_status null_arg(const char* name) { return fail(LLMSVC_ERR_INVALID_ARGUMENT, name, " is NULL"); }

// llmsvc_call, or (reply_only) llmsvc_context_generate: the same call without a prompt.
llmsvc_status run_call(llmsvc_context* context, const char* prompt, size_t len, const llmsvc_call_options* options,
                       llmsvc_token_fn on_piece, void* user, llmsvc_call_result* out, bool reply_only) {
  return guarded([&] {
    if (!context) return null_arg("context");
    if (auto st = llmsvc::api::check_utf8(prompt, len, "prompt"); !st.ok()) return fail(st);
    auto params = llmsvc::api::read_call_options(options);
    if (!params.ok()) return fail(params.status());
    params->reply_only = reply_only;
    if (out) {
      auto st = llmsvc::api::check_result_size(out->struct_size, llmsvc::api::kCallResultV1, "llmsvc_call_result");
      if (!st.ok()) return fail(st);
    }
    // A cancel that came while idle is a no-op (header): only one during this call counts.
    context->cancel.store(false, std::memory_order_relaxed);
    params->cancel = &context->cancel;
    llmsvc::PieceFn piece_fn = [&](std::string_view piece, int32_t token) {
      return on_piece == nullptr || on_piece(piece.data(), piece.size(), token, user) == 0;
    };
    llmsvc::CallStats stats;
    auto st = context->service->transport().call(context->id, std::string_view(prompt ? prompt : "", len), *params,
                                                 piece_fn, &stats);
    // A cancelled call still reports what it did (see llmsvc_call in the header).
    if (out && (st.ok() || st.code() == llmsvc::Code::cancelled)) llmsvc::api::write_call_result(stats, out);
    if (!st.ok()) return fail(st);
    return LLMSVC_OK;
  });
}

}  // namespace

extern "C" {

uint32_t llmsvc_abi_version(void) { return LLMSVC_ABI_VERSION; }

const char* llmsvc_status_name(llmsvc_status status) { return llmsvc::api::status_name(status); }

const char* llmsvc_last_error(void) { return llmsvc::api::last_error(); }

void llmsvc_bind_options_init(llmsvc_bind_options* options) {
  if (options) llmsvc::api::init(options);
}
void llmsvc_context_options_init(llmsvc_context_options* options) {
  if (options) llmsvc::api::init(options);
}
void llmsvc_call_options_init(llmsvc_call_options* options) {
  if (options) llmsvc::api::init(options);
}
void llmsvc_call_result_init(llmsvc_call_result* result) {
  if (result) llmsvc::api::init(result);
}
void llmsvc_stats_init(llmsvc_stats* stats) {
  if (stats) llmsvc::api::init(stats);
}

llmsvc_status llmsvc_bind(const llmsvc_bind_options* options, llmsvc_service** out) {
  return guarded([&] {
    if (!out) return null_arg("out");
    auto config = llmsvc::api::read_bind_options(options);
    if (!config.ok()) return fail(config.status());
    auto transport = config->target == llmsvc::api::TargetKind::unix_socket
                         ? llmsvc::client::make_unix_transport(config->socket_path)
                         : llmsvc::api::make_embedded_transport(config->engine);
    if (!transport.ok()) return fail(transport.status());
    auto handle = std::make_unique<llmsvc_service>();
    handle->service = std::make_shared<llmsvc::api::Service>(std::move(transport).value());
    *out = handle.release();
    return LLMSVC_OK;
  });
}

void llmsvc_unbind(llmsvc_service* service) {
  // Contexts still open keep the Service alive through their shared_ptr.
  std::unique_ptr<llmsvc_service> owned(service);
}

llmsvc_status llmsvc_context_new(llmsvc_service* service, const llmsvc_context_options* options, llmsvc_context** out) {
  return guarded([&] {
    if (!service) return null_arg("service");
    if (!out) return null_arg("out");
    auto opts = llmsvc::api::read_context_options(options);
    if (!opts.ok()) return fail(opts.status());
    auto handle = std::make_unique<llmsvc_context>();  // before create: nothing to undo if it throws
    auto id = service->service->create(*opts);
    if (!id.ok()) return fail(id.status());
    handle->service = service->service;
    handle->id = std::move(id).value();
    *out = handle.release();
    return LLMSVC_OK;
  });
}

llmsvc_status llmsvc_context_fork(llmsvc_context* parent, const char* id, llmsvc_context** out) {
  return guarded([&] {
    if (!parent) return null_arg("parent");
    if (!out) return null_arg("out");
    if (id) {
      if (auto st = llmsvc::api::check_id(id); !st.ok()) return fail(st);
    }
    auto handle = std::make_unique<llmsvc_context>();
    auto made = parent->service->fork(parent->id, id ? id : "");
    if (!made.ok()) return fail(made.status());
    handle->service = parent->service;
    handle->id = std::move(made).value();
    *out = handle.release();
    return LLMSVC_OK;
  });
}

llmsvc_status llmsvc_context_open(llmsvc_service* service, const char* id, llmsvc_context** out) {
  return guarded([&] {
    if (!service) return null_arg("service");
    if (!out) return null_arg("out");
    if (auto st = llmsvc::api::check_id(id); !st.ok()) return fail(st);
    auto handle = std::make_unique<llmsvc_context>();
    handle->id = id;
    if (auto st = service->service->open(handle->id); !st.ok()) return fail(st);
    handle->service = service->service;
    *out = handle.release();
    return LLMSVC_OK;
  });
}

const char* llmsvc_context_id(const llmsvc_context* context) { return context ? context->id.c_str() : ""; }

void llmsvc_context_close(llmsvc_context* context) {
  std::unique_ptr<llmsvc_context> owned(context);
  if (owned) owned->service->close(owned->id);
}

llmsvc_status llmsvc_context_delete(llmsvc_service* service, const char* id) {
  return guarded([&] {
    if (!service) return null_arg("service");
    if (auto st = llmsvc::api::check_id(id); !st.ok()) return fail(st);
    if (auto st = service->service->remove(id); !st.ok()) return fail(st);
    return LLMSVC_OK;
  });
}

llmsvc_status llmsvc_context_cancel(llmsvc_context* context) {
  return guarded([&] {
    if (!context) return null_arg("context");
    context->cancel.store(true, std::memory_order_relaxed);
    context->service->transport().cancel(context->id);
    return LLMSVC_OK;
  });
}

llmsvc_status llmsvc_call(llmsvc_context* context, const char* prompt, size_t len, const llmsvc_call_options* options,
                          llmsvc_token_fn on_piece, void* user, llmsvc_call_result* out) {
  return run_call(context, prompt, len, options, on_piece, user, out, false);
}

llmsvc_status llmsvc_context_generate(llmsvc_context* context, const llmsvc_call_options* options,
                                      llmsvc_token_fn on_piece, void* user, llmsvc_call_result* out) {
  return run_call(context, nullptr, 0, options, on_piece, user, out, true);
}

llmsvc_status llmsvc_get_stats(llmsvc_service* service, llmsvc_stats* out) {
  return guarded([&] {
    if (!service) return null_arg("service");
    if (!out) return null_arg("out");
    if (auto st = llmsvc::api::check_result_size(out->struct_size, llmsvc::api::kStatsV1, "llmsvc_stats"); !st.ok()) {
      return fail(st);
    }
    auto stats = service->service->transport().stats();
    if (!stats.ok()) return fail(stats.status());
    llmsvc::api::write_stats(*stats, service->service->open_handles(), out);
    return LLMSVC_OK;
  });
}

void llmsvc_context_info_init(llmsvc_context_info* info) {
  if (info) llmsvc::api::init(info);
}

llmsvc_status llmsvc_context_info_get(llmsvc_service* service, const char* id, llmsvc_context_info* out) {
  return guarded([&] {
    if (!service) return null_arg("service");
    if (!out) return null_arg("out");
    if (auto st = llmsvc::api::check_id(id); !st.ok()) return fail(st);
    if (auto st = llmsvc::api::check_result_size(out->struct_size, llmsvc::api::kContextInfoV1, "llmsvc_context_info");
        !st.ok()) {
      return fail(st);
    }
    auto info = service->service->transport().context_info(id);
    if (!info.ok()) return fail(info.status());
    llmsvc::api::write_context_info(*info, out);
    return LLMSVC_OK;
  });
}

llmsvc_status llmsvc_context_list(llmsvc_service* service, llmsvc_context_fn fn, void* user) {
  return guarded([&] {
    if (!service) return null_arg("service");
    if (!fn) return null_arg("fn");
    auto ids = service->service->transport().list_contexts();
    if (!ids.ok()) return fail(ids.status());
    for (const std::string& id : *ids) {
      if (fn(id.c_str(), user) != 0) break;
    }
    return LLMSVC_OK;
  });
}

}  // extern "C"
