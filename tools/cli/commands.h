// SPDX-License-Identifier: Apache-2.0
// The subcommands: each adds itself to the app and, when chosen, stores its exit code.
#pragma once

#include <CLI/CLI.hpp>

namespace llmsvc::cli {

void add_run_command(CLI::App& app, int& exit_code);
void add_chat_command(CLI::App& app, int& exit_code);
void add_tokenize_command(CLI::App& app, int& exit_code);
void add_info_command(CLI::App& app, int& exit_code);
void add_ctx_command(CLI::App& app, int& exit_code);
void add_profile_command(CLI::App& app, int& exit_code);
void add_elastify_command(CLI::App& app, int& exit_code);

}  // namespace llmsvc::cli
