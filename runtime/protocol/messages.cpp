// SPDX-License-Identifier: Apache-2.0
// Dispatch over the Message variant: its type, its encoding, decoding by type.
#include "runtime/protocol/messages.h"

#include <utility>

namespace llmsvc::protocol {
namespace {

template <size_t... I>
Result<Message> decode_as(MsgType type, std::span<const uint8_t> payload, uint16_t version,
                          std::index_sequence<I...>) {
  Result<Message> out{Status{Code::invalid_argument, "message type " + std::to_string(static_cast<int>(type)) +
                                                         " is not part of the protocol"}};
  // Exactly one alternative has kType == type; the fold stops there.
  (void)((std::variant_alternative_t<I, Message>::kType == type
              ? (out = [&]() -> Result<Message> {
                   auto m = decode_payload<std::variant_alternative_t<I, Message>>(payload, version);
                   if (!m.ok()) return m.status();
                   return Message{std::in_place_index<I>, std::move(m).value()};
                 }(),
                 true)
              : false) ||
         ...);
  return out;
}

}  // namespace

MsgType type_of(const Message& m) {
  return std::visit([](const auto& x) { return std::decay_t<decltype(x)>::kType; }, m);
}

Status encode_payload(const Message& m, std::vector<uint8_t>& out, uint16_t version) {
  return std::visit([&](const auto& x) { return encode_payload(x, out, version); }, m);
}

Result<Message> decode_message(MsgType type, std::span<const uint8_t> payload, uint16_t version) {
  return decode_as(type, payload, version, std::make_index_sequence<std::variant_size_v<Message>>{});
}

}  // namespace llmsvc::protocol
