// Routers: which replica of a serving cluster takes a request.
//
// Model card
//   What      A request router in front of several replicas (serve/cluster.h). It sees, per replica,
//             the requests it holds (outstanding: queued, running, or having their KV transferred in)
//             and its KV blocks in use, and picks one. Routers are registered by name with a one-line
//             description and a citation (router_registry()); ties always go to the lowest index, so
//             routing is deterministic.
//   round-robin         replica k mod N for the k-th request (every request, rejected ones included).
//   least-outstanding   the fewest outstanding requests (the shortest queue of SGLang's router;
//                       Envoy's least-request balancer).
//   least-kv            the fewest KV blocks in use, then the fewest outstanding (llm-d's KV-cache
//                       utilization scorer).
//   prefix-aware        SGLang's cache-aware router (sgl-router, defaults cache_threshold 0.5,
//                       balance_abs_threshold 32, balance_rel_threshold 1.0001), over the requests'
//                       prefix hashes (Mooncake hash_ids) instead of its radix tree of characters:
//                         1. if the load is imbalanced, max - min outstanding > abs and
//                            max > rel x min, route to the least outstanding replica;
//                         2. else, with m_i = the number of leading prefix units of the request that
//                            the router has sent to replica i (its approximate tree, one LRU set of
//                            hashes per replica with room for the replica's KV capacity in units),
//                            if max_i m_i x unit tokens > cache_threshold x prompt tokens, route to
//                            the replica with the longest match (ties: least outstanding);
//                         3. else route to the least outstanding replica, ties by the smallest
//                            fraction of KV blocks in use. (SGLang routes to the smallest tree here;
//                            queued requests hold no KV, so KV use hides queues: on the Mooncake
//                            conversation trace least-kv had twice the TTFT p50 of least-outstanding,
//                            docs/serving.md.)
//                       The routed replica's set then holds the request's hashes (most recently used).
//             Preble (Srivatsa et al., ICLR 2025) and llm-d's prefix-cache scorer follow the same idea.
//   Range     Any number of replicas; the prefix router needs prefix hashes in the requests, otherwise
//             it is least-outstanding (step 3).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "serve/workload.h"

namespace orrery::serve {

// What a router sees of one replica.
struct ReplicaLoad {
  int64_t outstanding = 0;   // requests held: queued, running, or with KV in flight to it
  int64_t used_blocks = 0;   // KV blocks in use (cached prefixes nobody references excluded)
  int64_t total_blocks = 0;
};

class Router {
 public:
  virtual ~Router() = default;
  // The index in `replicas` of the replica for `request`; called once per routed request (a router
  // may learn from it). REQUIRES: replicas non-empty and of the size given at construction.
  virtual size_t route(const Request& request, std::span<const ReplicaLoad> replicas) = 0;
};

struct RouterConfig {
  int64_t replicas = 1;
  // prefix-aware: tokens per prefix hash and each replica's KV capacity in prefix units (the size of
  // its approximate tree); SGLang's thresholds.
  int64_t prefix_unit_tokens = 512;
  std::vector<int64_t> capacity_units;  // per replica; empty: unbounded
  double cache_threshold = 0.5;
  int64_t balance_abs_threshold = 32;
  double balance_rel_threshold = 1.0001;
};

struct RouterInfo {
  std::string name;
  std::string description;
  std::string citation;
};
std::vector<RouterInfo> router_registry();
std::vector<std::string> router_names();
// InputError at `where` with the nearest name for an unknown router or an invalid config.
std::unique_ptr<Router> make_router(std::string_view name, const RouterConfig& config, const Where& where = {});

}  // namespace orrery::serve
