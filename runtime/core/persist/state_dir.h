// Where persistent contexts live, and the layout under it:
//   <root>/contexts/<id>/context.json   what the context is (ContextMeta)
//   <root>/contexts/<id>/history.log    its token history (HistoryLog)
//   <root>/contexts/<id>/chunks/        its swapped KV chunks
//   <root>/contexts/<id>/chunks.table   its chunk table (ChunkTable: formats, densities)
// A context may live in a scope (llmsvcd: one per app): its key is "<scope>/<id>" and its
// directory <root>/contexts/<scope>/<id>/, so each scope is a directory of its own.
// Directories are created 0700: a context is private to the app that owns the root.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace llmsvc::persist {

// The state root: `explicit_dir` if set, else $LLMSVC_STATE_DIR, else $XDG_STATE_HOME/llmsvc,
// else $HOME/.local/state/llmsvc. Code::invalid_argument when none can be found.
Result<std::string> resolve_state_root(std::string_view explicit_dir);

// A context id is 1..64 bytes of [A-Za-z0-9._-], not "." or "..": safe as a file name.
bool valid_context_id(std::string_view id);
// A context key: an id, or "<scope>/<id>" where the scope follows the id rule too.
bool valid_context_key(std::string_view key);
inline bool is_context_id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

class StateDir {
 public:
  explicit StateDir(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }

  std::string contexts_dir() const { return root_ + "/contexts"; }
  std::string context_dir(std::string_view id) const { return contexts_dir() + "/" + std::string(id); }
  std::string meta_path(std::string_view id) const { return context_dir(id) + "/context.json"; }
  std::string history_path(std::string_view id) const { return context_dir(id) + "/history.log"; }
  std::string chunks_dir(std::string_view id) const { return context_dir(id) + "/chunks"; }
  std::string chunk_table_path(std::string_view id) const { return context_dir(id) + "/chunks.table"; }

  // Ids of the contexts on storage (directories with a context.json), sorted: those without
  // a scope, or with `scope` those in it (their ids, without the "<scope>/").
  Result<std::vector<std::string>> list(std::string_view scope = {}) const;
  bool has(std::string_view key) const;

 private:
  std::string root_;
};

}  // namespace llmsvc::persist
