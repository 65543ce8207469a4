// SPDX-License-Identifier: Apache-2.0
// `llmsvc info`: a GGUF file's metadata and tensor table, without loading the model.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "runtime/core/gguf/gguf_file.h"
#include "runtime/core/gguf/gguf_types.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace llmsvc::cli {
namespace {

using gguf::Value;
using gguf::ValueType;

constexpr size_t kMaxShownBytes = 60;  // longer strings (chat templates) are cut
constexpr size_t kMaxShownElems = 8;   // longer arrays (vocabularies) are summarized

// Cut at a code-point boundary so the output stays UTF-8.
std::string clip(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut);
}

std::string quoted(const std::string& s) {
  std::string body;
  for (char c : clip(s, kMaxShownBytes)) {
    if (c == '\n') {
      body += "\\n";
    } else if (c == '\t') {
      body += "\\t";
    } else if (c == '"' || c == '\\') {
      body += '\\', body += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      body += '?';
    } else {
      body += c;
    }
  }
  std::string out = "\"" + body + "\"";
  if (s.size() > kMaxShownBytes) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string number(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", f);
  return buf;
}

std::string type_name(ValueType t) { return std::string(gguf::value_type_name(static_cast<uint32_t>(t))); }

std::string format_scalar(const Value& v) {
  switch (v.type) {
    case ValueType::u8:
    case ValueType::u16:
    case ValueType::u32:
    case ValueType::u64:
      return std::to_string(v.u);
    case ValueType::i8:
    case ValueType::i16:
    case ValueType::i32:
    case ValueType::i64:
      return std::to_string(v.i);
    case ValueType::f32:
    case ValueType::f64:
      return number(v.f);
    case ValueType::boolean:
      return v.u ? "true" : "false";
    case ValueType::string:
      return quoted(v.s);
    case ValueType::array:
      break;
  }
  return "?";
}

std::string format_array(const Value& v) {
  const uint64_t n = v.array_size;
  const bool is_str = v.elem_type == ValueType::string, is_arr = v.elem_type == ValueType::array;
  if (n > kMaxShownElems || is_arr) {
    std::string what = is_str ? "strings" : is_arr ? "arrays" : type_name(v.elem_type) + " values";
    return "[" + std::to_string(n) + " " + what + "]";
  }
  std::string out = "[";
  for (uint64_t k = 0; k < n; ++k) {
    if (k) out += ", ";
    if (is_str) {
      out += quoted(v.strs[k]);
    } else if (v.elem_type == ValueType::f32 || v.elem_type == ValueType::f64) {
      out += number(v.floats[k]);
    } else if (v.elem_type == ValueType::boolean) {
      out += v.uints[k] ? "true" : "false";
    } else if (!v.uints.empty()) {
      out += std::to_string(v.uints[k]);
    } else {
      out += std::to_string(v.ints[k]);
    }
  }
  return out + "]";
}

std::string shape(const gguf::TensorInfo& t) {
  std::string out;
  for (uint32_t d = 0; d < t.n_dims; ++d) out += (d ? " x " : "") + std::to_string(t.ne[d]);
  return out.empty() ? "scalar" : out;
}

std::string tensor_type(gguf::TensorType type) {
  const auto* traits = gguf::type_traits(static_cast<uint32_t>(type));
  return traits ? std::string(traits->name) : "type " + std::to_string(static_cast<uint32_t>(type));
}

// "98362432 bytes (93.8 MiB)".
std::string bytes_text(uint64_t bytes) {
  std::string out = std::to_string(bytes) + " bytes";
  if (bytes >= (1u << 20)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " (%.1f MiB)", static_cast<double>(bytes) / (1 << 20));
    out += buf;
  }
  return out;
}

int info(const std::string& model) {
  ModelArgs margs;
  margs.model = model;
  auto path = model_path(margs);
  if (!path.ok()) return report(path.status());
  auto opened = gguf::GgufFile::open(*path);
  if (!opened.ok()) return report(opened.status());
  const gguf::GgufFile& f = **opened;

  std::printf("file        %s\n", f.path().c_str());
  std::printf("gguf        v%u, %s, alignment %u\n", f.version(), bytes_text(f.file_size()).c_str(), f.alignment());
  std::printf("metadata    %zu keys\n", f.metadata().size());
  std::printf("tensors     %zu\n\n", f.tensors().size());

  size_t key_w = 3, type_w = 4;
  for (const auto& [key, v] : f.metadata()) {
    key_w = std::max(key_w, key.size());
    std::string t = v.type == ValueType::array ? "array[" + type_name(v.elem_type) + "]" : type_name(v.type);
    type_w = std::max(type_w, t.size());
  }
  std::printf("%-*s  %-*s  %s\n", int(key_w), "KEY", int(type_w), "TYPE", "VALUE");
  for (const auto& [key, v] : f.metadata()) {
    bool arr = v.type == ValueType::array;
    std::string t = arr ? "array[" + type_name(v.elem_type) + "]" : type_name(v.type);
    std::printf("%-*s  %-*s  %s\n", int(key_w), key.c_str(), int(type_w), t.c_str(),
                (arr ? format_array(v) : format_scalar(v)).c_str());
  }

  size_t name_w = 4, shape_w = 5;
  for (const auto& t : f.tensors()) {
    name_w = std::max(name_w, t.name.size());
    shape_w = std::max(shape_w, shape(t).size());
  }
  std::printf("\n%-*s  %-6s  %-*s  %s\n", int(name_w), "NAME", "TYPE", int(shape_w), "SHAPE", "BYTES");
  uint64_t total = 0;
  std::map<std::string, std::pair<size_t, uint64_t>> by_type;  // count, bytes
  for (const auto& t : f.tensors()) {
    std::string ty = tensor_type(t.type);
    std::printf("%-*s  %-6s  %-*s  %llu\n", int(name_w), t.name.c_str(), ty.c_str(), int(shape_w), shape(t).c_str(),
                static_cast<unsigned long long>(t.n_bytes));
    total += t.n_bytes;
    auto& [count, bytes] = by_type[ty];
    ++count, bytes += t.n_bytes;
  }
  std::printf("\n%zu tensors, %s:", f.tensors().size(), bytes_text(total).c_str());
  for (const auto& [ty, cb] : by_type) std::printf("  %s x%zu", ty.c_str(), cb.first);
  std::printf("\n");
  return 0;
}

}  // namespace

void add_info_command(CLI::App& app, int& exit_code) {
  auto model = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("info", "print a GGUF file's metadata and tensor table");
  cmd->add_option("model", *model, "GGUF model file (default: the default model)");
  cmd->callback([model, &exit_code] { exit_code = info(*model); });
}

}  // namespace llmsvc::cli
