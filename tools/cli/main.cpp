// SPDX-License-Identifier: Apache-2.0
// llmsvc: run, chat with, tokenize with and inspect a model; run, chat and ctx go through llmsvc.h
// (embedded, or the llmsvcd daemon with --target unix:PATH).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <new>

#include "tools/cli/commands.h"

int main(int argc, char** argv) {
  try {
    CLI::App app{"llmsvc: the on-device LLM service's command-line tool"};
    app.require_subcommand(1);
    int exit_code = 0;
    llmsvc::cli::add_run_command(app, exit_code);
    llmsvc::cli::add_chat_command(app, exit_code);
    llmsvc::cli::add_tokenize_command(app, exit_code);
    llmsvc::cli::add_info_command(app, exit_code);
    llmsvc::cli::add_ctx_command(app, exit_code);
    llmsvc::cli::add_profile_command(app, exit_code);
    llmsvc::cli::add_elastify_command(app, exit_code);
    CLI11_PARSE(app, argc, argv);
    return exit_code;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "llmsvc: LLMSVC_ERR_OUT_OF_MEMORY: out of memory\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llmsvc: LLMSVC_ERR_INTERNAL: %s\n", e.what());
  }
  return 1;
}
