#include "core/strings.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <stdexcept>

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

std::optional<double> parse_number(std::string_view s) {
  const std::string t(trim(s));
  if (t.empty()) return std::nullopt;
  try {
    size_t used = 0;
    const double v = std::stod(t, &used);
    if (used != t.size() || !std::isfinite(v)) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
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
  // Score = case-insensitive distance (a name containing the query, or contained in it, counts as at
  // most 1), ties broken by exact-case distance (units are case-sensitive: "Gb/s" vs "GB/s"), then by
  // candidate order. Only candidates at the minimal case-insensitive distance are returned.
  const std::string lname = to_lower(name);
  const int limit = std::max<int>(2, static_cast<int>(name.size()) / 2);
  struct Scored {
    int ci;
    int cs;
    size_t index;
  };
  std::vector<Scored> scored;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string lc = to_lower(candidates[i]);
    int d = edit_distance(lname, lc);
    const bool contains =
        !lname.empty() && (lc.find(lname) != std::string::npos || lname.find(lc) != std::string::npos);
    if (contains) d = std::min(d, 1);
    if (d > limit) continue;
    int cs = 0;
    for (size_t k = 0; k < std::min(name.size(), candidates[i].size()); ++k) cs += name[k] != candidates[i][k];
    scored.push_back({d, cs, i});
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const Scored& x, const Scored& y) { return x.ci != y.ci ? x.ci < y.ci : x.cs < y.cs; });
  std::vector<std::string> out;
  for (const Scored& s : scored) {
    if (s.ci != scored.front().ci || out.size() >= max_results) break;
    out.push_back(candidates[s.index]);
  }
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

void split_csv(std::string_view line, std::vector<std::string_view>& out) {
  out.clear();
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      out.push_back(trim(line.substr(start)));
      return;
    }
    out.push_back(trim(line.substr(start, comma - start)));
    start = comma + 1;
  }
}

std::vector<std::string_view> split_csv(std::string_view line) {
  std::vector<std::string_view> out;
  split_csv(line, out);
  return out;
}

}  // namespace orrery
