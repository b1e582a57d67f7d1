#include "io/json_util.h"

namespace orrery::io {

int64_t line_of_offset(std::string_view text, size_t offset) {
  int64_t line = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) line += text[i] == '\n';
  return line;
}

Json parse_json(std::string_view text, const std::string& file) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    // nlohmann's byte is 1-based and points just past the offending character.
    const size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    std::string msg = e.what();
    if (const auto pos = msg.find("syntax error"); pos != std::string::npos) msg = msg.substr(pos);
    throw InputError(Where{file, line_of_offset(text, offset), ""}, "malformed JSON: " + msg);
  }
}

std::string dump_json(const Json& j) { return j.dump(2) + "\n"; }

}  // namespace orrery::io
