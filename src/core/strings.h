// Small string helpers shared by readers and the CLI.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace orrery {

// Levenshtein edit distance (insert, delete, substitute each cost 1), case-insensitive.
int edit_distance(std::string_view a, std::string_view b);

// Up to max_results candidates closest to `name` by edit distance, nearest first (ties keep
// candidate order). Candidates further than max(2, |name|/2) edits are dropped unless one of the
// strings contains the other.
std::vector<std::string> nearest_names(std::string_view name, const std::vector<std::string>& candidates,
                                       size_t max_results = 3);

// "did you mean 'a'?" / "did you mean 'a' or 'b'?" or, with no near candidate,
// "valid names: a, b, c" (listing at most 12). Empty when candidates is empty.
std::string suggest(std::string_view name, const std::vector<std::string>& candidates);

std::string to_lower(std::string_view s);
std::string_view trim(std::string_view s);

// The finite number `s` spells (std::stod's syntax, surrounding spaces allowed); nullopt when any other
// character remains, when it is empty, or when the number is out of range or not finite.
std::optional<double> parse_number(std::string_view s);

// The comma-separated fields of one CSV line, each trimmed (no quoting: the files orrery reads have
// none). A trailing comma gives an empty last field. The views point into `line`. The second form
// reuses `out` (for readers that split millions of lines).
std::vector<std::string_view> split_csv(std::string_view line);
void split_csv(std::string_view line, std::vector<std::string_view>& out);

}  // namespace orrery
