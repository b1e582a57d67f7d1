// The built-in catalog files, embedded at build time by cmake/embed_catalog.cmake.
#pragma once

#include <string_view>
#include <vector>

namespace orrery::io {

struct EmbeddedFile {
  std::string_view path;  // relative to catalog/, e.g. "gpus.yaml" or "models/llama3-8b.json"
  std::string_view text;
};

const std::vector<EmbeddedFile>& embedded_catalog();

}  // namespace orrery::io
