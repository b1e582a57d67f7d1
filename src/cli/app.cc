#include "cli/app.h"

#include <ostream>
#include <sstream>

#include "core/error.h"
#include "core/strings.h"

namespace orrery::cli {

void register_plan_serve_command(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);
void register_calibrate_command(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions);

const io::Catalog& Context::catalog() {
  if (!catalog_) {
    io::CatalogOptions o;
    o.paths = global.catalog_paths;
    catalog_ = io::load_catalog(o);
  }
  return *catalog_;
}

namespace {

// The deepest subcommand the parser entered.
CLI::App* deepest(CLI::App* app) {
  for (CLI::App* sub : app->get_subcommands()) return deepest(sub);
  return app;
}

std::string path_of(CLI::App* app) {
  std::string p;
  for (CLI::App* a = app; a != nullptr && a->get_parent() != nullptr; a = a->get_parent()) p = a->get_name() + (p.empty() ? "" : " " + p);
  return p;
}

// One hint for the first unexpected token: the nearest flag (for "-x"/"--xyz") or subcommand name.
std::string hint_for_extras(CLI::App* app, const std::vector<std::string>& extras) {
  if (extras.empty()) return {};
  const std::string& tok = extras.front();
  std::vector<std::string> names;
  if (!tok.empty() && tok[0] == '-') {
    for (CLI::App* a = app; a != nullptr; a = a->get_parent()) {
      for (const CLI::Option* o : a->get_options()) {
        for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
      }
    }
    const std::string flag = tok.substr(0, tok.find('='));
    return suggest(flag, names);
  }
  for (const CLI::App* s : app->get_subcommands({})) names.push_back(s->get_name());
  return suggest(tok, names);
}

}  // namespace

int run_app(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "orrery: a fast, validated simulator and planner for distributed ML systems.\n"
      "Docs: docs/design.md (start here). Every command accepts --json, --quiet and --catalog PATH.",
      "orrery"};
  app.set_version_flag("--version", std::string("orrery ") + ORRERY_VERSION);
  app.require_subcommand(0, 1);
  GlobalOptions global;
  app.add_option("--catalog", global.catalog_paths,
                 "extra catalog file or folder (YAML hardware entries, config.json models); repeatable; "
                 "also ORRERY_CATALOG=path1:path2")
      ->type_name("PATH");
  app.add_flag("--json", global.json, "print stable, documented JSON instead of tables (docs/cli.md)");
  app.add_flag("-q,--quiet", global.quiet, "no progress bar or notes on stderr");

  std::vector<std::pair<CLI::App*, Action>> actions;
  register_catalog_commands(app, actions);
  register_net_commands(app, actions);
  register_demo_command(app, actions);
  register_gossip_commands(app, actions);
  register_train_command(app, actions);
  register_serve_commands(app, actions);
  register_plan_train_command(app, actions);
  register_plan_serve_command(app, actions);
  register_calibrate_command(app, actions);
  for (auto& [sub, action] : actions) sub->fallthrough();
  for (CLI::App* sub : app.get_subcommands({})) sub->fallthrough();

  std::ostringstream cmdline;
  for (int i = 0; i < argc; ++i) cmdline << (i ? " " : "") << argv[i];

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << deepest(&app)->help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion&) {
    out << app.version() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    CLI::App* where = deepest(&app);
    std::string hint;
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) hint = hint_for_extras(where, where->remaining());
    // With fallthrough, a subcommand's unknown flag lands in the top-level app's extras: look for the
    // nearest name among the options of the subcommand that was entered (and its parents).
    if (hint.empty() && dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) hint = hint_for_extras(where, app.remaining());
    if (hint.empty() && !where->get_subcommands({}).empty() && where->get_subcommands().empty()) {
      std::string names;
      for (const CLI::App* sub : where->get_subcommands({})) names += (names.empty() ? "" : ", ") + sub->get_name();
      hint = "valid subcommands: " + names;
    }
    const std::string p = path_of(where);
    err << "orrery" << (p.empty() ? "" : " " + p) << ": error: " << e.what() << (hint.empty() ? "" : "; " + hint)
        << " (see --help)\n";
    return 2;
  }

  try {
    for (auto& [sub, action] : actions) {
      if (sub->parsed()) {
        Context ctx(global, out, cmdline.str());
        action(ctx);
        return ctx.exit_code;
      }
    }
    out << app.help();
    return 0;
  } catch (const InputError& e) {
    err << "orrery: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    err << "orrery: internal error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace orrery::cli
