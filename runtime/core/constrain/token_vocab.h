// SPDX-License-Identifier: Apache-2.0
// TokenVocab: the bytes every token decodes to, and a trie (prefix tree) over them.
//
// A constraint judges a token by the exact bytes it appends to the output: SentencePiece
// byte tokens (<0x0A>) are their byte, "▁" is a space, byte-level BPE's "Ġ" mapping is
// undone (Tokenizer::token_to_piece does all of it). Control tokens and tokens that decode
// to nothing are left out of the trie: they can never be allowed by a grammar, except the
// end-of-generation tokens, which a constraint allows exactly when its input is complete.
//
// The trie is laid out so that every node's subtree covers a contiguous run of `sorted()`
// (token ids ordered by their bytes), and each node's children are contiguous. Immutable
// once built: one per model, shared by every constraint (and thread) using it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llmsvc {
class Tokenizer;
}

namespace llmsvc::constrain {

class TokenVocab {
 public:
  static constexpr size_t kMaxPieceBytes = 1024;  // longer tokens are never allowed

  struct Node {
    uint32_t first_child = 0;  // children: nodes [first_child, first_child + n_children)
    uint32_t n_children = 0;
    uint32_t parent = 0;
    uint32_t tok_begin = 0;  // tokens whose bytes end exactly here: sorted()[tok_begin, tok_end)
    uint32_t tok_end = 0;
    uint32_t sub_end = 0;    // tokens in the subtree below: sorted()[tok_end, sub_end)
    uint8_t byte = 0;        // the byte on the edge from the parent
  };

  // Pieces from the tokenizer (token_to_piece without specials); its end-of-generation ids.
  static std::shared_ptr<const TokenVocab> from_tokenizer(const Tokenizer& tokenizer);
  // Explicit pieces (tests, tools): pieces[id] are the bytes of token id; `eog` ids end
  // generation. Empty pieces are never allowed.
  static std::shared_ptr<const TokenVocab> from_pieces(std::vector<std::string> pieces, std::vector<int32_t> eog);

  int32_t size() const { return static_cast<int32_t>(pieces_.size()); }
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
  bool is_eog(int32_t id) const { return eog_flag_[static_cast<size_t>(id)] != 0; }
  const std::vector<int32_t>& eog() const { return eog_; }

  const std::vector<Node>& nodes() const { return nodes_; }  // nodes()[0] is the root
  const std::vector<int32_t>& sorted() const { return sorted_; }
  // The bytes on the path from the root to `node`.
  std::string prefix(uint32_t node) const;

 private:
  void build_trie();

  std::vector<std::string> pieces_;
  std::vector<uint8_t> eog_flag_;
  std::vector<int32_t> eog_;
  std::vector<int32_t> sorted_;  // the trie's tokens, by bytes
  std::vector<Node> nodes_;
};

}  // namespace llmsvc::constrain
