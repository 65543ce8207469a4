// SPDX-License-Identifier: Apache-2.0
// Runs the llmsvc CLI binary as a child process (through the shell, stdin from a file),
// capturing its exit code, stdout and stderr. Shared by the CLI's test files.
#pragma once

#include <stdlib.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace llmsvc::test {

struct CliOutcome {
  int exit_code = -1;
  std::string out, err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `cli` with `args`; `env` is prepended as VAR=value words; stdin from `input`. `dir`
// holds the files of the redirections.
inline CliOutcome run_cli(const std::filesystem::path& dir, const std::string& cli, const std::vector<std::string>& args,
                          const std::string& env = "", const std::string& input = "") {
  std::ofstream(dir / "in") << input;
  std::string cmd = "env " + env + " " + shell_quote(cli);
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string&&.
  for (const auto& a : args) cmd.append(" ").append(shell_quote(a));
  cmd.append(" <").append(shell_quote((dir / "in").string()));
  cmd.append(" >").append(shell_quote((dir / "out").string()));
  cmd.append(" 2>").append(shell_quote((dir / "err").string()));
  CliOutcome r;
  int status = std::system(cmd.c_str());
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  return r;
}

}  // namespace llmsvc::test
