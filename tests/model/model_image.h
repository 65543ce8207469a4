// SPDX-License-Identifier: Apache-2.0
// ModelImage: a GGUF model held as editable metadata and tensors, for one-field mutations.
//
// Loaded from a real test model (so the unmutated image builds and runs), edited through
// the setters, then written with tests/gguf's GgufBuilder. Tensor data is copied as it is;
// a tensor whose type or shape changes gets a zero-filled buffer of the new size, so the
// file stays structurally valid and only the one mutation is wrong.
#pragma once

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/gguf/gguf_file.h"
#include "tests/gguf/gguf_builder.h"

namespace llmsvc::test {

using gguf::ValueType;
using gguf::testing::Bytes;

class ModelImage {
 public:
  struct Tensor {
    std::string name;
    uint32_t type = 0;
    std::vector<uint64_t> ne;
    std::vector<uint8_t> data;
    uint64_t skew = 0;  // extra bytes before this tensor's data (to misalign it)
  };

  // Throws std::runtime_error when the source cannot be read (a broken test setup).
  static ModelImage load(const std::string& path) {
    auto f = gguf::GgufFile::open(path);
    if (!f.ok()) throw std::runtime_error("cannot load " + path + ": " + f.status().message());
    ModelImage m;
    for (const auto& [key, v] : (*f)->metadata()) {
      if (key == "general.alignment") continue;  // written from `alignment`
      m.meta_.push_back({key, v.type, Bytes().value(v)});  // re-encoded as read
    }
    for (const gguf::TensorInfo& t : (*f)->tensors()) {
      m.tensors_.push_back({t.name, static_cast<uint32_t>(t.type), std::vector<uint64_t>(t.ne.begin(), t.ne.begin() + t.n_dims),
                            std::vector<uint8_t>(t.data, t.data + t.n_bytes)});
    }
    return m;
  }

  uint32_t alignment = 32;  // written as general.alignment when not 32

  // ---- metadata
  ModelImage& set(std::string_view key, ValueType type, const Bytes& payload) {
    for (auto& e : meta_) {
      if (e.key == key) {
        e.type = type;
        e.payload = payload;
        return *this;
      }
    }
    meta_.push_back({std::string(key), type, payload});
    return *this;
  }
  ModelImage& erase(std::string_view key) {
    std::erase_if(meta_, [&](const Meta& e) { return e.key == key; });
    return *this;
  }
  bool has(std::string_view key) const {
    for (const auto& e : meta_) {
      if (e.key == key) return true;
    }
    return false;
  }
  ModelImage& set_u32(std::string_view key, uint32_t v) { return set(key, ValueType::u32, Bytes().u32(v)); }
  ModelImage& set_u64(std::string_view key, uint64_t v) { return set(key, ValueType::u64, Bytes().u64(v)); }
  ModelImage& set_i32(std::string_view key, int32_t v) { return set(key, ValueType::i32, Bytes().i32(v)); }
  ModelImage& set_f32(std::string_view key, float v) { return set(key, ValueType::f32, Bytes().f32(v)); }
  ModelImage& set_bool(std::string_view key, bool v) { return set(key, ValueType::boolean, Bytes().u8(v ? 1 : 0)); }
  ModelImage& set_string(std::string_view key, std::string_view v) { return set(key, ValueType::string, Bytes().str(v)); }
  ModelImage& set_strings(std::string_view key, const std::vector<std::string>& v) {
    Bytes b;
    b.type(ValueType::string).u64(v.size());
    for (const auto& s : v) b.str(s);
    return set(key, ValueType::array, b);
  }
  ModelImage& set_i32s(std::string_view key, const std::vector<int32_t>& v) {
    Bytes b;
    b.type(ValueType::i32).u64(v.size());
    for (int32_t x : v) b.i32(x);
    return set(key, ValueType::array, b);
  }
  ModelImage& set_f32s(std::string_view key, const std::vector<float>& v) {
    Bytes b;
    b.type(ValueType::f32).u64(v.size());
    for (float x : v) b.f32(x);
    return set(key, ValueType::array, b);
  }

  // ---- tensors
  Tensor* tensor(std::string_view name) {
    for (auto& t : tensors_) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }
  ModelImage& erase_tensor(std::string_view name) {
    std::erase_if(tensors_, [&](const Tensor& t) { return t.name == name; });
    return *this;
  }
  // Changes (or adds) a tensor's type and shape; the data is zero-filled to the new size.
  ModelImage& reshape(std::string_view name, uint32_t type, const std::vector<uint64_t>& ne) {
    Tensor* t = tensor(name);
    if (!t) {
      tensors_.push_back({std::string(name), type, ne, {}});
      t = &tensors_.back();
    }
    t->type = type;
    t->ne = ne;
    t->data.assign(bytes_of(type, ne), 0);
    return *this;
  }

  std::vector<uint8_t> bytes() const {
    // The header's length does not depend on the offsets' values: a first build finds
    // where the data section starts, so that tensors can be placed at file positions
    // aligned to 32 bytes (plus their skew) whatever general.alignment says.
    const uint64_t data_start = build(std::vector<uint64_t>(tensors_.size(), 0)).size();
    const uint64_t align = std::max<uint64_t>(alignment, 32);
    std::vector<uint64_t> offsets;
    uint64_t end = data_start;
    for (const Tensor& t : tensors_) {
      const uint64_t pos = (end + align - 1) / align * align + t.skew;
      offsets.push_back(pos - data_start);
      end = pos + t.data.size();
    }
    std::vector<uint8_t> out = build(offsets);
    for (size_t k = 0; k < tensors_.size(); ++k) {
      out.resize(data_start + offsets[k], 0);
      out.insert(out.end(), tensors_[k].data.begin(), tensors_[k].data.end());
    }
    return out;
  }

  void write(const std::string& path) const {
    const std::vector<uint8_t> b = bytes();
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    if (!f) throw std::runtime_error("cannot write " + path);
  }

  // Bytes of a tensor per the reader's rule (0 for an unknown type or a shape it refuses).
  static uint64_t bytes_of(uint32_t type, const std::vector<uint64_t>& ne) {
    const auto size = gguf::tensor_size(type, ne);
    return size.ok() ? size->bytes : 0;
  }

 private:
  struct Meta {
    std::string key;
    ValueType type;
    Bytes payload;
  };

  // Header, metadata, tensor infos with these offsets, and the padding to the data section.
  std::vector<uint8_t> build(const std::vector<uint64_t>& offsets) const {
    gguf::testing::GgufBuilder b;
    b.alignment = alignment;
    b.data_size = 0;  // bytes() appends the real tensor bytes
    if (alignment != 32) b.kv_u32("general.alignment", alignment);
    for (const auto& e : meta_) b.kv(e.key, e.type, e.payload);
    for (size_t k = 0; k < tensors_.size(); ++k) b.tensor_at(tensors_[k].name, tensors_[k].type, tensors_[k].ne, offsets[k]);
    return b.build();
  }

  std::vector<Meta> meta_;
  std::vector<Tensor> tensors_;
};

}  // namespace llmsvc::test
