// SPDX-License-Identifier: Apache-2.0
// Where the model comes from when the caller names none.
#include "runtime/core/model/default_model.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace llmsvc {
namespace {

std::string home_dir() {
  if (const char* home = std::getenv("HOME"); home && *home) return home;
  // Services often run without HOME; the password database still knows it.
  if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_dir) return pw->pw_dir;
  return "/";
}

}  // namespace

std::string default_model_path() {
  std::string dir;
  if (const char* d = std::getenv("LLMSVC_MODEL_DIR"); d && *d) {
    dir = d;
  } else {
    dir = home_dir() + "/.cache/llmsvc/models";
  }
  return dir + "/" + std::string(kDefaultModelFile);
}

Result<std::string> resolve_model_path(std::string_view model_path) {
  const bool is_default = model_path.empty();
  std::string path = is_default ? default_model_path() : std::string(model_path);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status(Code::model_not_found, "model path is a directory: " + path);
    return path;
  }
  const int err = errno;
  if (is_default && (err == ENOENT || err == ENOTDIR)) {
    return Status(Code::model_not_found, "the default model is not at " + path +
                                             "; run tools/scripts/fetch_model.sh to fetch it (it honours "
                                             "LLMSVC_MODEL_DIR)");
  }
  return Status(Code::model_not_found, "cannot open model " + path + ": " + std::strerror(err));
}

}  // namespace llmsvc
