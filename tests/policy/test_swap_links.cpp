// SPDX-License-Identifier: Apache-2.0
// A swap store below the state root (SwapStore::open(io, base, rel)): a symbolic link
// planted as its directory, on the directory's path, as a chunk file or as a temporary file
// is refused; a chunk file behind a link is never read (the chunk is recomputed), written
// over or removed, on io_uring and on the pread threads.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/safe_dir.h"
#include "policy/swap/swap_store.h"
#include "tests/common/kv_synth.h"
#include "tests/policy/swap_test_util.h"

namespace llmsvc::policy {
namespace {

namespace fs = std::filesystem;
using test::make_meta;
using test::read_file;
using test::ScratchDir;

class SwapLinks : public ::testing::TestWithParam<ReaderKind> {
 protected:
  void SetUp() override {
    auto io = SwapIo::create({GetParam(), 64, 4, {}});
    if (!io.ok() && GetParam() == ReaderKind::io_uring) GTEST_SKIP() << io.status().message();
    ASSERT_TRUE(io.ok()) << io.status().message();
    io_ = std::move(io).value();
    fs::create_directories(root_.file("root/contexts"));
    fs::create_directories(root_.file("outside"));
    auto d = fileio::SafeDir::open(root_.file("root"));
    ASSERT_TRUE(d.ok());
    base_ = std::move(d).value();
    // A good chunk file outside, for chunk 0: what a link would make the store read.
    meta_ = make_meta(0, hal::KvFormat::q8, 3, 2, 16);
    payload_ = test::synth_chunk_payload(meta_, 7);
    auto outside = SwapStore::open(*io_, root_.file("outside"));
    ASSERT_TRUE(outside.ok());
    auto idx = (*outside)->store(meta_, payload_);
    ASSERT_TRUE(idx.ok()) << idx.status().message();
    index_ = *idx;
    before_ = read_file(root_.file("outside/0.kvc"));
  }
  void expect_refused(const Status& s) const {
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("symbolic link"), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find(root_.path()), std::string::npos) << s.message();
  }
  void expect_outside_untouched() const {
    EXPECT_EQ(read_file(root_.file("outside/0.kvc")), before_);
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(root_.file("outside"))) names.push_back(e.path().filename().string());
    EXPECT_EQ(names, std::vector<std::string>{"0.kvc"});
  }

  ScratchDir root_;
  std::unique_ptr<SwapIo> io_;
  fileio::SafeDirRef base_;
  ChunkMeta meta_;
  std::vector<uint8_t> payload_, before_;
  ChunkIndex index_;
};

TEST_P(SwapLinks, DirectoryBehindALinkIsRefused) {
  fs::create_directory_symlink(root_.file("outside"), root_.file("root/contexts/a"));
  auto through_parent = SwapStore::open(*io_, *base_, "contexts/a/chunks");
  ASSERT_FALSE(through_parent.ok());
  expect_refused(through_parent.status());
  fs::create_directories(root_.file("root/contexts/b"));
  fs::create_directory_symlink(root_.file("outside"), root_.file("root/contexts/b/chunks"));
  auto as_dir = SwapStore::open(*io_, *base_, "contexts/b/chunks");
  ASSERT_FALSE(as_dir.ok());
  expect_refused(as_dir.status());
  EXPECT_NE(as_dir.status().message().find("contexts/b/chunks"), std::string::npos) << as_dir.status().message();
  expect_outside_untouched();
}

TEST_P(SwapLinks, ChunkFileBehindALinkIsNeitherReadNorWrittenNorRemoved) {
  auto store = SwapStore::open(*io_, *base_, "contexts/c/chunks");
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ((*store)->path(0), "contexts/c/chunks/0.kvc");
  fs::create_symlink(root_.file("outside/0.kvc"), root_.file("root/contexts/c/chunks/0.kvc"));
  std::vector<uint8_t> out(payload_.size());
  expect_refused((*store)->read_chunk(meta_, out).status());
  expect_refused((*store)->read_index(meta_).status());
  std::vector<uint8_t> layer(index_.layer_bytes());
  const LayerTarget target{&index_, layer};
  for (const Status& s : (*store)->read_layer(1, std::span<const LayerTarget>(&target, 1))) expect_refused(s);
  expect_refused((*store)->store(meta_, payload_).status());
  expect_refused((*store)->remove(0));
  EXPECT_TRUE(fs::is_symlink(root_.file("root/contexts/c/chunks/0.kvc")));
  // A real chunk beside it works.
  const ChunkMeta m1 = make_meta(1, hal::KvFormat::q8, 3, 2, 16);
  const std::vector<uint8_t> p1 = test::synth_chunk_payload(m1, 8);
  ASSERT_TRUE((*store)->store(m1, p1).ok());
  std::vector<uint8_t> back(p1.size());
  ASSERT_TRUE((*store)->read_chunk(m1, back).ok());
  EXPECT_EQ(back, p1);
  expect_outside_untouched();
}

TEST_P(SwapLinks, TemporaryFileThatIsALinkIsNotRemovedThrough) {
  fs::create_directories(root_.file("root/contexts/d/chunks"));
  fs::create_symlink(root_.file("outside/0.kvc"), root_.file("root/contexts/d/chunks/.0.kvc.1.2.tmp"));
  auto store = SwapStore::open(*io_, *base_, "contexts/d/chunks");
  ASSERT_FALSE(store.ok());
  expect_refused(store.status());
  expect_outside_untouched();
}

INSTANTIATE_TEST_SUITE_P(Engines, SwapLinks, ::testing::Values(ReaderKind::io_uring, ReaderKind::threads),
                         [](const auto& info) { return std::string(reader_kind_name(info.param)); });

}  // namespace
}  // namespace llmsvc::policy
