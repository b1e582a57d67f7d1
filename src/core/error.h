// Error policy (see docs/design.md, "Errors"):
//  - Bad user input (config, CLI flag, trace, model file): throw InputError carrying where (file,
//    line, key), what was expected, what was found, and a hint such as the nearest valid name.
//    The CLI prints InputError::what() as one line and exits with status 2.
//  - Expected negative outcomes (a plan that does not fit) are values, never exceptions.
//  - Broken invariants are ORRERY_ASSERT / ORRERY_CHECK (core/assert.h).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace orrery {

// Where a value came from. Any field may be empty/zero when unknown.
struct Where {
  std::string file;  // path of the input file, or a pseudo-name like "<command line>"
  int64_t line = 0;  // 1-based; 0 when unknown
  std::string key;   // dotted key path ("gpus[3].memory") or flag name ("--size")

  Where with_key(std::string_view k) const;  // appends ".k" (or sets it when empty)
  std::string to_string() const;             // "file:line: key" with empty parts left out
};

class InputError : public std::runtime_error {
 public:
  // message: what is wrong and what was expected; hint: optional ("did you mean 'h100-sxm'?").
  InputError(Where where, std::string message, std::string hint = {});

  const Where& where() const { return where_; }
  const std::string& message() const { return message_; }
  const std::string& hint() const { return hint_; }

 private:
  Where where_;
  std::string message_;
  std::string hint_;
};

}  // namespace orrery
