// Human-readable tables and machine-readable JSON for every command.
#pragma once

#include <string>
#include <vector>

#include "io/json_util.h"

namespace orrery::cli {

// A plain-text table: a header row, a rule, and rows; numeric-looking cells are right-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> header, std::string title = {});
  void add_row(std::vector<std::string> row);
  std::string render() const;
  size_t rows() const { return rows_.size(); }

  // The same content as CSV (RFC 4180 quoting).
  std::string to_csv() const;

 private:
  std::string title_;
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Standard envelope of every --json document and result file:
// {"orrery_version": ..., "command": ..., <payload keys>}.
io::Json envelope(const std::string& command);

}  // namespace orrery::cli
