// JSON helpers shared by io/ readers and the CLI's --json output.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace orrery::io {

using Json = nlohmann::ordered_json;

// 1-based line of a byte offset in `text` (for nlohmann parse errors, which report byte offsets).
int64_t line_of_offset(std::string_view text, size_t offset);

// Parses JSON text; malformed input throws InputError "file:line: malformed JSON: ...".
Json parse_json(std::string_view text, const std::string& file);

// Serializes with 2-space indentation and a trailing newline. Doubles are written with the shortest
// representation that round-trips, so output is byte-identical across runs.
std::string dump_json(const Json& j);

}  // namespace orrery::io
