// Strict reading of YAML mappings with file:line:key in every error. Private to io/.
//
// A Fields object wraps one mapping. Each req_*/opt_* call names a key the schema knows; finish()
// then rejects any other key in the mapping, suggesting the nearest known key, so a typo such as
// "memroy:" is an error rather than a silently missing value.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "core/error.h"
#include "core/units.h"

namespace orrery::io {

// Parses YAML text; malformed input throws InputError "file:line: malformed YAML: ...".
YAML::Node load_yaml(std::string_view text, const std::string& file);

// Where for a node: the file, its 1-based line, and the given key path.
Where where_of(const YAML::Node& node, const std::string& file, const std::string& key);

class Fields {
 public:
  // REQUIRES: `where` names the mapping. Throws InputError when `node` is not a mapping.
  Fields(const YAML::Node& node, Where where);

  std::string req_string(std::string_view key);
  std::optional<std::string> opt_string(std::string_view key);
  int64_t req_int(std::string_view key);           // must be an integer
  int64_t req_positive_int(std::string_view key);  // integer >= 1
  std::optional<int64_t> opt_int(std::string_view key);
  double req_double(std::string_view key);
  double req_nonnegative_double(std::string_view key);
  std::optional<double> opt_double(std::string_view key);

  Bytes req_bytes(std::string_view key);  // unit string, > 0
  Bandwidth req_bandwidth(std::string_view key);
  std::optional<Bandwidth> opt_bandwidth(std::string_view key);
  FlopRate req_flop_rate(std::string_view key);
  std::optional<Time> opt_time(std::string_view key);
  Power req_power(std::string_view key);
  std::optional<Power> opt_power(std::string_view key);  // > 0 when present

  // Sub-mapping (required / optional) and its Where.
  YAML::Node req_node(std::string_view key);
  std::optional<YAML::Node> opt_node(std::string_view key);
  Where where_of_key(std::string_view key) const;

  // Throws InputError for any key never asked for.
  void finish() const;

  const Where& where() const { return where_; }

 private:
  // The value at key, or nullopt when absent or null. Lookups go through a const node: yaml-cpp's
  // non-const operator[] would insert the key.
  std::optional<YAML::Node> value(std::string_view key, bool required);
  std::string scalar(std::string_view key, const YAML::Node& v, std::string_view expected) const;

  YAML::Node node_;
  Where where_;
  std::set<std::string, std::less<>> known_;
};

}  // namespace orrery::io
