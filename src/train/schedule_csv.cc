#include "train/schedule_csv.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/strings.h"

namespace orrery::train {
namespace {

// One compute action as written: its cell's position and what it runs.
struct Action {
  int64_t stage = 0;
  char type = 'F';  // F, B, I or W
  int64_t microbatch = 0;
  bool paired = false;
  int64_t line = 0, step = 0;
  std::string text;
};

constexpr const char* kCommActions[] = {"UNSHARD", "RESHARD", "REDUCE_GRAD", "SEND_F", "RECV_F", "SEND_B", "RECV_B"};

Where cell(const std::string& file, int64_t line, int64_t step) {
  return Where{file, line, fmt::format("step {}", step)};
}

// `<stage><type><micro-batch>`; false for a communication action (skipped). Throws on anything else.
bool parse_action(std::string_view s, Action& a, const Where& at) {
  size_t i = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  if (i == 0 || i > 9) {
    throw InputError(at, fmt::format("expected an action <stage><F|B|I|W><micro-batch> such as 2F0, found '{}'", s));
  }
  a.stage = std::stoll(std::string(s.substr(0, i)));
  const std::string_view rest = s.substr(i);
  for (const char* comm : kCommActions) {
    const std::string_view c(comm);
    if (rest.substr(0, c.size()) == c) {
      const std::string_view mb = rest.substr(c.size());
      if (!std::all_of(mb.begin(), mb.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
        throw InputError(at, fmt::format("expected a micro-batch number after {} in '{}'", comm, s));
      }
      return false;
    }
  }
  const std::string_view digits = rest.empty() ? rest : rest.substr(1);
  if (rest.empty() || std::string_view("FBIW").find(rest[0]) == std::string_view::npos) {
    std::vector<std::string> types = {"F", "B", "I", "W"};
    for (const char* comm : kCommActions) types.emplace_back(comm);
    throw InputError(at, fmt::format("unknown action type in '{}'; expected F, B, I or W (or a communication action)", s),
                     suggest(std::string(rest.substr(0, std::min<size_t>(rest.size(), rest.find_first_of("0123456789")))),
                             types));
  }
  a.type = rest[0];
  if (digits.empty() || digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
    throw InputError(at, fmt::format("expected a micro-batch number after '{}{}' in '{}'", a.stage, a.type, s));
  }
  a.microbatch = std::stoll(std::string(digits));
  a.text = std::string(s);
  return true;
}

}  // namespace

CustomSchedule parse_schedule_csv(const std::string& text, const std::string& file) {
  std::vector<std::vector<Action>> rows;
  std::istringstream in(text);
  std::string line;
  int64_t n = 0;
  std::vector<int64_t> row_line;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string_view t = trim(line);
    if (t.empty() || t.front() == '#') continue;
    std::vector<Action> row;
    int64_t step = 0;
    for (std::string_view c : split_csv(line)) {
      const std::string_view s = trim(c);
      const Where at = cell(file, n, step);
      if (s.empty()) {
        ++step;
        continue;
      }
      if (s.front() == '(') {
        // (a;b)OVERLAP_F_B: a forward and a whole backward overlapped.
        const size_t close = s.find(')');
        if (close == std::string_view::npos || s.substr(close + 1) != "OVERLAP_F_B") {
          throw InputError(at, fmt::format("expected an overlapped pair (<forward>;<backward>)OVERLAP_F_B, found '{}'", s));
        }
        const std::string_view inner = s.substr(1, close - 1);
        const size_t semi = inner.find(';');
        Action f, b;
        if (semi == std::string_view::npos || !parse_action(trim(inner.substr(0, semi)), f, at) ||
            !parse_action(trim(inner.substr(semi + 1)), b, at) || f.type != 'F' || b.type != 'B') {
          throw InputError(at, fmt::format("an overlapped pair is a forward and a whole backward, (<stage>F<mb>;<stage>B<mb>)"
                                           "OVERLAP_F_B; found '{}'",
                                           s));
        }
        for (Action* a : {&f, &b}) {
          a->paired = true;
          a->line = n;
          a->step = step;
          row.push_back(*a);
        }
        ++step;
        continue;
      }
      Action a;
      if (parse_action(s, a, at)) {
        a.line = n;
        a.step = step;
        row.push_back(a);
      }
      ++step;
    }
    rows.push_back(std::move(row));
    row_line.push_back(n);
  }
  if (rows.empty()) throw InputError(Where{file, 0, ""}, "no pipeline rank rows: expected one row of actions per rank");
  CustomSchedule cs;
  cs.file = file;
  cs.ranks = static_cast<int64_t>(rows.size());
  const int64_t p = cs.ranks;

  // Stages, placement and micro-batches.
  std::map<int64_t, int64_t> rank_of;  // stage -> rank
  int64_t max_mb = -1;
  for (int64_t r = 0; r < p; ++r) {
    for (const Action& a : rows[static_cast<size_t>(r)]) {
      const auto [it, fresh] = rank_of.emplace(a.stage, r);
      if (!fresh && it->second != r) {
        throw InputError(cell(file, a.line, a.step), fmt::format("stage {} runs on ranks {} and {}: a stage lives on one rank",
                                                                 a.stage, it->second, r));
      }
      max_mb = std::max(max_mb, a.microbatch);
    }
  }
  const int64_t k = rank_of.empty() ? 0 : rank_of.rbegin()->first + 1;
  if (k == 0 || static_cast<int64_t>(rank_of.size()) != k || k % p != 0) {
    throw InputError(Where{file, 0, ""},
                     fmt::format("the actions name stages {}: expected stages 0 .. pp*vp - 1 for the {} rank rows", [&] {
                       std::string out;
                       for (const auto& [s, r] : rank_of) out += (out.empty() ? "" : " ") + std::to_string(s);
                       return out.empty() ? std::string("none") : out;
                     }(), p));
  }
  cs.stages = k;
  bool loop = true, v = k == 2 * p;
  for (const auto& [s, r] : rank_of) {
    loop = loop && r == s % p;
    v = v && r == (s < p ? s : 2 * p - 1 - s);
  }
  if (!loop && !v) {
    throw InputError(Where{file, 0, ""},
                     fmt::format("stage placement not supported: expected stage c*pp + s on rank s (interleaved) or stages s and "
                                 "2*pp - 1 - s on rank s (the V), pp = {}",
                                 p));
  }
  cs.v = v && !loop;  // pp = 1 or vp = 1 place both ways: the interleaved rule
  cs.microbatches = max_mb + 1;
  const int64_t m = cs.microbatches;

  // Every pass once: F, and B or I + W.
  std::map<std::tuple<int64_t, char, int64_t>, const Action*> seen;
  for (const auto& row : rows) {
    for (const Action& a : row) {
      const auto [it, fresh] = seen.emplace(std::tuple{a.stage, a.type, a.microbatch}, &a);
      if (!fresh) {
        throw InputError(cell(file, a.line, a.step), fmt::format("'{}' runs twice (first on line {}, step {})", a.text,
                                                                 it->second->line, it->second->step));
      }
      if (a.type == 'I' || a.type == 'W') cs.split = true;
    }
  }
  auto has = [&](int64_t s, char t, int64_t mb) { return seen.count({s, t, mb}) > 0; };
  for (int64_t s = 0; s < k; ++s) {
    const int64_t r = rank_of.at(s);
    const Where at{file, row_line[static_cast<size_t>(r)], ""};
    for (int64_t mb = 0; mb < m; ++mb) {
      if (!has(s, 'F', mb)) throw InputError(at, fmt::format("no forward of stage {} micro-batch {} ({}F{})", s, mb, s, mb));
      const bool b = has(s, 'B', mb), i = has(s, 'I', mb), w = has(s, 'W', mb);
      if (b && (i || w)) {
        throw InputError(at, fmt::format("stage {} micro-batch {} runs a whole backward (B) and a split one (I/W)", s, mb));
      }
      if (!b && !(i && w)) {
        throw InputError(at, fmt::format("no backward of stage {} micro-batch {}: expected {}B{}, or {}I{} and {}W{}", s, mb,
                                         s, mb, s, mb, s, mb));
      }
    }
  }

  // The order runs to its end: advance every rank while its next pass's inputs are done.
  using Key = std::tuple<int64_t, char, int64_t>;  // (stage, type, micro-batch)
  std::set<Key> done;
  auto ran = [&](int64_t s, char t, int64_t mb) { return done.count({s, t, mb}) > 0; };
  // The pass `a` waits for (a B of the next stage stands for its B or I), or none when it can run.
  auto waits_for = [&](const Action& a) -> std::optional<Key> {
    if (a.type == 'F') {
      if (a.stage == 0 || ran(a.stage - 1, 'F', a.microbatch)) return std::nullopt;
      return Key{a.stage - 1, 'F', a.microbatch};
    }
    if (a.type == 'W') {
      if (ran(a.stage, 'I', a.microbatch)) return std::nullopt;
      return Key{a.stage, 'I', a.microbatch};
    }
    if (!ran(a.stage, 'F', a.microbatch)) return Key{a.stage, 'F', a.microbatch};
    if (a.stage + 1 < k && !ran(a.stage + 1, 'B', a.microbatch) && !ran(a.stage + 1, 'I', a.microbatch)) {
      return Key{a.stage + 1, 'B', a.microbatch};
    }
    return std::nullopt;
  };
  std::vector<size_t> next(static_cast<size_t>(p), 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t r = 0; r < next.size(); ++r) {
      const auto& row = rows[r];
      for (; next[r] < row.size() && !waits_for(row[next[r]]); ++next[r], moved = true) {
        done.insert({row[next[r]].stage, row[next[r]].type, row[next[r]].microbatch});
      }
    }
  }
  for (size_t r = 0; r < next.size(); ++r) {
    if (next[r] == rows[r].size()) continue;
    const Action& a = rows[r][next[r]];
    const auto [ws, wt, wmb] = *waits_for(a);
    throw InputError(cell(file, a.line, a.step),
                     fmt::format("the order cannot run: rank {} waits at '{}' for {}{}{}{}, which waits on a pass after it",
                                 r, a.text, ws, wt, wmb, wt == 'B' ? fmt::format(" (or {}I{})", ws, wmb) : ""));
  }

  // The rank's passes; a whole backward under a splitting order is its B and W back to back (full).
  cs.order.resize(static_cast<size_t>(p));
  for (int64_t r = 0; r < p; ++r) {
    auto& out = cs.order[static_cast<size_t>(r)];
    for (const Action& a : rows[static_cast<size_t>(r)]) {
      const auto chunk = static_cast<int32_t>(a.stage / p);
      const auto mb = static_cast<int32_t>(a.microbatch);
      switch (a.type) {
        case 'F': out.push_back({PassKind::kForward, mb, chunk, false, a.paired}); break;
        case 'I': out.push_back({PassKind::kBackward, mb, chunk}); break;
        case 'W': out.push_back({PassKind::kWeight, mb, chunk}); break;
        default:
          out.push_back({PassKind::kBackward, mb, chunk, cs.split, a.paired});
          if (cs.split) out.push_back({PassKind::kWeight, mb, chunk, true, a.paired});
      }
    }
  }
  return cs;
}

void use_custom_schedule(Plan& plan, std::shared_ptr<const CustomSchedule> order) {
  plan.schedule = Schedule::kCustom;
  plan.vp = order->ranks > 0 ? order->stages / order->ranks : 1;
  plan.custom = std::move(order);
}

std::string schedule_csv_text(const Plan& plan) {
  std::string out;
  for (int64_t s = 0; s < plan.pp; ++s) {
    const std::vector<PipelinePass> order = pipeline_order(plan, s);
    std::vector<std::string> cells;
    auto name = [&](const PipelinePass& x, char type) {
      return fmt::format("{}{}{}", plan.virtual_stage(s, x.chunk), type, x.microbatch);
    };
    const bool split = plan.splits_backward();
    for (size_t i = 0; i < order.size(); ++i) {
      const PipelinePass& x = order[i];
      if (x.kind == PassKind::kWeight && x.full) continue;  // written as its B
      const char type = x.kind == PassKind::kForward ? 'F'
                        : x.kind == PassKind::kWeight ? 'W'
                        : (split && !x.full)          ? 'I'
                                                      : 'B';
      if (x.kind == PassKind::kForward && x.paired && plan.overlaps_pairs() && i + 1 < order.size() &&
          order[i + 1].paired && order[i + 1].kind == PassKind::kBackward) {
        cells.push_back(fmt::format("({};{})OVERLAP_F_B", name(x, 'F'), name(order[i + 1], 'B')));
        ++i;
        continue;
      }
      cells.push_back(name(x, type));
    }
    out += fmt::format("{}\n", fmt::join(cells, ","));
  }
  return out;
}

CustomSchedule read_schedule_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(Where{path, 0, ""}, "cannot open the schedule file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_schedule_csv(text.str(), path);
}

}  // namespace orrery::train
