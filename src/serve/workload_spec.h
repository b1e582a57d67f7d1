// Synthetic workloads from a one-line spec (the CLI's --workload).
//
// Grammar (items separated by ',' ; whitespace ignored):
//   SPEC  := "default" | ITEM ("," ITEM)*
//   ITEM  := "rate=" R                      mean arrival rate, requests/s (the CLI's --rate overrides it)
//          | "arrivals=poisson" | "arrivals=gamma:" CV
//          | "prompt=" DIST | "output=" DIST  one request type
//          | "type=" WEIGHT "/" DIST "/" DIST  one type of a mix (repeatable; weight > 0)
//   DIST  := N | "uniform:" LO ":" HI | "lognormal:" MU ":" SIGMA [":" MIN ":" MAX] | "zipf:" N ":" S
// Examples: "prompt=512,output=20" (the WAIT paper's one type; Poisson at --rate);
//           "type=0.7/512/20,type=0.3/512/50"; "arrivals=gamma:2,prompt=lognormal:6.6:1,output=uniform:10:300".
// "default" is serve::default_workload (fitted to the Azure conversation trace).
// Errors are InputError naming the item and what was expected, with the nearest key.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/workload.h"

namespace orrery::serve {

struct WorkloadSpec {
  bool is_default = false;
  std::optional<double> rate;  // requests/s
  bool gamma = false;
  double cv = 1.0;
  std::vector<RequestType> types;
};

WorkloadSpec parse_workload_spec(std::string_view text, const Where& where = {});

// The request stream of `spec` at `rate` (requests/s; for "default", the Azure rate x rate /
// kAzureConvRate). REQUIRES (InputError): a rate from the spec or the argument, > 0.
std::unique_ptr<RequestSource> make_workload(const WorkloadSpec& spec, std::optional<double> rate, uint64_t seed,
                                             int64_t max_requests, const Where& where = {});

}  // namespace orrery::serve
