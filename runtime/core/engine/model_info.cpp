// SPDX-License-Identifier: Apache-2.0
// describe_model: a model's figures from its GGUF file, configuration and tokenizer.
#include "runtime/core/engine/model_info.h"

#include <algorithm>
#include <map>

#include "runtime/core/gguf/gguf_types.h"
#include "runtime/core/model/model.h"
#include "runtime/core/tokenizer/tokenizer.h"

namespace llmsvc {
namespace {

// Text of the file cut to kMaxInfoNameBytes at a code point start (the C struct's room).
std::string bounded(std::string_view s) {
  if (s.size() <= kMaxInfoNameBytes) return std::string(s);
  size_t cut = kMaxInfoNameBytes;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return std::string(s.substr(0, cut));
}

SpecialToken special(const Tokenizer& tok, int32_t id) {
  SpecialToken t;
  if (id < 0 || id >= tok.n_vocab()) return t;
  t.id = id;
  t.text = bounded(tok.token_to_piece(id, /*render_special=*/true));
  return t;
}

}  // namespace

ModelInfo describe_model(const Model& model) {
  const gguf::GgufFile& f = model.file();
  const ModelConfig& c = model.config();
  ModelInfo info;
  info.architecture = bounded(c.arch_name);
  info.name = bounded(f.get_string("general.name").value_or(""));
  info.n_ctx_train = c.n_ctx_train;
  info.n_vocab = c.n_vocab;
  info.n_layer = c.n_layer;
  info.n_embd = c.n_embd;
  info.n_head = c.n_head;
  info.n_head_kv = c.n_head_kv;
  std::map<std::string, WeightTypeCount> by_type;
  for (const gguf::TensorInfo& t : f.tensors()) {
    info.n_params += t.n_elems;
    info.weight_bytes += t.n_bytes;
    const auto* traits = gguf::type_traits(static_cast<uint32_t>(t.type));
    const std::string name =
        traits ? std::string(traits->name) : "type " + std::to_string(static_cast<uint32_t>(t.type));
    WeightTypeCount& w = by_type[name];
    w.type = name;
    w.tensors++;
    w.bytes += t.n_bytes;
  }
  for (auto& [name, w] : by_type) info.weight_types.push_back(std::move(w));
  // The dominant type first; ties by name, so the order never depends on the file's.
  std::ranges::sort(info.weight_types, [](const WeightTypeCount& a, const WeightTypeCount& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.type < b.type;
  });
  if (info.weight_types.size() > kMaxWeightTypes) info.weight_types.resize(kMaxWeightTypes);
  info.has_chat_template = f.find("tokenizer.chat_template") != nullptr;
  const Tokenizer& tok = model.tokenizer();
  info.bos = special(tok, tok.bos());
  info.eos = special(tok, tok.eos());
  info.eot = special(tok, tok.eot());
  return info;
}

}  // namespace llmsvc
