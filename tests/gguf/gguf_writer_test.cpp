// SPDX-License-Identifier: Apache-2.0
// GgufWriter: every value type and several tensor types at several alignments read back
// exactly; a copy of a model with a tensor replaced (from a span and from a streaming
// source) and a key added; unchanged copies byte-identical, of its own files and of
// gguf-py's and llama.cpp's; refusals of bad sizes, names and values; and failed writes (unwritable directory, a file size limit hit mid-write, a
// source's error) that leave no file at the target and no temporary file.
#include "runtime/core/gguf/gguf_writer.h"

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "base/file_io.h"
#include "runtime/core/gguf/gguf_file.h"
#include "tests/common/file_facts.h"
#include "tests/gguf/gguf_builder.h"
#include "tests/common/test_paths.h"

namespace llmsvc::gguf {
namespace {

using testing::kI64Min;
using testing::kU64Max;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t k = 0; k < n; ++k) b[k] = static_cast<uint8_t>(k * 31 + seed);
  return b;
}

std::span<const uint8_t> bytes_of(const TensorInfo& t) { return {t.data, static_cast<size_t>(t.n_bytes)}; }
std::vector<uint8_t> vec(std::span<const uint8_t> s) { return {s.begin(), s.end()}; }

// The names in a directory, "." and ".." left out.
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
    }
    ::closedir(d);
  }
  return names;
}

class ScratchDir {
 public:
  ScratchDir() : path_(test::make_temp_dir("gguf-writer")) {}
  ~ScratchDir() {
    ::chmod(path_.c_str(), 0700);
    (void)fileio::remove_tree(path_);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Every field of two values, floats compared bit for bit.
void expect_same_value(const Value& a, const Value& b, const std::string& where) {
  EXPECT_EQ(a.type, b.type) << where;
  EXPECT_EQ(a.u, b.u) << where;
  EXPECT_EQ(a.i, b.i) << where;
  EXPECT_EQ(std::memcmp(&a.f, &b.f, sizeof a.f), 0) << where << ": " << a.f << " vs " << b.f;
  EXPECT_EQ(a.s, b.s) << where;
  EXPECT_EQ(a.elem_type, b.elem_type) << where;
  EXPECT_EQ(a.array_size, b.array_size) << where;
  EXPECT_EQ(a.strs, b.strs) << where;
  EXPECT_EQ(a.ints, b.ints) << where;
  EXPECT_EQ(a.uints, b.uints) << where;
  ASSERT_EQ(a.floats.size(), b.floats.size()) << where;
  for (size_t k = 0; k < a.floats.size(); ++k) {
    EXPECT_EQ(std::memcmp(&a.floats[k], &b.floats[k], sizeof(double)), 0) << where << " [" << k << "]";
  }
  ASSERT_EQ(a.arr.size(), b.arr.size()) << where;
  for (size_t k = 0; k < a.arr.size(); ++k) expect_same_value(a.arr[k], b.arr[k], where + "[" + std::to_string(k) + "]");
}

// A writer with every value type, scalar and array, and arrays of arrays; the keys in the
// order set in *keys.
GgufWriter all_values_writer(std::vector<std::string>* keys = nullptr) {
  GgufWriter w;
  const auto set = [&](std::string_view key, Value v) {
    EXPECT_TRUE(w.set(key, std::move(v)).ok()) << key;
    if (keys) keys->emplace_back(key);
  };
  set("t.u8", uint_value(ValueType::u8, 200));
  set("t.i8", int_value(ValueType::i8, -100));
  set("t.u16", uint_value(ValueType::u16, 60000));
  set("t.i16", int_value(ValueType::i16, -30000));
  set("t.u32", uint_value(ValueType::u32, 4000000000u));
  set("t.i32", int_value(ValueType::i32, -2000000000));
  set("t.f32", float_value(ValueType::f32, 0.1));  // rounded to float when made
  set("t.bool", bool_value(true));
  set("t.string", string_value("h\xc3\xa9llo"));
  set("t.u64", uint_value(ValueType::u64, kU64Max));
  set("t.i64", int_value(ValueType::i64, kI64Min));
  set("t.f64", float_value(ValueType::f64, -2.25e300));
  set("t.nan", float_value(ValueType::f64, std::nan("")));
  set("a.u8", uint_array(ValueType::u8, {0, 255}));
  set("a.i8", int_array(ValueType::i8, {-128, 127}));
  set("a.u16", uint_array(ValueType::u16, {65535}));
  set("a.i16", int_array(ValueType::i16, {-32768}));
  set("a.u32", uint_array(ValueType::u32, {}));
  set("a.i32", int_array(ValueType::i32, {-1, 0, 7}));
  set("a.f32", float_array(ValueType::f32, {0.5, -1.0, 1.0 / 3}));
  set("a.bool", uint_array(ValueType::boolean, {1, 0, 1}));
  set("a.string", string_array({"a", "", "ccc"}));
  set("a.u64", uint_array(ValueType::u64, {1, kU64Max}));
  set("a.i64", int_array(ValueType::i64, {kI64Min}));
  set("a.f64", float_array(ValueType::f64, {1e-300}));
  // [[i32: 1, 2], [string: "x"], [array: [u8: 9]]]
  set("a.nested", array_array({int_array(ValueType::i32, {1, 2}), string_array({"x"}),
                               array_array({uint_array(ValueType::u8, {9})})}));
  return w;
}

struct TensorSpec {
  std::string name;
  TensorType type{};
  std::vector<uint64_t> ne;
  std::vector<uint8_t> bytes;
};

// Tensors of several types and sizes (none a multiple of the larger alignments).
std::vector<TensorSpec> some_tensors() {
  std::vector<TensorSpec> ts = {
      {"w.f32", TensorType::F32, {4, 3}, {}},            // 48 bytes
      {"w.q8", TensorType::Q8_0, {64, 2}, {}},           // 4 blocks of 34
      {"w.f16", TensorType::F16, {3}, {}},               // 6
      {"w.q4k", TensorType::Q4_K, {256, 1, 2}, {}},      // 2 blocks of 144
      {"w.i32", TensorType::I32, {5}, {}},               // 20
      {"w.bf16", TensorType::BF16, {7, 1, 1, 2}, {}},    // 28, four dimensions
  };
  uint8_t seed = 1;
  for (TensorSpec& t : ts) t.bytes = pattern(tensor_size(static_cast<uint32_t>(t.type), t.ne)->bytes, seed++);
  return ts;
}

// ---- round trip

TEST(GgufWriter, EveryValueTypeAndTensorsReadBackAtEveryAlignment) {
  const std::vector<TensorSpec> specs = some_tensors();
  for (uint32_t align : {0u, 16u, 64u, 4096u}) {  // 0: no general.alignment key (32)
    SCOPED_TRACE("alignment " + std::to_string(align));
    std::vector<std::string> keys;
    GgufWriter w = all_values_writer(&keys);
    if (align != 0) {
      ASSERT_TRUE(w.set("general.alignment", uint_value(ValueType::u32, align)).ok());
      keys.emplace_back("general.alignment");
    }
    const uint32_t expect_align = align == 0 ? 32 : align;
    EXPECT_EQ(w.alignment(), expect_align);
    for (const TensorSpec& t : specs) ASSERT_TRUE(w.add_tensor(t.name, t.type, t.ne, t.bytes).ok()) << t.name;

    ScratchDir dir;
    const std::string path = dir.file("model.gguf");
    const Status s = w.write(path);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"model.gguf"});  // no temporary file left
    auto r = GgufFile::open(path);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const GgufFile& f = **r;
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.alignment(), expect_align);

    // Every key, in the order set, with the value set.
    EXPECT_EQ(std::vector<std::string>(f.metadata_order().begin(), f.metadata_order().end()), keys);
    for (std::string_view key : f.metadata_order()) {
      ASSERT_NE(w.find(key), nullptr) << key;
      expect_same_value(*f.find(key), *w.find(key), std::string(key));
    }
    // And independently of the writer's Values: what the getters see.
    EXPECT_EQ(f.get_uint("t.u8"), 200u);
    EXPECT_EQ(f.find("t.u8")->type, ValueType::u8);
    EXPECT_EQ(f.get_int("t.i8"), -100);
    EXPECT_EQ(f.get_uint("t.u16"), 60000u);
    EXPECT_EQ(f.get_int("t.i16"), -30000);
    EXPECT_EQ(f.get_uint("t.u32"), 4000000000u);
    EXPECT_EQ(f.get_int("t.i32"), -2000000000);
    EXPECT_EQ(f.get_float("t.f32"), static_cast<double>(0.1f));
    EXPECT_EQ(f.find("t.f32")->type, ValueType::f32);
    EXPECT_EQ(f.get_bool("t.bool"), true);
    EXPECT_EQ(f.get_string("t.string"), "h\xc3\xa9llo");
    EXPECT_EQ(f.get_uint("t.u64"), kU64Max);
    EXPECT_EQ(f.get_int("t.i64"), kI64Min);
    EXPECT_EQ(f.get_float("t.f64"), -2.25e300);
    EXPECT_TRUE(std::isnan(*f.get_float("t.nan")));
    EXPECT_EQ(*f.get_int_array("a.u8"), (std::vector<int64_t>{0, 255}));
    EXPECT_EQ(*f.get_int_array("a.i8"), (std::vector<int64_t>{-128, 127}));
    EXPECT_EQ(f.find("a.u32")->array_size, 0u);
    EXPECT_EQ(f.find("a.u32")->elem_type, ValueType::u32);
    EXPECT_EQ(*f.get_float_array("a.f32"), (std::vector<double>{0.5, -1.0, static_cast<float>(1.0 / 3)}));
    EXPECT_EQ(f.find("a.bool")->uints, (std::vector<uint64_t>{1, 0, 1}));
    EXPECT_EQ(*f.get_string_array("a.string"), (std::vector<std::string>{"a", "", "ccc"}));
    EXPECT_EQ(f.find("a.u64")->uints, (std::vector<uint64_t>{1, kU64Max}));
    const Value* nested = f.find("a.nested");
    ASSERT_EQ(nested->arr.size(), 3u);
    EXPECT_EQ(nested->arr[0].ints, (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(nested->arr[1].strs, (std::vector<std::string>{"x"}));
    EXPECT_EQ(nested->arr[2].arr.at(0).uints, (std::vector<uint64_t>{9}));

    // Every tensor, in order, with its type, dimensions and bytes, aligned in the file.
    ASSERT_EQ(f.tensors().size(), specs.size());
    const uint8_t* base = f.bytes().data();
    for (size_t k = 0; k < specs.size(); ++k) {
      const TensorInfo& t = f.tensors()[k];
      EXPECT_EQ(t.name, specs[k].name);
      EXPECT_EQ(t.type, specs[k].type) << t.name;
      EXPECT_EQ(std::vector<uint64_t>(t.ne.begin(), t.ne.begin() + t.n_dims), specs[k].ne) << t.name;
      EXPECT_EQ(vec(bytes_of(t)), specs[k].bytes) << t.name;
      EXPECT_EQ(t.offset % expect_align, 0u) << t.name;
      EXPECT_EQ(static_cast<uint64_t>(t.data - base) % expect_align, 0u) << t.name;
    }
    EXPECT_EQ(f.file_size() % expect_align, 0u);  // the last tensor is padded too
  }
}

// ---- copies

class GgufWriterCopy : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = test::data_dir() + "/models/llama-Q4_K.gguf";
    auto r = GgufFile::open(path_);
    ASSERT_TRUE(r.ok()) << r.status().message();
    src_ = std::move(r).value();
    ASSERT_GE(src_->tensors().size(), 3u);
  }
  std::string path_;
  std::unique_ptr<GgufFile> src_;
  ScratchDir dir_;
};

// A copy with one tensor's bytes replaced, one streamed in permuted order, and a key added:
// everything else as it was.
TEST_F(GgufWriterCopy, ReplacedTensorAndAddedKeyOthersUnchanged) {
  const GgufFile& src = *src_;
  auto w = GgufWriter::from_file(src);
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_TRUE(w->add_tensors_from(src).ok());
  ASSERT_EQ(w->tensor_count(), src.tensors().size());

  // Tensor 1: new bytes from a buffer.
  const TensorInfo& replaced = src.tensors()[1];
  const std::vector<uint8_t> fresh = pattern(replaced.n_bytes, 99);
  ASSERT_TRUE(w->set_tensor_data(replaced.name, fresh).ok());
  // The first 2-D tensor: its rows in reverse order, streamed a row at a time.
  const TensorInfo* permuted = nullptr;
  for (const TensorInfo& t : src.tensors()) {
    if (t.n_dims == 2 && t.ne[1] > 1 && &t != &replaced) {
      permuted = &t;
      break;
    }
  }
  ASSERT_NE(permuted, nullptr);
  const uint64_t rows = permuted->ne[1], row_bytes = permuted->n_bytes / rows;
  int calls = 0;
  ASSERT_TRUE(w->set_tensor_data(permuted->name, [&](const GgufWriter::Sink& sink) {
                  ++calls;
                  for (uint64_t r = rows; r-- > 0;) LLMSVC_RETURN_IF_ERROR(sink(bytes_of(*permuted).subspan(r * row_bytes, row_bytes)));
                  return Status::Ok();
                }).ok());
  ASSERT_TRUE(w->set("llmsvc.elastic.order", uint_array(ValueType::u32, {2, 0, 1})).ok());

  const std::string out = dir_.file("copy.gguf");
  const Status s = w->write(out);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(calls, 1);
  const mode_t umask_now = ::umask(0);
  ::umask(umask_now);
  EXPECT_EQ(test::mode_of(out), 0644u & ~umask_now);  // a model, not a secret
  auto r = GgufFile::open(out);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const GgufFile& copy = **r;

  // Keys: the source's, in its order and as read, then the new one.
  ASSERT_EQ(copy.metadata_order().size(), src.metadata_order().size() + 1);
  for (size_t k = 0; k < src.metadata_order().size(); ++k) {
    const std::string_view key = src.metadata_order()[k];
    EXPECT_EQ(copy.metadata_order()[k], key);
    expect_same_value(*copy.find(key), *src.find(key), std::string(key));
  }
  EXPECT_EQ(copy.metadata_order().back(), "llmsvc.elastic.order");
  EXPECT_EQ(*copy.get_int_array("llmsvc.elastic.order"), (std::vector<int64_t>{2, 0, 1}));

  // Tensors: the same names, types and shapes in the same order; bytes as set.
  ASSERT_EQ(copy.tensors().size(), src.tensors().size());
  for (size_t k = 0; k < src.tensors().size(); ++k) {
    const TensorInfo& a = src.tensors()[k];
    const TensorInfo& b = copy.tensors()[k];
    EXPECT_EQ(b.name, a.name);
    EXPECT_EQ(b.type, a.type) << a.name;
    EXPECT_EQ(b.n_dims, a.n_dims) << a.name;
    EXPECT_EQ(b.ne, a.ne) << a.name;
    if (a.name == replaced.name) {
      EXPECT_EQ(vec(bytes_of(b)), fresh);
    } else if (a.name == permuted->name) {
      for (uint64_t row = 0; row < rows; ++row) {
        ASSERT_EQ(vec(bytes_of(b).subspan(row * row_bytes, row_bytes)),
                  vec(bytes_of(a).subspan((rows - 1 - row) * row_bytes, row_bytes)))
            << a.name << " row " << row;
      }
    } else {
      EXPECT_TRUE(std::equal(bytes_of(a).begin(), bytes_of(a).end(), bytes_of(b).begin(), bytes_of(b).end())) << a.name;
    }
  }
}

// What this writer wrote, read back and written again unchanged, is the same bytes, beside
// it or over it; so is the image to_bytes() gives.
TEST(GgufWriter, UnchangedCopyOfItsOwnOutputIsByteIdentical) {
  ScratchDir dir;
  const std::vector<TensorSpec> specs = some_tensors();
  for (uint32_t align : {0u, 64u}) {
    GgufWriter w = all_values_writer();
    if (align != 0) {
      ASSERT_TRUE(w.set("general.alignment", uint_value(ValueType::u64, align)).ok());
    }
    for (const TensorSpec& t : specs) ASSERT_TRUE(w.add_tensor(t.name, t.type, t.ne, t.bytes).ok());
    const std::string first = dir.file("first.gguf"), second = dir.file("second.gguf");
    ASSERT_TRUE(w.write(first).ok());

    auto r = GgufFile::open(first);
    ASSERT_TRUE(r.ok()) << r.status().message();
    auto copy = GgufWriter::from_file(**r);
    ASSERT_TRUE(copy.ok()) << copy.status().message();
    ASSERT_TRUE(copy->add_tensors_from(**r).ok());
    ASSERT_TRUE(copy->write(second).ok());

    const std::string a = test::slurp(first), b = test::slurp(second);
    ASSERT_FALSE(a.empty());
    EXPECT_TRUE(a == b) << "alignment " << align << ": " << a.size() << " vs " << b.size() << " bytes";
    auto image = copy->to_bytes();
    ASSERT_TRUE(image.ok());
    EXPECT_TRUE(std::string(image->begin(), image->end()) == a);
    // Over the very file it reads from (elastify rewriting a model in place): the mapping
    // keeps the old file's bytes until it is unmapped.
    ASSERT_TRUE(copy->write(first).ok());
    EXPECT_TRUE(test::slurp(first) == a);
    EXPECT_EQ(entries(dir.path()).size(), 2u);
  }
}

// Files from the reference writers (the golden models: gguf-py, then llama.cpp's quantizer;
// the seed corpus: gguf-py) copied unchanged come back byte for byte: the same metadata
// encoding, offsets and padding. A v2 file comes back as v3, all else the same.
TEST(GgufWriter, UnchangedCopiesOfReferenceWritersFilesAreByteIdentical) {
  std::vector<std::string> paths;
  for (const std::string& dir : {test::data_dir() + "/models", std::string(LLMSVC_GGUF_SEEDS)}) {
    for (const std::string& name : entries(dir)) {
      if (name.ends_with(".gguf") && (dir != LLMSVC_GGUF_SEEDS || name.starts_with("valid_"))) {
        paths.push_back(dir + "/" + name);
      }
    }
  }
  ASSERT_GE(paths.size(), 20u);
  for (const std::string& path : paths) {
    auto r = GgufFile::open(path);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const GgufFile& f = **r;
    auto w = GgufWriter::from_file(f);
    ASSERT_TRUE(w.ok()) << path << ": " << w.status().message();
    ASSERT_TRUE(w->add_tensors_from(f).ok()) << path;
    auto image = w->to_bytes();
    ASSERT_TRUE(image.ok()) << path;
    std::vector<uint8_t> want = vec(f.bytes());
    if (f.version() == 2) want[4] = 3;  // the version, a little-endian u32
    EXPECT_TRUE(*image == want) << path << ": " << image->size() << " vs " << want.size() << " bytes";
  }
}

// ---- refusals when keys and tensors are added

TEST(GgufWriter, RefusesTensorBytesThatDoNotMatchTypeAndDims) {
  GgufWriter w;
  const std::vector<uint8_t> b(100);
  Status s = w.add_tensor("blk.0.ffn_up.weight", TensorType::Q8_0, {64, 2}, b);
  EXPECT_EQ(s.code(), Code::invalid_argument);
  EXPECT_NE(s.message().find("tensor 'blk.0.ffn_up.weight': 100 bytes given, but Q8_0 [64, 2] takes 136"),
            std::string::npos)
      << s.message();

  const std::vector<uint8_t> f32(4 * 6 * 4);
  ASSERT_TRUE(w.add_tensor("w", TensorType::F32, {4, 6}, f32).ok());
  s = w.set_tensor_data("w", std::span<const uint8_t>(f32).first(20));
  EXPECT_EQ(s.code(), Code::invalid_argument);
  EXPECT_NE(s.message().find("tensor 'w': 20 bytes given, but F32 [4, 6] takes 96"), std::string::npos) << s.message();

  // Shapes the reader would refuse are refused by name, with the reader's reason.
  const struct {
    TensorType type;
    std::vector<uint64_t> ne;
    const char* why;
  } bad[] = {
      {TensorType::Q8_0, {33}, "ne[0] = 33 is not a multiple of the Q8_0 block size 32"},
      {TensorType::F32, {4, 0}, "ne[1] is 0"},
      {TensorType::F32, {}, "n_dims 0 is outside 1..4"},
      {TensorType::F32, {1, 1, 1, 1, 1}, "n_dims 5 is outside 1..4"},
      {static_cast<TensorType>(4), {32}, "unknown tensor type 4"},
      {TensorType::F32, {uint64_t{1} << 32, uint64_t{1} << 32}, "element count overflows 64 bits at ne[1]"},
      {TensorType::F32, {uint64_t{1} << 21, uint64_t{1} << 20}, "2199023255552 elements exceed the limit"},
  };
  for (const auto& c : bad) {
    s = w.add_tensor("t", c.type, c.ne, std::span<const uint8_t>());
    EXPECT_EQ(s.code(), Code::invalid_argument) << c.why;
    EXPECT_NE(s.message().find(std::string("tensor 't': ") + c.why), std::string::npos) << s.message();
  }
  EXPECT_EQ(w.tensor_count(), 1u);
}

TEST(GgufWriter, RefusesADuplicateTensorName) {
  GgufWriter w;
  const std::vector<uint8_t> b(16);
  ASSERT_TRUE(w.add_tensor("output.weight", TensorType::F32, {4}, b).ok());
  Status s = w.add_tensor("output.weight", TensorType::F16, {8}, b);
  EXPECT_EQ(s.code(), Code::invalid_argument);
  EXPECT_NE(s.message().find("tensor 'output.weight': duplicate tensor name"), std::string::npos) << s.message();
  s = w.add_tensor("output.weight", TensorType::F32, {4}, [](const GgufWriter::Sink&) { return Status::Ok(); });
  EXPECT_EQ(s.code(), Code::invalid_argument);
  EXPECT_EQ(w.tensor_count(), 1u);
  // Removed, the name is free again.
  EXPECT_TRUE(w.remove_tensor("output.weight"));
  EXPECT_TRUE(w.add_tensor("output.weight", TensorType::F16, {8}, b).ok());
  EXPECT_EQ(w.add_tensor("", TensorType::F32, {4}, b).code(), Code::invalid_argument);
}

TEST(GgufWriter, RefusesValuesItCannotWriteAsGiven) {
  GgufWriter w;
  const auto refused = [&](std::string_view key, Value v, const std::string& why) {
    const Status s = w.set(key, std::move(v));
    EXPECT_EQ(s.code(), Code::invalid_argument) << key;
    EXPECT_NE(s.message().find(why), std::string::npos) << s.message();
  };
  refused("k", uint_value(ValueType::u8, 256), "key 'k': value 256 does not fit u8");
  refused("k", int_value(ValueType::i16, 40000), "value 40000 does not fit i16");
  refused("k", uint_value(ValueType::boolean, 2), "value 2 does not fit bool");
  refused("k", uint_value(ValueType::i32, 5), "key 'k': value of type i32 held in another type's field");
  refused("k", int_array(ValueType::u8, {1}), "an array of u8 holding 0 elements where array_size says 1");
  refused("k", uint_array(ValueType::u16, {1, 70000}), "value 70000 does not fit u16");
  refused("k", array_array({uint_value(ValueType::u8, 1)}), "element 0 of an array of arrays is not an array");
  refused("k", array_array({array_array({array_array({array_array({uint_array(ValueType::u8, {1})})})})}),
          "arrays nested deeper than 4");
  refused("k", string_value(std::string((1u << 20) + 1, 'x')), "exceeds the limit");
  refused("", uint_value(ValueType::u8, 1), "empty key");
  refused("general.alignment", uint_value(ValueType::u32, 48), "key 'general.alignment': not an integer power of two");
  refused("general.alignment", string_value("32"), "not an integer power of two");
  EXPECT_EQ(w.key_count(), 0u);
  EXPECT_EQ(w.alignment(), 32u);

  // Setting an existing key replaces its value where it stands; remove takes it out.
  ASSERT_TRUE(w.set("a", uint_value(ValueType::u8, 1)).ok());
  ASSERT_TRUE(w.set("b", string_value("x")).ok());
  ASSERT_TRUE(w.set("a", string_value("y")).ok());
  EXPECT_EQ(w.key_count(), 2u);
  EXPECT_EQ(w.find("a")->s, "y");
  EXPECT_TRUE(w.remove("a"));
  EXPECT_FALSE(w.remove("a"));
  EXPECT_EQ(w.find("a"), nullptr);
  EXPECT_EQ(w.find("b")->s, "x");
}

// ---- failed writes

// What a write in a child process returned: its code and message (the child may drop
// privileges or lower its file size limit without touching the test process).
struct ChildResult {
  bool ran{};
  Code code{Code::internal};
  std::string message;
};

ChildResult in_child(const std::function<void()>& setup, const std::function<Status()>& write) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    setup();
    const Status s = write();
    const std::string out = std::to_string(static_cast<int>(s.code())) + "\n" + s.message();
    (void)fileio::write_all(fds[1], std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(out.data()), out.size()), "pipe");
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const size_t nl = got.find('\n');
  if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || nl == std::string::npos) return {};
  return {true, static_cast<Code>(std::stoi(got.substr(0, nl))), got.substr(nl + 1)};
}

GgufWriter small_model(const std::vector<uint8_t>& bytes) {
  GgufWriter w;
  EXPECT_TRUE(w.set("general.architecture", string_value("llama")).ok());
  EXPECT_TRUE(w.add_tensor("token_embd.weight", TensorType::F32, {bytes.size() / 4}, bytes).ok());
  return w;
}

TEST(GgufWriter, UnwritableDirectoryIsAnIoErrorAndLeavesNothing) {
  ScratchDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0555), 0);
  const std::vector<uint8_t> bytes = pattern(4096, 3);
  const std::string path = dir.file("model.gguf");
  const ChildResult r = in_child(
      [] {
        // root writes anywhere: play an unprivileged user instead.
        if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
      },
      [&] { return small_model(bytes).write(path); });
  ASSERT_TRUE(r.ran);
  EXPECT_EQ(r.code, Code::io);
  EXPECT_NE(r.message.find(path), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("permission denied (EACCES)"), std::string::npos) << r.message;
  EXPECT_TRUE(entries(dir.path()).empty());

  // A directory that does not exist: the same, in this process.
  const Status s = small_model(bytes).write(dir.file("missing/model.gguf"));
  EXPECT_EQ(s.code(), Code::io);
  EXPECT_NE(s.message().find(dir.file("missing/model.gguf")), std::string::npos) << s.message();
}

// A file size limit hit mid-write (write() fails with EFBIG once SIGXFSZ is ignored): a
// clear error, the temporary file removed, an existing target untouched.
TEST(GgufWriter, FileSizeLimitHitMidWriteLeavesTheTargetAsItWas) {
  ScratchDir dir;
  const std::string path = dir.file("model.gguf");
  const std::vector<uint8_t> old_bytes = pattern(64, 5);
  ASSERT_TRUE(small_model(old_bytes).write(path).ok());
  const std::string before = test::slurp(path);

  const std::vector<uint8_t> big = pattern(size_t{4} << 20, 7);  // 4 MiB, past the 1 MiB limit
  const ChildResult r = in_child(
      [] {
        ::signal(SIGXFSZ, SIG_IGN);
        const rlimit lim{1u << 20, 1u << 20};
        if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(3);
      },
      [&] { return small_model(big).write(path); });
  ASSERT_TRUE(r.ran);
  EXPECT_EQ(r.code, Code::io);
  EXPECT_NE(r.message.find("write " + path), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("file too large (EFBIG)"), std::string::npos) << r.message;
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"model.gguf"});
  EXPECT_TRUE(test::slurp(path) == before);
}

// A source's own error, and a source that gives too few or too many bytes: the write
// fails naming the file and the tensor, and leaves nothing behind.
TEST(GgufWriter, FailingOrMiscountingSourceLeavesNoFile) {
  ScratchDir dir;
  const std::string path = dir.file("model.gguf");
  const std::vector<uint8_t> row = pattern(64, 9);  // a row of 16 F32s
  const struct {
    const char* name;
    GgufWriter::TensorSource source;
    Code code;
    const char* why;
  } cases[] = {
      {"error", [&](const GgufWriter::Sink& sink) {
         LLMSVC_RETURN_IF_ERROR(sink(row));
         return Status(Code::io, "read source.gguf: EIO");
       }, Code::io, "tensor 'w': read source.gguf: EIO"},
      {"short", [&](const GgufWriter::Sink& sink) { return sink(row); }, Code::invalid_argument,
       "tensor 'w': its source gave 64 of the 128 bytes of F32 [16, 2]"},
      {"long", [&](const GgufWriter::Sink& sink) {
         for (int k = 0; k < 3; ++k) LLMSVC_RETURN_IF_ERROR(sink(row));
         return Status::Ok();
       }, Code::invalid_argument, "tensor 'w': its source gave more than the 128 bytes of F32 [16, 2]"},
  };
  for (const auto& c : cases) {
    GgufWriter w;
    ASSERT_TRUE(w.add_tensor("w", TensorType::F32, {16, 2}, c.source).ok());
    const Status s = w.write(path);
    EXPECT_EQ(s.code(), c.code) << c.name;
    EXPECT_NE(s.message().find("write " + path + ": "), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(c.why), std::string::npos) << s.message();
    EXPECT_TRUE(entries(dir.path()).empty()) << c.name;
    EXPECT_EQ(w.to_bytes().status().code(), c.code) << c.name;
  }
}

}  // namespace
}  // namespace llmsvc::gguf
