#include "io/yaml_util.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "core/strings.h"
#include "core/unit_parse.h"

namespace orrery::io {

YAML::Node load_yaml(std::string_view text, const std::string& file) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    throw InputError(Where{file, e.mark.line + 1, ""}, "malformed YAML: " + e.msg);
  }
}

Where where_of(const YAML::Node& node, const std::string& file, const std::string& key) {
  const int64_t line = node.Mark().is_null() ? 0 : node.Mark().line + 1;
  return Where{file, line, key};
}

Fields::Fields(const YAML::Node& node, Where where) : node_(node), where_(std::move(where)) {
  if (!node_.IsMap()) {
    if (!node_.Mark().is_null()) where_.line = node_.Mark().line + 1;
    throw InputError(where_, "expected a mapping of key: value pairs");
  }
  if (!node_.Mark().is_null()) where_.line = node_.Mark().line + 1;
}

Where Fields::where_of_key(std::string_view key) const {
  const YAML::Node& cnode = node_;
  const YAML::Node v = cnode[std::string(key)];
  Where w = where_.with_key(key);
  if (v && !v.Mark().is_null()) w.line = v.Mark().line + 1;
  return w;
}

std::optional<YAML::Node> Fields::value(std::string_view key, bool required) {
  known_.emplace(key);
  const YAML::Node& cnode = node_;
  const YAML::Node v = cnode[std::string(key)];
  if (!v || v.IsNull()) {
    if (required) {
      // A misspelling of this key is the likelier mistake: report it where it was written.
      for (const auto& kv : node_) {
        const std::string k = kv.first.as<std::string>();
        if (known_.count(k) == 0 && edit_distance(k, key) <= 2) {
          Where w = where_.with_key(k);
          if (!kv.first.Mark().is_null()) w.line = kv.first.Mark().line + 1;
          throw InputError(w, "unknown key '" + k + "'", "did you mean '" + std::string(key) + "'?");
        }
      }
      throw InputError(where_.with_key(key), "missing required key '" + std::string(key) + "'");
    }
    return std::nullopt;
  }
  return v;
}

std::string Fields::scalar(std::string_view key, const YAML::Node& v, std::string_view expected) const {
  if (!v.IsScalar()) throw InputError(where_of_key(key), fmt::format("expected {}, got a list or mapping", expected));
  return v.Scalar();
}

std::string Fields::req_string(std::string_view key) { return scalar(key, *value(key, true), "a string"); }

std::optional<std::string> Fields::opt_string(std::string_view key) {
  const auto v = value(key, false);
  if (!v) return std::nullopt;
  return scalar(key, *v, "a string");
}

namespace {
std::optional<int64_t> to_int(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return v;
}
std::optional<double> to_double(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v)) return std::nullopt;
  return v;
}
}  // namespace

int64_t Fields::req_int(std::string_view key) {
  const std::string s = scalar(key, *value(key, true), "an integer");
  const auto v = to_int(s);
  if (!v) throw InputError(where_of_key(key), fmt::format("expected an integer, got '{}'", s));
  return *v;
}

int64_t Fields::req_positive_int(std::string_view key) {
  const int64_t v = req_int(key);
  if (v < 1) throw InputError(where_of_key(key), fmt::format("must be a positive integer, got {}", v));
  return v;
}

std::optional<int64_t> Fields::opt_int(std::string_view key) {
  const auto v = value(key, false);
  if (!v) return std::nullopt;
  const std::string s = scalar(key, *v, "an integer");
  const auto i = to_int(s);
  if (!i) throw InputError(where_of_key(key), fmt::format("expected an integer, got '{}'", s));
  return i;
}

double Fields::req_double(std::string_view key) {
  const std::string s = scalar(key, *value(key, true), "a number");
  const auto v = to_double(s);
  if (!v) throw InputError(where_of_key(key), fmt::format("expected a number, got '{}'", s));
  return *v;
}

std::optional<double> Fields::opt_double(std::string_view key) {
  const auto node = value(key, false);
  if (!node) return std::nullopt;
  const std::string s = scalar(key, *node, "a number");
  const auto v = to_double(s);
  if (!v) throw InputError(where_of_key(key), fmt::format("expected a number, got '{}'", s));
  return v;
}

double Fields::req_nonnegative_double(std::string_view key) {
  const double v = req_double(key);
  if (v < 0) throw InputError(where_of_key(key), fmt::format("must not be negative, got {}", v));
  return v;
}

Bytes Fields::req_bytes(std::string_view key) {
  return parse_bytes_positive(scalar(key, *value(key, true), "a size such as '80 GiB'"), where_of_key(key));
}

Bandwidth Fields::req_bandwidth(std::string_view key) {
  return parse_bandwidth_positive(scalar(key, *value(key, true), "a bandwidth such as '400 Gb/s'"),
                                  where_of_key(key));
}

std::optional<Bandwidth> Fields::opt_bandwidth(std::string_view key) {
  const auto v = value(key, false);
  if (!v) return std::nullopt;
  return parse_bandwidth_positive(scalar(key, *v, "a bandwidth such as '400 Gb/s'"), where_of_key(key));
}

FlopRate Fields::req_flop_rate(std::string_view key) {
  return parse_flop_rate_positive(scalar(key, *value(key, true), "a compute rate such as '989 TFLOP/s'"),
                                  where_of_key(key));
}

std::optional<Time> Fields::opt_time(std::string_view key) {
  const auto v = value(key, false);
  if (!v) return std::nullopt;
  return parse_time(scalar(key, *v, "a duration such as '1.5 us'"), where_of_key(key));
}

Power Fields::req_power(std::string_view key) {
  const Where w = where_of_key(key);
  const Power p = parse_power(scalar(key, *value(key, true), "a power such as '700 W'"), w);
  if (!(p.watts() > 0)) throw InputError(w, "must be positive");
  return p;
}

std::optional<Power> Fields::opt_power(std::string_view key) {
  if (!value(key, false)) return std::nullopt;
  return req_power(key);
}

YAML::Node Fields::req_node(std::string_view key) { return *value(key, true); }

std::optional<YAML::Node> Fields::opt_node(std::string_view key) { return value(key, false); }

void Fields::finish() const {
  const std::vector<std::string> known(known_.begin(), known_.end());
  for (const auto& kv : node_) {
    const std::string k = kv.first.as<std::string>();
    if (known_.count(k) == 0) {
      Where w = where_.with_key(k);
      if (!kv.first.Mark().is_null()) w.line = kv.first.Mark().line + 1;
      throw InputError(w, "unknown key '" + k + "'", suggest(k, known));
    }
  }
}

}  // namespace orrery::io
