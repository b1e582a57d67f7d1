// The catalog: GPUs, nodes, interconnects and prices (YAML) and models (Hugging Face config.json),
// loaded at run time from the built-in files (catalog/, embedded at build time) and then from the
// user's own files and folders, in order; an entry with the same name as an earlier one replaces it.
//
// User catalog paths come from, in order: the ORRERY_CATALOG environment variable (colon-separated)
// and then each --catalog flag. A path may be a YAML file, a config.json (its stem is the model name),
// or a folder (its *.yaml/*.yml files in name order, then *.json and models/*.json).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "hw/hw_catalog.h"
#include "model/model_spec.h"

namespace orrery::io {

struct ModelEntry {
  std::string name;    // catalog name: file stem, e.g. "llama3-8b"
  std::string origin;  // "builtin:models/llama3-8b.json" or a user path
  std::string text;    // the config.json text, parsed on demand
};

class Catalog {
 public:
  hw::HwCatalog hw;

  const std::map<std::string, ModelEntry, std::less<>>& models() const { return models_; }
  std::vector<std::string> model_names() const;
  void add_model(ModelEntry m) { models_[m.name] = std::move(m); }

  // A catalog model name, or else a path to a config.json. Unknown names throw InputError with the
  // nearest catalog names.
  model::ModelSpec model(std::string_view name_or_path, const Where& where) const;

  // Files loaded, in order (for result files' provenance).
  std::vector<std::string> loaded;

 private:
  std::map<std::string, ModelEntry, std::less<>> models_;
};

struct CatalogOptions {
  std::vector<std::string> paths;  // user files or folders, after ORRERY_CATALOG
  bool use_environment = true;     // read ORRERY_CATALOG
  bool builtin = true;             // start from the embedded catalog
};

// Loads and cross-checks the catalog. Throws InputError (file:line: key ...) on bad input.
Catalog load_catalog(const CatalogOptions& options);

// Adds the entries of one YAML catalog file's text (exposed for tests).
void add_catalog_yaml(Catalog& catalog, std::string_view text, const std::string& file);

}  // namespace orrery::io
