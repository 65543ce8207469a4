// SPDX-License-Identifier: Apache-2.0
// Chunk-level swap: encode + write, and batched, checked reads.
#include "policy/swap/swap_store.h"


#include "policy/swap/swap_dir.h"

namespace llmsvc::policy {
namespace {

// Enough for the index of a chunk of up to 125 layers in the first read; more takes a second.
constexpr size_t kHeadRead = 4096;

}  // namespace

std::string chunk_meta_difference(const ChunkMeta& a, const ChunkMeta& b) {
  if (a.model_hash != b.model_hash) return "model_hash";
  if (a.tokens_hash != b.tokens_hash) return "tokens_hash";
  if (a.chunk_index != b.chunk_index) return "chunk_index";
  if (a.first_pos != b.first_pos) return "first_pos";
  if (a.n_tokens != b.n_tokens) return "n_tokens";
  if (a.format != b.format) return "format";
  if (a.n_layer != b.n_layer) return "n_layer";
  if (a.n_head_kv != b.n_head_kv) return "n_head_kv";
  if (a.head_dim != b.head_dim) return "head_dim";
  return "";
}

LayerRead& LayerRead::operator=(LayerRead&& o) noexcept {
  if (this != &o) {
    batch_ = ReadBatch();  // our reads end before our buffers go
    layer_ = o.layer_;
    dir_ = std::move(o.dir_);
    items_ = std::move(o.items_);
    scratch_ = std::move(o.scratch_);
    batch_ = std::move(o.batch_);
  }
  return *this;
}

std::vector<Status> LayerRead::wait() {
  std::vector<ReadResult> results = batch_.wait();
  std::vector<Status> out;
  out.reserve(items_.size());
  size_t r = 0;
  for (Item& it : items_) {
    if (!it.submitted) {
      out.push_back(std::move(it.status));
      continue;
    }
    const ReadResult& res = results.at(r++);
    Status s = res.status.ok() ? decode_frame(it.codec, it.entry, layer_, it.frame, it.out) : res.status;
    if (!s.ok())
      s = Status(s.code(), "chunk " + std::to_string(it.chunk_index) + " (" + (dir_.empty() ? "" : dir_ + "/") +
                               chunk_file_name(it.chunk_index) + "): " + s.message());
    out.push_back(std::move(s));
  }
  items_.clear();
  return out;
}

Result<std::unique_ptr<SwapStore>> SwapStore::open(SwapIo& io, std::string dir, const ChunkEncoding& encoding) {
  LLMSVC_RETURN_IF_ERROR(ensure_directory(dir));
  auto d = fileio::SafeDir::open(dir, dir);
  if (!d.ok()) return d.status();
  auto removed = remove_temp_files(**d);
  if (!removed.ok()) return removed.status();
  return std::make_unique<SwapStore>(Private{}, io, std::move(d).value(), encoding);
}

Result<std::unique_ptr<SwapStore>> SwapStore::open(SwapIo& io, const fileio::SafeDir& base, std::string_view rel,
                                                   const ChunkEncoding& encoding) {
  LLMSVC_RETURN_IF_ERROR(base.make_dirs(rel));
  auto d = base.open_dir(rel);
  if (!d.ok()) return d.status();
  auto removed = remove_temp_files(**d);
  if (!removed.ok()) return removed.status();
  return std::make_unique<SwapStore>(Private{}, io, std::move(d).value(), encoding);
}

std::string SwapStore::path(uint32_t chunk_index) const { return dir_->name_of(chunk_file_name(chunk_index)); }

ReadRequest SwapStore::request(uint32_t chunk_index, uint64_t offset, std::span<uint8_t> dest, bool to_eof,
                               bool direct) const {
  ReadRequest r;
  r.path = chunk_file_name(chunk_index);
  r.offset = offset;
  r.dest = dest;
  r.to_eof = to_eof;
  r.direct = direct;
  r.dir_fd = dir_->fd();
  return r;
}

Status SwapStore::for_chunk(uint32_t chunk_index, const Status& s) const {
  return Status(s.code(), "chunk " + std::to_string(chunk_index) + " (" + path(chunk_index) + "): " + s.message());
}

Status SwapStore::check_expected(const ChunkIndex& index, const ChunkMeta& expected) const {
  const std::string diff = chunk_meta_difference(index.meta, expected);
  if (diff.empty()) return Status::Ok();
  return for_chunk(expected.chunk_index, Status(Code::io, "stale chunk file: " + diff + " differs"));
}

Result<PageBuffer> SwapStore::encode(const ChunkMeta& meta, std::span<const uint8_t> payload,
                                     ChunkIndex* index) const {
  LLMSVC_RETURN_IF_ERROR(check_chunk_meta(meta));
  PageBuffer bytes;
  if (!bytes.allocate(max_encoded_chunk_bytes(meta)))
    return for_chunk(meta.chunk_index, Status(Code::out_of_memory, "no memory to encode the chunk"));
  auto n = encode_chunk(meta, payload, encoding_, bytes.span());
  if (!n.ok()) return n.status();
  bytes.resize_down(*n);
  auto parsed = parse_chunk_file(bytes.span());
  if (!parsed.ok()) return Status(Code::internal, "encoded chunk does not parse: " + parsed.status().message());
  *index = std::move(parsed).value();
  return bytes;
}

SwapStore::~SwapStore() {
  if (quota_) quota_->release(counted_total_);
}

Status SwapStore::set_quota(std::shared_ptr<DiskQuota> quota) {
  if (quota_) return Status(Code::internal, "swap store " + dir() + ": quota set twice");
  auto chunks = list();
  if (!chunks.ok()) return chunks.status();
  std::lock_guard lock(counted_mu_);
  for (uint32_t c : *chunks) {
    auto st = dir_->stat(chunk_file_name(c));
    if (!st.ok()) continue;  // gone since the listing
    const uint64_t bytes = static_cast<uint64_t>(st->st_size);
    counted_[c] = bytes;
    counted_total_ += bytes;
  }
  quota->charge(counted_total_);
  quota_ = std::move(quota);
  return Status::Ok();
}

uint64_t SwapStore::counted_bytes() const {
  std::lock_guard lock(counted_mu_);
  return counted_total_;
}

Status SwapStore::charge_file(uint32_t chunk_index, uint64_t bytes) {
  if (!quota_) return Status::Ok();
  std::unique_lock lock(counted_mu_);
  auto it = counted_.find(chunk_index);
  const uint64_t old = it == counted_.end() ? 0 : it->second;
  if (bytes <= old) {
    quota_->release(old - bytes);
  } else if (!quota_->try_charge(bytes - old)) {
    lock.unlock();
    // The older file describes content that has changed since: it goes, with its bytes.
    if (it != counted_.end()) remove_async(chunk_index, nullptr);
    return Status(Code::quota_exceeded, "chunk " + std::to_string(chunk_index) + ": the app's swap files would pass " +
                                            std::to_string(quota_->limit()) + " bytes");
  }
  counted_total_ += bytes;
  counted_total_ -= old;
  counted_[chunk_index] = bytes;
  return Status::Ok();
}

void SwapStore::uncharge_file(uint32_t chunk_index) {
  if (!quota_) return;
  std::lock_guard lock(counted_mu_);
  auto it = counted_.find(chunk_index);
  if (it == counted_.end()) return;
  quota_->release(it->second);
  counted_total_ -= it->second;
  counted_.erase(it);
}

Status SwapStore::store_async(const ChunkMeta& meta, std::span<const uint8_t> payload, StoreDone done) {
  ChunkIndex index;
  auto bytes = encode(meta, payload, &index);
  if (!bytes.ok()) return bytes.status();
  LLMSVC_RETURN_IF_ERROR(charge_file(meta.chunk_index, bytes->size()));
  io_.write_async(SwapPath(dir_, chunk_file_name(meta.chunk_index)), std::move(bytes).value(),
                  [index = std::move(index), done = std::move(done)](Status s) mutable {
                    if (s.ok()) done(std::move(index));
                    else done(std::move(s));
                  });
  return Status::Ok();
}

Result<ChunkIndex> SwapStore::store(const ChunkMeta& meta, std::span<const uint8_t> payload) {
  ChunkIndex index;
  auto bytes = encode(meta, payload, &index);
  if (!bytes.ok()) return bytes.status();
  LLMSVC_RETURN_IF_ERROR(charge_file(meta.chunk_index, bytes->size()));
  LLMSVC_RETURN_IF_ERROR(io_.write(SwapPath(dir_, chunk_file_name(meta.chunk_index)), bytes->span()));
  return index;
}

std::vector<Result<ChunkIndex>> SwapStore::read_indices(std::span<const ChunkMeta> expected) {
  const size_t n = expected.size();
  std::vector<std::vector<uint8_t>> heads(n, std::vector<uint8_t>(kHeadRead));
  std::vector<ReadRequest> reqs;
  reqs.reserve(n);
  for (size_t i = 0; i < n; ++i) reqs.push_back(request(expected[i].chunk_index, 0, heads[i], true));
  std::vector<ReadResult> first = io_.read(std::move(reqs));

  // Indices longer than the first read (many layers) take a second batch.
  std::vector<size_t> more;
  std::vector<ReadRequest> reqs2;
  for (size_t i = 0; i < n; ++i) {
    if (!first[i].status.ok()) continue;
    heads[i].resize(first[i].bytes);
    auto need = chunk_index_size(heads[i]);
    if (!need.ok() || *need <= heads[i].size() || first[i].file_size < *need) continue;
    const size_t have = heads[i].size();
    heads[i].resize(*need);
    more.push_back(i);
    reqs2.push_back(request(expected[i].chunk_index, have, std::span<uint8_t>(heads[i]).subspan(have), false));
  }
  std::vector<ReadResult> second = io_.read(std::move(reqs2));
  for (size_t k = 0; k < more.size(); ++k)
    if (!second[k].status.ok()) first[more[k]].status = second[k].status;

  std::vector<Result<ChunkIndex>> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t c = expected[i].chunk_index;
    if (!first[i].status.ok()) {
      out.push_back(for_chunk(c, first[i].status));
      continue;
    }
    auto idx = parse_chunk_index(heads[i], first[i].file_size);
    if (!idx.ok()) {
      out.push_back(for_chunk(c, idx.status()));
      continue;
    }
    if (Status s = check_expected(*idx, expected[i]); !s.ok()) {
      out.push_back(std::move(s));
      continue;
    }
    out.push_back(std::move(idx));
  }
  return out;
}

Result<ChunkIndex> SwapStore::read_index(const ChunkMeta& expected) {
  return std::move(read_indices(std::span<const ChunkMeta>(&expected, 1)).front());
}

LayerRead SwapStore::read_layer_async(int layer, std::span<const LayerTarget> targets) {
  LayerRead lr;
  lr.layer_ = layer;
  lr.dir_ = dir_->name();
  lr.items_.resize(targets.size());
  size_t scratch = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    const LayerTarget& t = targets[i];
    LayerRead::Item& it = lr.items_[i];
    if (t.chunk == nullptr || layer < 0 || static_cast<size_t>(layer) >= t.chunk->frames.size() ||
        t.out.size() != t.chunk->frames[layer].raw_size) {
      it.status = Status(Code::invalid_argument, "read_layer: target " + std::to_string(i) +
                                                     " has no such layer or a wrong output size");
      continue;
    }
    it.codec = t.chunk->codec;
    it.entry = t.chunk->frames[layer];
    it.chunk_index = t.chunk->meta.chunk_index;
    it.out = t.out;
    it.submitted = true;
    if (it.entry.stored_size < it.entry.raw_size) scratch += it.entry.stored_size;
  }
  if (!lr.scratch_.allocate(scratch)) {
    for (LayerRead::Item& it : lr.items_)
      if (it.submitted) {
        it.status = Status(Code::out_of_memory, "read_layer: no memory for chunk " + std::to_string(it.chunk_index) +
                                                     "'s compressed frame");
        it.submitted = false;
      }
    return lr;
  }
  std::vector<ReadRequest> reqs;
  reqs.reserve(targets.size());
  size_t pos = 0;
  for (LayerRead::Item& it : lr.items_) {
    if (!it.submitted) continue;
    // An uncompressed frame goes straight into the output; a compressed one to scratch.
    if (it.entry.stored_size == it.entry.raw_size) {
      it.frame = it.out;
    } else {
      it.frame = lr.scratch_.span().subspan(pos, it.entry.stored_size);
      pos += it.entry.stored_size;
    }
    reqs.push_back(request(it.chunk_index, it.entry.offset, it.frame, false));
  }
  lr.batch_ = io_.submit_reads(std::move(reqs));
  return lr;
}

std::vector<Status> SwapStore::read_layer(int layer, std::span<const LayerTarget> targets) {
  return read_layer_async(layer, targets).wait();
}

Result<ChunkIndex> SwapStore::read_chunk(const ChunkMeta& expected, std::span<uint8_t> out) {
  const std::span<uint8_t> outs[1] = {out};
  return std::move(read_chunks(std::span<const ChunkMeta>(&expected, 1), outs).front());
}

std::vector<Result<ChunkIndex>> SwapStore::read_chunks(std::span<const ChunkMeta> expected,
                                                       std::span<const std::span<uint8_t>> outs) {
  return read_chunks_async(expected, outs).wait();
}

ChunkRead SwapStore::read_chunks_async(std::span<const ChunkMeta> expected, std::span<const std::span<uint8_t>> outs) {
  ChunkRead cr;
  cr.store_ = this;
  cr.items_.resize(expected.size());
  // One read of each whole file (no file of its shape is larger), rather than the index and
  // then the frames: a round trip to the device saved; all the files in one batch. A buffer
  // one byte larger than the largest such file tells an oversized file by filling up.
  std::vector<size_t> sizes(expected.size(), 0);
  size_t total = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    ChunkRead::Item& it = cr.items_[i];
    it.expected = expected[i];
    if (outs.size() != expected.size()) {
      it.status = Status(Code::invalid_argument, "read_chunks: one output per chunk is needed");
      continue;
    }
    if (outs[i].size() != chunk_payload_bytes(expected[i])) {
      it.status = Status(Code::invalid_argument, "read_chunk: output is not the chunk's payload size");
      continue;
    }
    it.out = outs[i];
    it.submitted = true;
    sizes[i] = direct_read_size(max_encoded_chunk_bytes(expected[i]) + 1);
    total += sizes[i];
  }
  static_assert(kDirectReadAlign <= 4096, "pages are at least 4 KiB");
  if (!cr.files_.allocate(total)) {
    for (ChunkRead::Item& it : cr.items_)
      if (it.submitted) {
        it.status = for_chunk(it.expected.chunk_index, Status(Code::out_of_memory, "no memory to read the chunk file"));
        it.submitted = false;
      }
    return cr;
  }
  std::vector<ReadRequest> reqs;
  size_t pos = 0;
  for (size_t i = 0; i < cr.items_.size(); ++i) {
    ChunkRead::Item& it = cr.items_[i];
    if (!it.submitted) continue;
    it.file = std::span<uint8_t>(cr.files_.data() + pos, sizes[i]);
    pos += sizes[i];
    reqs.push_back(request(it.expected.chunk_index, 0, it.file, true, /*direct=*/true));
  }
  cr.batch_ = io_.submit_reads(std::move(reqs));
  return cr;
}

ChunkRead& ChunkRead::operator=(ChunkRead&& o) noexcept {
  if (this != &o) {
    batch_ = ReadBatch();  // our reads end before our buffers go
    store_ = o.store_;
    items_ = std::move(o.items_);
    files_ = std::move(o.files_);
    batch_ = std::move(o.batch_);
  }
  return *this;
}

std::vector<Result<ChunkIndex>> ChunkRead::wait() {
  std::vector<ReadResult> results = batch_.wait();
  std::vector<Result<ChunkIndex>> out;
  out.reserve(items_.size());
  size_t r = 0;
  for (Item& it : items_) {
    if (!it.submitted) out.push_back(std::move(it.status));
    else out.push_back(store_->decode_file(it.expected, results.at(r++), it.file, it.out));
  }
  items_.clear();
  return out;
}

Result<ChunkIndex> SwapStore::decode_file(const ChunkMeta& expected, const ReadResult& res, std::span<const uint8_t> buffer,
                                          std::span<uint8_t> out) const {
  const uint32_t c = expected.chunk_index;
  if (!res.status.ok()) return for_chunk(c, res.status);
  if (res.bytes > max_encoded_chunk_bytes(expected))
    return for_chunk(c, Status(Code::io, "chunk file: larger than any file of the expected shape"));
  const std::span<const uint8_t> file = buffer.first(res.bytes);
  auto idx = parse_chunk_file(file);
  if (!idx.ok()) return for_chunk(c, idx.status());
  LLMSVC_RETURN_IF_ERROR(check_expected(*idx, expected));
  const size_t layer = idx->layer_bytes();
  for (size_t l = 0; l < idx->frames.size(); ++l) {
    Status s = decode_layer_from_file(*idx, static_cast<int>(l), file, out.subspan(l * layer, layer));
    if (!s.ok()) return for_chunk(c, s);
  }
  return idx;
}

Status SwapStore::remove(uint32_t chunk_index) {
  uncharge_file(chunk_index);
  return io_.remove(SwapPath(dir_, chunk_file_name(chunk_index)));
}

void SwapStore::remove_async(uint32_t chunk_index, SwapWriter::Done done) {
  uncharge_file(chunk_index);
  io_.remove_async(SwapPath(dir_, chunk_file_name(chunk_index)), std::move(done));
}

Result<std::vector<uint32_t>> SwapStore::list() const { return list_chunk_files(*dir_, "."); }

}  // namespace llmsvc::policy
