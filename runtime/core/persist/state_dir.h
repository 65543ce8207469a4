// SPDX-License-Identifier: Apache-2.0
// Where persistent contexts live, and the layout under it:
//   <root>/contexts/<id>/context.json   what the context is (ContextMeta)
//   <root>/contexts/<id>/history.log    its token history (HistoryLog)
//   <root>/contexts/<id>/chunks/        its swapped KV chunks
//   <root>/contexts/<id>/chunks.table   its chunk table (ChunkTable: formats, densities)
// A context may live in a scope (llmsvcd: one per app): its key is "<scope>/<id>" and its
// directory <root>/contexts/<scope>/<id>/, so each scope is a directory of its own.
// Directories are created 0700: a context is private to the app that owns the root.
//
// The root is trusted once checked (state_root.h); below it nothing is: the engine reaches
// every file through the root's SafeDir (base/safe_dir.h) by the relative paths of `layout`,
// so a symbolic link planted anywhere below the root is refused, never followed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/safe_dir.h"
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

// The layout, as paths relative to the root (what messages show: never the root's own path).
namespace layout {
inline constexpr std::string_view kContexts = "contexts";
inline constexpr std::string_view kMeta = "context.json";
inline constexpr std::string_view kHistory = "history.log";
inline constexpr std::string_view kChunks = "chunks";
inline constexpr std::string_view kChunkTable = "chunks.table";
inline constexpr std::string_view kSwitchProfile = "switch-profile.json";
// An elastic model's level costs (`llmsvc profile`), for choosing a call's level from its SLO.
inline constexpr std::string_view kLevelProfile = "level-profile.json";

inline std::string context_dir(std::string_view key) { return std::string(kContexts) + "/" + std::string(key); }
inline std::string in_context(std::string_view key, std::string_view name) {
  return context_dir(key) + "/" + std::string(name);
}
inline std::string meta(std::string_view key) { return in_context(key, kMeta); }
inline std::string history(std::string_view key) { return in_context(key, kHistory); }
inline std::string chunks_dir(std::string_view key) { return in_context(key, kChunks); }
inline std::string chunk_table(std::string_view key) { return in_context(key, kChunkTable); }
}  // namespace layout

class StateDir {
 public:
  // By path alone (tools, tests): list() and has() open the root when asked.
  explicit StateDir(std::string root) : root_(std::move(root)) {}
  // The root held open (the engine's: checked and opened once by open_state_root).
  StateDir(std::string root, fileio::SafeDirRef dir) : root_(std::move(root)), dir_(std::move(dir)) {}
  const std::string& root() const { return root_; }
  // The root's SafeDir (null for a StateDir made from a path alone).
  const fileio::SafeDirRef& dir() const { return dir_; }

  // Absolute paths, for tools and tests that look at the files; the engine uses `layout`.
  std::string contexts_dir() const { return root_ + "/" + std::string(layout::kContexts); }
  std::string context_dir(std::string_view id) const { return root_ + "/" + layout::context_dir(id); }
  std::string meta_path(std::string_view id) const { return root_ + "/" + layout::meta(id); }
  std::string history_path(std::string_view id) const { return root_ + "/" + layout::history(id); }
  std::string chunks_dir(std::string_view id) const { return root_ + "/" + layout::chunks_dir(id); }
  std::string chunk_table_path(std::string_view id) const { return root_ + "/" + layout::chunk_table(id); }

  // Ids of the contexts on storage (directories with a context.json), sorted: those without
  // a scope, or with `scope` those in it (their ids, without the "<scope>/"). A link on the
  // way (a scope directory replaced by one) is Code::io.
  Result<std::vector<std::string>> list(std::string_view scope = {}) const;
  // Whether context `key` exists: its context.json is a regular file reached through no link.
  bool has(std::string_view key) const;

 private:
  Result<fileio::SafeDirRef> root_dir() const;

  std::string root_;
  fileio::SafeDirRef dir_;
};

}  // namespace llmsvc::persist
