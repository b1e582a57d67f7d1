#include "core/error.h"

#include <cstdio>
#include <cstdlib>

#include "core/assert.h"

namespace orrery {

Where Where::with_key(std::string_view k) const {
  Where w = *this;
  if (w.key.empty()) {
    w.key = std::string(k);
  } else if (!k.empty() && k.front() == '[') {
    w.key += std::string(k);
  } else {
    w.key += "." + std::string(k);
  }
  return w;
}

std::string Where::to_string() const {
  std::string out = file;
  if (line > 0) out += (out.empty() ? "line " : ":") + std::to_string(line);
  if (!key.empty()) out += (out.empty() ? "" : ": ") + key;
  return out;
}

namespace {
std::string compose(const Where& where, const std::string& message, const std::string& hint) {
  std::string out = where.to_string();
  if (!out.empty()) out += ": ";
  out += message;
  if (!hint.empty()) out += "; " + hint;
  return out;
}
}  // namespace

InputError::InputError(Where where, std::string message, std::string hint)
    : std::runtime_error(compose(where, message, hint)),
      where_(std::move(where)),
      message_(std::move(message)),
      hint_(std::move(hint)) {}

namespace detail {
void assertion_failed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "orrery: internal error: assertion '%s' failed at %s:%d\n", expr, file, line);
  std::abort();
}
}  // namespace detail

}  // namespace orrery
