// The orrery command-line application: one binary, subcommands registered by each pillar.
//
// Exit codes: 0 success; 2 bad input (one line on stderr naming the file/line/key or flag, the expected
// form and the nearest valid name); 1 internal error. Output files are written atomically.
#pragma once

#include <functional>
#include <optional>
#include <iosfwd>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "io/catalog_loader.h"

namespace orrery::cli {

// Options every subcommand understands (placed before or after the subcommand name).
struct GlobalOptions {
  std::vector<std::string> catalog_paths;  // --catalog (repeatable)
  bool json = false;                       // --json
  bool quiet = false;                      // --quiet
};

// What a subcommand's action gets: the parsed global options, a lazily loaded catalog, the output
// stream, and the exact command line (recorded in result files).
class Context {
 public:
  Context(const GlobalOptions& g, std::ostream& o, std::string cmdline)
      : global(g), out(o), command_line(std::move(cmdline)) {}
  const io::Catalog& catalog();

  const GlobalOptions& global;
  std::ostream& out;
  std::string command_line;
  int exit_code = 0;  // an action sets 1 for an expected negative outcome (e.g. no feasible plan)

 private:
  std::optional<io::Catalog> catalog_;
};

using Action = std::function<void(Context&)>;

// Registration functions, one per command family.
void register_catalog_commands(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_net_commands(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_demo_command(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_gossip_commands(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_train_command(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_serve_commands(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
// `orrery plan`: the group every planner adds its subcommand to (created on first use), and `plan train`.
CLI::App* plan_group(CLI::App& app);
void register_plan_train_command(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);

// Runs orrery with argv; returns the exit code. Never calls exit().
int run_app(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace orrery::cli
