// Writes the seed corpus of protocol_fuzzer (fuzz/corpus/protocol/): every sample message of
// tests/protocol/samples.h as a one-frame stream and as a bare payload, and each side's whole
// conversation as one stream read in small pieces. tests/protocol decodes the committed seeds,
// so they also pin protocol version 1.
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
  std::vector<uint8_t> conversation[2];
  int i = 0;
  for (const test::Sample& s : test::protocol_samples()) {
    std::vector<uint8_t> frame, payload;
    Status st = append_frame(frame, s.sender, s.stream, s.message, kMinMaxPayload);
    if (st.ok()) st = encode_payload(s.message, payload);
    if (!st.ok()) {
      std::fprintf(stderr, "encode: %s\n", st.message().c_str());
      return 1;
    }
    char name[64];
    std::snprintf(name, sizeof name, "%02d_%s", i, std::string(type_info(type_of(s.message)).name).c_str());
    const size_t chunk = 1 + static_cast<size_t>(i * 7) % 64;  // a spread of read sizes
    if (!write_seed(dir + "/" + name + ".frame", test::fuzz_stream_input(receiver_of(s.sender), chunk, frame)) ||
        !write_seed(dir + "/" + name + ".payload", test::fuzz_payload_input(type_of(s.message), payload)))
      return 1;
    auto& c = conversation[s.sender == Role::server];
    c.insert(c.end(), frame.begin(), frame.end());
    ++i;
  }
  if (!write_seed(dir + "/client_conversation.frames", test::fuzz_stream_input(Role::server, 3, conversation[0])) ||
      !write_seed(dir + "/server_conversation.frames", test::fuzz_stream_input(Role::client, 5, conversation[1])))
    return 1;
  return 0;
}
