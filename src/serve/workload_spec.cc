#include "serve/workload_spec.h"

#include <cmath>
#include <cstdlib>

#include "core/strings.h"

namespace orrery::serve {

namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  return out;
}

double number(std::string_view text, const Where& w, std::string_view what) {
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) {
    throw InputError(w, "expected a number for " + std::string(what) + ", got '" + s + "'");
  }
  return v;
}

int64_t integer(std::string_view text, const Where& w, std::string_view what) {
  const double v = number(text, w, what);
  if (v != std::floor(v) || std::abs(v) > 9e15) {
    throw InputError(w, "expected an integer for " + std::string(what) + ", got '" + std::string(text) + "'");
  }
  return static_cast<int64_t>(v);
}

LengthDistribution dist(std::string_view text, const Where& w) {
  const std::vector<std::string_view> p = split(text, ':');
  const std::string_view kind = p[0];
  if (p.size() == 1) {
    return LengthDistribution::fixed(integer(kind, w, "a token count"), w);
  }
  auto need = [&](size_t lo, size_t hi, const char* form) {
    if (p.size() < lo || p.size() > hi) throw InputError(w, "expected " + std::string(form) + ", got '" + std::string(text) + "'");
  };
  if (kind == "uniform") {
    need(3, 3, "uniform:LO:HI");
    return LengthDistribution::uniform(integer(p[1], w, "LO"), integer(p[2], w, "HI"), w);
  }
  if (kind == "lognormal") {
    need(3, 5, "lognormal:MU:SIGMA[:MIN:MAX]");
    if (p.size() == 4) throw InputError(w, "lognormal takes both MIN and MAX, or neither");
    if (p.size() == 5) {
      return LengthDistribution::lognormal(number(p[1], w, "MU"), number(p[2], w, "SIGMA"), integer(p[3], w, "MIN"),
                                           integer(p[4], w, "MAX"), w);
    }
    return LengthDistribution::lognormal(number(p[1], w, "MU"), number(p[2], w, "SIGMA"), 1,
                                         LengthDistribution::kMaxTokens, w);
  }
  if (kind == "zipf") {
    need(3, 3, "zipf:N:S");
    return LengthDistribution::zipf(integer(p[1], w, "N"), number(p[2], w, "S"), w);
  }
  throw InputError(w, "unknown length distribution '" + std::string(kind) + "'",
                   suggest(kind, {"uniform", "lognormal", "zipf"}) + " (or a fixed token count)");
}

}  // namespace

WorkloadSpec parse_workload_spec(std::string_view text, const Where& where) {
  WorkloadSpec spec;
  const std::string_view t = trim(text);
  if (t == "default" || t == "azure-conv") {
    spec.is_default = true;
    return spec;
  }
  if (t.empty()) throw InputError(where, "empty workload spec", "e.g. 'prompt=512,output=20' or 'default'");
  std::optional<LengthDistribution> prompt, output;
  for (std::string_view item : split(t, ',')) {
    const size_t eq = item.find('=');
    const std::string key(trim(item.substr(0, eq)));
    const Where w = where.with_key(key);
    if (eq == std::string_view::npos) {
      throw InputError(where, "expected KEY=VALUE, got '" + std::string(item) + "'",
                       "keys: rate, arrivals, prompt, output, type");
    }
    const std::string_view value = trim(item.substr(eq + 1));
    if (key == "rate") {
      spec.rate = number(value, w, "the rate");
    } else if (key == "arrivals") {
      if (value == "poisson") {
        spec.gamma = false;
      } else if (value.substr(0, 6) == "gamma:") {
        spec.gamma = true;
        spec.cv = number(value.substr(6), w, "the gamma CV");
        if (!(spec.cv > 0.0)) throw InputError(w, "the gamma CV must be > 0");
      } else {
        throw InputError(w, "expected 'poisson' or 'gamma:CV', got '" + std::string(value) + "'");
      }
    } else if (key == "prompt") {
      prompt = dist(value, w);
    } else if (key == "output") {
      output = dist(value, w);
    } else if (key == "type") {
      const std::vector<std::string_view> p = split(value, '/');
      if (p.size() != 3) throw InputError(w, "expected WEIGHT/PROMPT/OUTPUT, got '" + std::string(value) + "'");
      const double weight = number(p[0], w, "the weight");
      if (!(weight > 0.0)) throw InputError(w, "the weight must be > 0");
      spec.types.push_back(RequestType{"type" + std::to_string(spec.types.size()), weight, dist(p[1], w), dist(p[2], w)});
    } else {
      throw InputError(w, "unknown workload key", suggest(key, {"rate", "arrivals", "prompt", "output", "type"}));
    }
  }
  if (prompt || output) {
    if (!prompt || !output) throw InputError(where, "a one-type workload needs both prompt= and output=");
    if (!spec.types.empty()) throw InputError(where, "use either prompt=/output= or type= items, not both");
    spec.types.push_back(RequestType{"type0", 1.0, *prompt, *output});
  }
  if (spec.types.empty()) throw InputError(where, "no request type", "add prompt=N,output=N or type=W/P/D items");
  return spec;
}

std::unique_ptr<RequestSource> make_workload(const WorkloadSpec& spec, std::optional<double> rate, uint64_t seed,
                                             int64_t max_requests, const Where& where) {
  if (rate && !(*rate > 0.0)) throw InputError(where.with_key("rate"), "must be > 0 requests/s");
  if (spec.is_default) {
    return default_workload(seed, max_requests, rate ? *rate / kAzureConvRate : 1.0);
  }
  const std::optional<double> r = rate ? rate : spec.rate;
  if (!r) throw InputError(where.with_key("rate"), "the workload needs an arrival rate", "pass --rate R (requests/s)");
  if (!(*r > 0.0)) throw InputError(where.with_key("rate"), "must be > 0 requests/s");
  std::unique_ptr<ArrivalProcess> arrivals;
  if (spec.gamma) {
    arrivals = std::make_unique<GammaArrivals>(*r, spec.cv, where);
  } else {
    arrivals = std::make_unique<PoissonArrivals>(*r, where);
  }
  return std::make_unique<SyntheticSource>(std::move(arrivals), spec.types, seed, max_requests);
}

}  // namespace orrery::serve
