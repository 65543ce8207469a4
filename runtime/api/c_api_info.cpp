// SPDX-License-Identifier: Apache-2.0
// The C entry points of the model and service information (llmsvc.h, since ABI 1.2): model
// info (also the readiness query) and token counting.
#include <climits>
#include <string>
#include <string_view>

#include "llmsvc/llmsvc.h"
#include "runtime/api/boundary.h"
#include "runtime/api/handles.h"
#include "runtime/api/info_options.h"
#include "runtime/api/last_error.h"
#include "runtime/api/options.h"
#include "runtime/api/validate.h"

using llmsvc::api::fail;
using llmsvc::api::guarded;

extern "C" {

void llmsvc_model_info_init(llmsvc_model_info* info) {
  if (info) llmsvc::api::init(info);
}

void llmsvc_count_options_init(llmsvc_count_options* options) {
  if (options) llmsvc::api::init(options);
}

llmsvc_status llmsvc_model_info_get(llmsvc_service* service, llmsvc_model_info* out) {
  return guarded([&] {
    if (!service) return fail(LLMSVC_ERR_INVALID_ARGUMENT, "service is NULL");
    if (!out) return fail(LLMSVC_ERR_INVALID_ARGUMENT, "out is NULL");
    if (auto st = llmsvc::api::check_result_size(out->struct_size, llmsvc::api::kModelInfoV1, "llmsvc_model_info");
        !st.ok()) {
      return fail(st);
    }
    auto info = service->service->transport().model_info();
    if (!info.ok()) return fail(info.status());
    llmsvc::api::write_model_info(*info, out);
    return LLMSVC_OK;
  });
}

llmsvc_status llmsvc_adapter_list(llmsvc_service* service, llmsvc_name_fn fn, void* user) {
  return guarded([&] {
    if (!service) return fail(LLMSVC_ERR_INVALID_ARGUMENT, "service is NULL");
    if (!fn) return fail(LLMSVC_ERR_INVALID_ARGUMENT, "fn is NULL");
    auto names = service->service->transport().adapters();
    if (!names.ok()) return fail(names.status());
    for (const std::string& name : *names)
      if (fn(name.c_str(), user) != 0) break;
    return LLMSVC_OK;
  });
}

llmsvc_status llmsvc_count_tokens(llmsvc_service* service, const char* text, size_t len,
                                  const llmsvc_count_options* options, int32_t* out_count) {
  return guarded([&] {
    if (!service) return fail(LLMSVC_ERR_INVALID_ARGUMENT, "service is NULL");
    if (!out_count) return fail(LLMSVC_ERR_INVALID_ARGUMENT, "out_count is NULL");
    if (auto st = llmsvc::api::check_utf8(text, len, "text"); !st.ok()) return fail(st);
    auto req = llmsvc::api::read_count_options(options);
    if (!req.ok()) return fail(req.status());
    if (!req->params.messages.empty() && len > 0)
      return fail(LLMSVC_ERR_INVALID_ARGUMENT, "text and messages are both given: ", "count one of them");
    // A token is at least a byte (and BOS): a count past int32 cannot come from a shorter text.
    if (len > static_cast<size_t>(INT32_MAX) - 16)
      return fail(LLMSVC_ERR_CONTEXT_OVERFLOW, "text too long to count: ", std::to_string(len) + " bytes");
    auto counted = service->service->transport().count_tokens(std::string_view(text ? text : "", len), req->params,
                                                              req->ids_capacity);
    if (!counted.ok()) return fail(counted.status());
    for (size_t k = 0; k < counted->ids.size() && k < req->ids_capacity; ++k) req->ids[k] = counted->ids[k];
    *out_count = counted->count;
    return LLMSVC_OK;
  });
}

}  // extern "C"
