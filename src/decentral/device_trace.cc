#include "decentral/device_trace.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include <fmt/format.h>

#include "core/random.h"
#include "core/strings.h"

namespace orrery::decentral {

namespace {

const std::vector<std::string> kColumns = {"device_id", "compute_ms_per_sample", "bandwidth_kbps", "up_kbps",
                                           "down_kbps",  "availability",          "period_s"};

std::vector<std::string_view> split_on(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (true) {
    const size_t next = s.find(sep, pos);
    out.push_back(trim(s.substr(pos, next == std::string_view::npos ? std::string_view::npos : next - pos)));
    if (next == std::string_view::npos) break;
    pos = next + 1;
  }
  return out;
}

double number(std::string_view tok, const Where& where, const char* what) {
  const std::string s(tok);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) {
    throw InputError(where, fmt::format("expected {}, got '{}'", what, s));
  }
  return v;
}

double positive(std::string_view tok, const Where& where, const char* what) {
  const double v = number(tok, where, what);
  if (!(v > 0)) throw InputError(where, fmt::format("expected {}, got '{}'", what, tok));
  return v;
}

std::vector<std::pair<double, double>> parse_intervals(std::string_view text, const Where& where) {
  std::vector<std::pair<double, double>> out;
  if (text.empty() || to_lower(text) == "always") return out;
  for (std::string_view part : split_on(text, ';')) {
    const size_t dash = part.find('-');
    if (dash == std::string_view::npos || dash == 0) {
      throw InputError(where, fmt::format("expected an interval START-END in seconds, got '{}'", part),
                       "e.g. 0-3600;7200-9000, or 'always'");
    }
    const double a = number(trim(part.substr(0, dash)), where, "an interval start in seconds");
    const double b = number(trim(part.substr(dash + 1)), where, "an interval end in seconds");
    if (!(a >= 0 && a < b)) throw InputError(where, fmt::format("interval '{}' needs 0 <= START < END", part));
    if (!out.empty() && a < out.back().second) {
      throw InputError(where, fmt::format("interval '{}' starts before the previous one ends ({}); intervals must "
                                          "be sorted and disjoint",
                                          part, out.back().second));
    }
    out.emplace_back(a, b);
  }
  return out;
}

}  // namespace

bool DeviceTrace::has_availability() const {
  for (const DeviceProfile& d : devices) {
    if (!d.availability.empty()) return true;
  }
  return false;
}

DeviceTrace parse_device_trace(std::string_view text, const std::string& file) {
  DeviceTrace trace;
  trace.file = file;
  std::vector<int> col;  // column index -> kColumns index
  std::unordered_set<std::string> ids;
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view line = trim(text.substr(pos, eol - pos));
    pos = eol + 1;
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    const std::vector<std::string_view> cells = split_on(line, ',');
    const Where where{file, line_no, ""};
    if (col.empty()) {
      for (std::string_view c : cells) {
        const std::string name = to_lower(c);
        int found = -1;
        for (size_t k = 0; k < kColumns.size(); ++k) {
          if (kColumns[k] == name) found = static_cast<int>(k);
        }
        if (found < 0) throw InputError(where, fmt::format("unknown column '{}'", name), suggest(name, kColumns));
        for (int prev : col) {
          if (prev == found) throw InputError(where, fmt::format("column '{}' appears twice", name));
        }
        col.push_back(found);
      }
      const auto has = [&](const char* name) {
        for (int c : col) {
          if (kColumns[static_cast<size_t>(c)] == name) return true;
        }
        return false;
      };
      if (!has("device_id") || !has("compute_ms_per_sample")) {
        throw InputError(where, "the header needs the columns device_id and compute_ms_per_sample",
                         "e.g. device_id,compute_ms_per_sample,bandwidth_kbps,availability");
      }
      const bool up = has("up_kbps");
      const bool down = has("down_kbps");
      if (has("bandwidth_kbps") ? (up || down) : !(up && down)) {
        throw InputError(where, "the header needs either bandwidth_kbps or both up_kbps and down_kbps");
      }
      continue;
    }
    if (cells.size() != col.size()) {
      throw InputError(where, fmt::format("expected {} fields as in the header, got {}", col.size(), cells.size()));
    }
    DeviceProfile d;
    d.line = line_no;
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string& name = kColumns[static_cast<size_t>(col[c])];
      const Where w = where.with_key(name);
      const std::string_view v = cells[c];
      if (name == "device_id") {
        if (v.empty()) throw InputError(w, "expected a device id");
        d.id = std::string(v);
      } else if (name == "compute_ms_per_sample") {
        d.compute_ms_per_sample = positive(v, w, "a compute time per sample > 0 in ms");
      } else if (name == "bandwidth_kbps") {
        d.up_kbps = d.down_kbps = positive(v, w, "a bandwidth > 0 in kbps");
      } else if (name == "up_kbps") {
        d.up_kbps = positive(v, w, "an uplink bandwidth > 0 in kbps");
      } else if (name == "down_kbps") {
        d.down_kbps = positive(v, w, "a downlink bandwidth > 0 in kbps");
      } else if (name == "availability") {
        d.availability = parse_intervals(v, w);
      } else if (name == "period_s") {
        if (!v.empty()) d.period_s = positive(v, w, "a repetition period > 0 in seconds");
      }
    }
    if (d.period_s > 0 && !d.availability.empty() && d.availability.back().second > d.period_s) {
      throw InputError(where.with_key("period_s"),
                       fmt::format("the availability intervals end at {} s, after the period {} s",
                                   d.availability.back().second, d.period_s));
    }
    if (!ids.insert(d.id).second) throw InputError(where.with_key("device_id"), fmt::format("duplicate device id '{}'", d.id));
    trace.devices.push_back(std::move(d));
  }
  if (col.empty()) throw InputError(Where{file, 0, ""}, "empty device trace: expected a header line and device rows");
  if (trace.devices.empty()) throw InputError(Where{file, line_no, ""}, "the device trace has a header but no devices");
  return trace;
}

DeviceTrace read_device_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(Where{path, 0, ""}, "cannot open the device-trace file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_device_trace(ss.str(), path);
}

std::string format_device_trace(const DeviceTrace& trace) {
  bool symmetric = true;
  bool periodic = false;
  for (const DeviceProfile& d : trace.devices) {
    symmetric = symmetric && d.up_kbps == d.down_kbps;
    periodic = periodic || d.period_s > 0;
  }
  std::string out = "# orrery device trace: FedScale-style client profiles (docs/decentral_algorithms.md)\n";
  out += symmetric ? "device_id,compute_ms_per_sample,bandwidth_kbps,availability" : "device_id,compute_ms_per_sample,up_kbps,down_kbps,availability";
  out += periodic ? ",period_s\n" : "\n";
  for (const DeviceProfile& d : trace.devices) {
    out += fmt::format("{},{:.17g}", d.id, d.compute_ms_per_sample);
    out += symmetric ? fmt::format(",{:.17g}", d.up_kbps) : fmt::format(",{:.17g},{:.17g}", d.up_kbps, d.down_kbps);
    out += ",";
    if (d.availability.empty()) out += "always";
    for (size_t k = 0; k < d.availability.size(); ++k) {
      out += fmt::format("{}{:.17g}-{:.17g}", k ? ";" : "", d.availability[k].first, d.availability[k].second);
    }
    if (periodic) out += d.period_s > 0 ? fmt::format(",{:.17g}", d.period_s) : ",";
    out += "\n";
  }
  return out;
}

DeviceTrace synthetic_device_trace(const SyntheticDeviceSpec& spec, const Where& where) {
  if (spec.devices < 1 || spec.devices > kMaxNodes) {
    throw InputError(where.with_key("devices"), fmt::format("expected 1..{}, got {}", kMaxNodes, spec.devices));
  }
  if (!(spec.horizon_s > 0) || !std::isfinite(spec.horizon_s) || spec.horizon_s > 1e6) {
    throw InputError(where.with_key("horizon"), "expected a horizon in (0, 1e6] seconds");
  }
  DeviceTrace t;
  t.file = "<synthetic>";
  // FedScale's lognormal mode: training seconds per sample = 0.005 * LogNormal(1, 0.6); stored as an
  // inference latency in ms (a third of the training time).
  const LogNormal speed(1.0, 0.6);
  // 20 Mbit/s mean, 10 Mbit/s standard deviation: cv 0.5.
  const LogNormal bandwidth = LogNormal::from_mean_cv(20'000.0, 0.5);
  const RandomStream cs = RandomStream::derive(spec.seed, "decentral.device_trace.compute");
  const RandomStream bs = RandomStream::derive(spec.seed, "decentral.device_trace.bandwidth");
  const RandomStream as = RandomStream::derive(spec.seed, "decentral.device_trace.availability");
  for (int64_t i = 0; i < spec.devices; ++i) {
    DeviceProfile d;
    d.id = fmt::format("device-{}", i);
    const std::string name = std::to_string(i);
    RandomStream rc = cs.child(name);
    RandomStream rb = bs.child(name);
    d.compute_ms_per_sample = 5.0 * speed.sample(rc) / 3.0;
    d.up_kbps = d.down_kbps = bandwidth.sample(rb);
    if (spec.churn.enabled()) {
      const Availability a(spec.churn, as.child(name));
      double t0 = a.next_available(0.0);
      while (t0 < spec.horizon_s) {
        const double end = std::min(a.available_until(t0), spec.horizon_s);
        d.availability.emplace_back(t0, end);
        if (end >= spec.horizon_s) break;
        t0 = a.next_available(end);
      }
      d.period_s = spec.horizon_s;
      // Unavailable over the whole horizon (rare unless the horizon is short against the periods): an empty
      // list would read as "always", so keep the last instant of the horizon.
      if (d.availability.empty()) d.availability.emplace_back(spec.horizon_s * (1 - 1e-9), spec.horizon_s);
    }
    t.devices.push_back(std::move(d));
  }
  return t;
}

}  // namespace orrery::decentral
