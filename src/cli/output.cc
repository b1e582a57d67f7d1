#include "cli/output.h"

#include <algorithm>
#include <cctype>

#include "core/assert.h"

namespace orrery::cli {
namespace {
bool numeric_looking(const std::string& s) {
  return !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) != 0 ||
                        ((s[0] == '-' || s[0] == '+' || s[0] == '$') && s.size() > 1 && std::isdigit(static_cast<unsigned char>(s[1])) != 0));
}

// Display width in terminal cells: count UTF-8 lead bytes only.
size_t display_width(const std::string& s) {
  size_t w = 0;
  for (unsigned char c : s) w += (c & 0xC0) != 0x80;
  return w;
}

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}
}  // namespace

Table::Table(std::vector<std::string> header, std::string title) : title_(std::move(title)), header_(std::move(header)) {}

void Table::add_row(std::vector<std::string> row) {
  ORRERY_CHECK(row.size() == header_.size());
  rows_.push_back(std::move(row));
}

std::string Table::render() const {
  std::vector<size_t> width(header_.size());
  for (size_t c = 0; c < header_.size(); ++c) width[c] = display_width(header_[c]);
  for (const auto& r : rows_) {
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], display_width(r[c]));
  }
  std::string out;
  if (!title_.empty()) out += title_ + "\n";
  auto line = [&](const std::vector<std::string>& cells, bool header) {
    std::string l;
    for (size_t c = 0; c < cells.size(); ++c) {
      const size_t pad = width[c] - display_width(cells[c]);
      const bool right = !header && numeric_looking(cells[c]);
      if (c > 0) l += "  ";
      if (right) l += std::string(pad, ' ');
      l += cells[c];
      if (!right && c + 1 < cells.size()) l += std::string(pad, ' ');
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  line(header_, true);
  size_t total = 0;
  for (size_t c = 0; c < width.size(); ++c) total += width[c] + (c ? 2 : 0);
  out += std::string(total, '-') + "\n";
  for (const auto& r : rows_) line(r, false);
  return out;
}

std::string Table::to_csv() const {
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t c = 0; c < cells.size(); ++c) out += (c ? "," : "") + csv_cell(cells[c]);
    out += "\n";
  };
  line(header_);
  for (const auto& r : rows_) line(r);
  return out;
}

io::Json envelope(const std::string& command) {
  io::Json j;
  j["orrery_version"] = ORRERY_VERSION;
  j["command"] = command;
  return j;
}

}  // namespace orrery::cli
