#include "core/strings.h"

#include <algorithm>
#include <cctype>
#include <numeric>

namespace orrery {

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

int edit_distance(std::string_view a_in, std::string_view b_in) {
  const std::string a = to_lower(a_in);
  const std::string b = to_lower(b_in);
  std::vector<int> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diag = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int up = row[j];
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + cost});
      diag = up;
    }
  }
  return row[b.size()];
}

std::vector<std::string> nearest_names(std::string_view name, const std::vector<std::string>& candidates,
                                       size_t max_results) {
  const std::string lname = to_lower(name);
  const int limit = std::max<int>(2, static_cast<int>(name.size()) / 2);
  std::vector<std::pair<int, size_t>> scored;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string lc = to_lower(candidates[i]);
    int d = edit_distance(lname, lc);
    const bool contains = !lname.empty() && (lc.find(lname) != std::string::npos || lname.find(lc) != std::string::npos);
    if (d <= limit || contains) scored.emplace_back(contains ? std::min(d, 1) : d, i);
  }
  std::stable_sort(scored.begin(), scored.end(), [](auto& x, auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (size_t k = 0; k < scored.size() && out.size() < max_results; ++k) out.push_back(candidates[scored[k].second]);
  return out;
}

std::string suggest(std::string_view name, const std::vector<std::string>& candidates) {
  if (candidates.empty()) return {};
  auto near = nearest_names(name, candidates, 2);
  if (near.size() == 1) return "did you mean '" + near[0] + "'?";
  if (near.size() == 2) return "did you mean '" + near[0] + "' or '" + near[1] + "'?";
  std::string out = "valid names: ";
  for (size_t i = 0; i < candidates.size() && i < 12; ++i) out += (i ? ", " : "") + candidates[i];
  if (candidates.size() > 12) out += ", ...";
  return out;
}

}  // namespace orrery
