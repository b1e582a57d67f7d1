// Where the validation tests find ../shared (the measured data they read; never copied into the project).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string_view>

namespace orrery::validation {

// $ORRERY_SHARED_DIR / sub (ctest sets the variable to ../shared), else $ORRERY_SOURCE_DIR/../shared / sub;
// nullopt when neither variable is set or the path does not exist (the test then skips with a reason).
inline std::optional<std::filesystem::path> shared_path(std::string_view sub) {
  std::filesystem::path shared;
  if (const char* s = std::getenv("ORRERY_SHARED_DIR"); s != nullptr) {
    shared = s;
  } else if (const char* src = std::getenv("ORRERY_SOURCE_DIR"); src != nullptr) {
    shared = std::filesystem::path(src) / ".." / "shared";
  } else {
    return std::nullopt;
  }
  const std::filesystem::path p = shared / sub;
  if (!std::filesystem::exists(p)) return std::nullopt;
  return p;
}

}  // namespace orrery::validation
