// SPDX-License-Identifier: Apache-2.0
// `llmsvc tokenize`: the token ids and pieces of a text under the model's tokenizer.
// Loads only the GGUF metadata, not the weights.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/api/validate.h"
#include "runtime/core/gguf/gguf_file.h"
#include "runtime/core/tokenizer/tokenizer.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace llmsvc::cli {
namespace {

struct TokenizeArgs {
  ModelArgs model;
  bool json = false;
  bool no_special = false;
  std::string text;
};

// A piece for a terminal: control bytes and bytes that are not UTF-8 (partial byte
// tokens) as escapes, the rest as it is.
std::string printable(const std::string& piece) {
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    auto c = static_cast<unsigned char>(piece[i]);
    size_t n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (c >= 0x80 && i + n <= piece.size() && is_valid_utf8(std::string_view(piece).substr(i, n))) {
      out.append(piece, i, n);
      i += n;
      continue;
    }
    char buf[8];
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c >= 0x7F) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  return out;
}

int tokenize(const TokenizeArgs& args) {
  if (auto st = api::check_utf8(args.text.data(), args.text.size(), "text"); !st.ok()) return report(st);
  auto path = model_path(args.model);
  if (!path.ok()) return report(path.status());
  auto file = gguf::GgufFile::open(*path);
  if (!file.ok()) return report(file.status());
  auto tok = Tokenizer::from_gguf(**file);
  if (!tok.ok()) return report(tok.status());

  const bool special = !args.no_special;
  std::vector<TokenId> ids = (*tok)->encode(args.text, /*add_special=*/special, /*parse_special=*/special);
  if (args.json) {
    nlohmann::json j;
    j["ids"] = ids;
    auto& pieces = j["pieces"] = nlohmann::json::array();
    for (TokenId id : ids) pieces.push_back((*tok)->token_to_piece(id, /*render_special=*/true));
    j["n_tokens"] = ids.size();
    // Byte tokens alone are not UTF-8: JSON strings get U+FFFD for them.
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  for (TokenId id : ids) {
    std::printf("%8d  '%s'\n", id, printable((*tok)->token_to_piece(id, /*render_special=*/true)).c_str());
  }
  std::printf("%zu tokens\n", ids.size());
  return 0;
}

}  // namespace

void add_tokenize_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand("tokenize", "print the token ids and pieces of a text");
  cmd->add_option("-m,--model", args->model.model, "GGUF model file (default: the default model)");
  cmd->add_flag("--json", args->json, "print {ids, pieces, n_tokens} as JSON");
  cmd->add_flag("--no-special", args->no_special,
                "add no BOS/EOS and read special-token text (\"<|im_start|>\") as plain text");
  cmd->add_option("text", args->text, "the text")->required();
  cmd->callback([args, &exit_code] { exit_code = tokenize(*args); });
}

}  // namespace llmsvc::cli
