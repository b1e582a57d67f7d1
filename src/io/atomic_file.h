// Output files are written atomically: to a temporary file in the same directory, then renamed over
// the target, so a crash or an error never leaves a half-written result.
#pragma once

#include <string>
#include <string_view>

namespace orrery::io {

// Writes `content` to `path` atomically, creating parent directories. Throws InputError naming `path`
// (the CLI's one-line error, exit code 2) when the file cannot be written: the path a user gave is
// bad input (a missing permission, a name too long, a full disk), and nothing is left behind.
void write_file_atomic(const std::string& path, std::string_view content);

// Reads a whole file. Throws InputError naming the path when it cannot be opened.
std::string read_file(const std::string& path);

}  // namespace orrery::io
