// SPDX-License-Identifier: Apache-2.0
// Writes the seed corpus of protocol_fuzzer (fuzz/corpus/protocol/): every sample message of
// tests/protocol/samples.h as a one-frame stream and as a bare payload, and each side's whole
// conversation as one stream read in small pieces, laid out as the newest protocol version;
// where an older version lays a sample out differently, that layout too, as NAME.vN.*.
// tests/protocol decodes the committed seeds at the version their names give, so they also
// pin every version's layouts.
// Usage: make_protocol_seeds OUT_DIR     (built with the fuzz preset: build/fuzz/fuzz/make_protocol_seeds)
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/protocol/frame.h"
#include "tests/protocol/fuzz_input.h"
#include "tests/protocol/samples.h"

using namespace llmsvc;
using namespace llmsvc::protocol;

static bool write_seed(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out.flush());
}

static Role receiver_of(Role sender) { return sender == Role::server ? Role::client : Role::server; }

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::vector<uint8_t> newest[2];  // the conversations as the newest version lays them out
  for (uint16_t version = kMaxVersion; version >= kMinVersion; --version) {
    // The newest version's files have plain names; an older one's carry ".vN" when they differ.
    const std::string suffix = version == kMaxVersion ? "" : ".v" + std::to_string(version);
    std::vector<uint8_t> conversation[2];
    int i = 0;
    for (const test::Sample& s : test::protocol_samples()) {
      std::vector<uint8_t> frame, payload, newest_payload;
      Status st = append_frame(frame, s.sender, s.stream, s.message, kMinMaxPayload, version);
      if (st.ok()) st = encode_payload(s.message, payload, version);
      if (st.ok()) st = encode_payload(s.message, newest_payload, kMaxVersion);
      if (!st.ok()) {
        std::fprintf(stderr, "encode: %s\n", st.message().c_str());
        return 1;
      }
      char name[64];
      std::snprintf(name, sizeof name, "%02d_%s", i, std::string(type_info(type_of(s.message)).name).c_str());
      const size_t chunk = 1 + static_cast<size_t>(i * 7) % 64;  // a spread of read sizes
      if ((suffix.empty() || payload != newest_payload) &&
          (!write_seed(dir + "/" + name + suffix + ".frame",
                       test::fuzz_stream_input(receiver_of(s.sender), chunk, frame)) ||
           !write_seed(dir + "/" + name + suffix + ".payload", test::fuzz_payload_input(type_of(s.message), payload))))
        return 1;
      auto& c = conversation[s.sender == Role::server];
      c.insert(c.end(), frame.begin(), frame.end());
      ++i;
    }
    const size_t chunks[2] = {3, 5};
    const char* names[2] = {"client_conversation", "server_conversation"};
    for (int side = 0; side < 2; ++side) {
      if (!suffix.empty() && conversation[side] == newest[side]) continue;
      if (!write_seed(dir + "/" + names[side] + suffix + ".frames",
                      test::fuzz_stream_input(side == 0 ? Role::server : Role::client, chunks[side], conversation[side])))
        return 1;
    }
    if (suffix.empty()) {
      newest[0] = conversation[0];
      newest[1] = conversation[1];
    }
    if (version == kMinVersion) break;
  }
  return 0;
}
