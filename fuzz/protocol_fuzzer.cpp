// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the llmsvcd protocol (runtime/protocol, docs/PROTOCOL.md). Any byte
// string, read as a stream of frames (split into reads of every size) or as one payload given
// to every message decoder, must either be refused with a named Code::invalid_argument /
// invalid_utf8, or decode into messages that re-encode to the very same bytes (the encoding is
// canonical; only the handshake's ignored tail is dropped) and decode again to the same value.
// Every input is tried at every protocol version this build speaks (each lays some payloads
// out differently). Input format: tests/protocol/fuzz_input.h.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <vector>

#include "runtime/protocol/frame.h"
#include "runtime/protocol/messages.h"
#include "tests/protocol/fuzz_input.h"

namespace {

using namespace llmsvc;
using namespace llmsvc::protocol;

void check(bool ok) {
  if (!ok) std::abort();
}

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

bool extensible(MsgType t) { return t == MsgType::hello || t == MsgType::welcome; }

// A decoder's verdict on `payload` as a `type` at `version`: a named refusal or an exact
// round trip.
void exercise_payload(MsgType type, std::span<const uint8_t> payload, uint16_t version) {
  auto m = decode_message(type, payload, version);
  if (!m.ok()) {
    const Status st = m.status();
    check(st.code() == Code::invalid_argument || st.code() == Code::invalid_utf8);
    // "NAME.field: ..." or "NAME: n trailing bytes ..."
    const std::string& msg = st.message();
    const std::string_view name = type_info(type).name;
    check(starts_with(msg, name) && msg.size() > name.size() && (msg[name.size()] == '.' || msg[name.size()] == ':'));
    return;
  }
  check(type_of(*m) == type);
  std::vector<uint8_t> again;
  check(encode_payload(*m, again, version).ok());
  if (extensible(type)) {
    check(again.size() <= payload.size() && std::equal(again.begin(), again.end(), payload.begin()));
  } else {
    check(again.size() == payload.size() && std::equal(again.begin(), again.end(), payload.begin()));
  }
  auto m2 = decode_message(type, again, version);
  check(m2.ok() && *m2 == *m);
}

struct Outcome {
  std::vector<Frame> frames;
  Status error;
};

Outcome read_stream(Role receiver, std::span<const uint8_t> bytes, size_t chunk) {
  FrameReader r(receiver, kMinMaxPayload);
  for (size_t i = 0; i < bytes.size(); i += chunk) {
    const size_t n = std::min(chunk, bytes.size() - i);
    // An exact-size heap copy of each read: ASan sees any access past it.
    auto piece = std::make_unique<uint8_t[]>(n);
    std::copy(bytes.begin() + static_cast<std::ptrdiff_t>(i), bytes.begin() + static_cast<std::ptrdiff_t>(i + n),
              piece.get());
    if (!r.feed({piece.get(), n}).ok()) break;
  }
  Outcome o;
  while (auto f = r.next()) o.frames.push_back(std::move(*f));
  o.error = r.error();
  return o;
}

void exercise_stream(Role receiver, std::span<const uint8_t> bytes, size_t chunk) {
  Outcome split = read_stream(receiver, bytes, chunk);
  // Reads of any size give the same frames and the same verdict.
  Outcome whole = read_stream(receiver, bytes, bytes.size() + 1);
  check(split.frames.size() == whole.frames.size());
  check(split.error.code() == whole.error.code() && split.error.message() == whole.error.message());
  if (!split.error.ok()) check(split.error.code() == Code::invalid_argument && starts_with(split.error.message(), "frame: "));

  size_t pos = 0;  // where the current frame starts in `bytes`
  const Role sender = receiver == Role::server ? Role::client : Role::server;
  for (size_t i = 0; i < split.frames.size(); ++i) {
    const Frame& f = split.frames[i];
    check(f.type == whole.frames[i].type && f.stream == whole.frames[i].stream && f.payload == whole.frames[i].payload);
    const size_t size = kHeaderBytes + f.payload.size();
    check(pos + size <= bytes.size());
    for (uint16_t v = kMinVersion; v <= kMaxVersion; ++v) {
      exercise_payload(f.type, f.payload, v);
      // A frame that decodes is re-framed to its own bytes (the handshake's to a prefix of its payload).
      if (auto m = decode_frame(f, v); m.ok() && !extensible(f.type)) {
        std::vector<uint8_t> again;
        check(append_frame(again, sender, f.stream, *m, kMinMaxPayload, v).ok());
        check(again.size() == size &&
              std::equal(again.begin(), again.end(), bytes.begin() + static_cast<std::ptrdiff_t>(pos)));
      }
    }
    pos += size;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::span<const uint8_t> rest(data + 1, size - 1);
  if (mode & test::kFuzzPayloadMode) {
    if (rest.size() < 2) return 0;
    const size_t n = rest.size() - 2;
    auto payload = std::make_unique<uint8_t[]>(n);
    std::copy(rest.begin() + 2, rest.end(), payload.get());
    // Every decoder gets the payload, whatever type the input names.
    for (uint32_t raw = 0; raw <= 0xFF; ++raw)
      if (const TypeInfo* t = find_type(static_cast<uint16_t>(raw)))
        for (uint16_t v = kMinVersion; v <= kMaxVersion; ++v) exercise_payload(t->type, {payload.get(), n}, v);
    return 0;
  }
  exercise_stream(test::fuzz_receiver(mode), rest, test::fuzz_chunk(mode));
  return 0;
}
