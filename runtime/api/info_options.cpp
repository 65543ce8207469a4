// SPDX-License-Identifier: Apache-2.0
// llmsvc_model_info and llmsvc_count_options: defaults, reading, writing.
#include "runtime/api/info_options.h"

#include <cstdio>
#include <string>

#include "runtime/api/message_options.h"
#include "runtime/api/struct_copy.h"
#include "runtime/api/validate.h"

namespace llmsvc::api {
namespace {

// `s` into a NUL-terminated field of N bytes, cut at a code point boundary when longer.
template <size_t N>
void put_text(char (&field)[N], const std::string& s) {
  size_t n = std::min(s.size(), N - 1);
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  std::memcpy(field, s.data(), n);
  field[n] = '\0';
}

void put_special(llmsvc_special_token& out, const SpecialToken& t) {
  out.id = t.id;
  put_text(out.text, t.text);
}

}  // namespace

void init(llmsvc_model_info* i) {
  *i = llmsvc_model_info{};
  i->struct_size = sizeof(llmsvc_model_info);
  i->bos.id = i->eos.id = i->eot.id = -1;
}

void init(llmsvc_count_options* o) {
  *o = llmsvc_count_options{};
  o->struct_size = sizeof(llmsvc_count_options);
}

Result<CountRequest> read_count_options(const llmsvc_count_options* options) {
  auto in = copy_in(options, kCountOptionsV1, "llmsvc_count_options");
  if (!in.ok()) return in.status();
  CountRequest r;
  r.params.chat = in->chat != 0;
  r.params.first_turn = in->first_turn != 0;
  if (in->system_prompt != nullptr) {
    LLMSVC_RETURN_IF_ERROR(check_cstr(in->system_prompt, "system_prompt"));
    r.params.system_prompt = in->system_prompt;
  }
  if (in->ids == nullptr && in->ids_capacity > 0)
    return Status(Code::invalid_argument, "ids is NULL but ids_capacity is " + std::to_string(in->ids_capacity));
  r.ids = in->ids;
  r.ids_capacity = in->ids == nullptr ? 0 : in->ids_capacity;
  if (in->messages != nullptr || in->n_messages > 0) {
    auto messages = read_messages(in->messages, in->n_messages, "messages");
    if (!messages.ok()) return messages.status();
    if (!r.params.chat && !messages->empty())
      return Status(Code::invalid_argument, "messages are counted in a chat context only: set chat");
    r.params.messages = std::move(messages).value();
  }
  return r;
}

void write_model_info(const ModelInfo& info, llmsvc_model_info* out) {
  llmsvc_model_info r;
  init(&r);
  r.ready = info.ready ? 1 : 0;
  put_text(r.architecture, info.architecture);
  put_text(r.name, info.name);
  r.n_params = info.n_params;
  r.n_ctx_train = info.n_ctx_train;
  r.n_ctx = info.n_ctx;
  r.n_vocab = info.n_vocab;
  r.n_layer = info.n_layer;
  r.n_embd = info.n_embd;
  r.n_head = info.n_head;
  r.n_head_kv = info.n_head_kv;
  r.weight_bytes = info.weight_bytes;
  const size_t n_types = std::min<size_t>(info.weight_types.size(), LLMSVC_MAX_WEIGHT_TYPES);
  r.n_weight_types = static_cast<int32_t>(n_types);
  for (size_t k = 0; k < n_types; ++k) {
    put_text(r.weight_types[k].name, info.weight_types[k].type);
    r.weight_types[k].tensors = info.weight_types[k].tensors;
    r.weight_types[k].bytes = info.weight_types[k].bytes;
  }
  r.has_chat_template = info.has_chat_template ? 1 : 0;
  put_special(r.bos, info.bos);
  put_special(r.eos, info.eos);
  put_special(r.eot, info.eot);
  std::string devices;
  for (const std::string& d : info.devices) devices += (devices.empty() ? "" : ",") + d;
  put_text(r.devices, devices);
  copy_out(r, out);
}

}  // namespace llmsvc::api
