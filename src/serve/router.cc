#include "serve/router.h"

#include <algorithm>
#include <list>
#include <unordered_map>

#include "core/assert.h"
#include "core/strings.h"

namespace orrery::serve {

namespace {

// The lowest index minimising key(i).
template <class Key>
size_t argmin(size_t n, Key&& key) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i) {
    if (key(i) < key(best)) best = i;
  }
  return best;
}

size_t least_outstanding(std::span<const ReplicaLoad> r) {
  return argmin(r.size(), [&](size_t i) { return r[i].outstanding; });
}

class RoundRobin final : public Router {
 public:
  size_t route(const Request& request, std::span<const ReplicaLoad> replicas) override {
    (void)request;
    const size_t i = next_ % replicas.size();
    ++next_;
    return i;
  }

 private:
  size_t next_ = 0;
};

class LeastOutstanding final : public Router {
 public:
  size_t route(const Request& request, std::span<const ReplicaLoad> replicas) override {
    (void)request;
    return least_outstanding(replicas);
  }
};

// Fewest used blocks as a fraction of the replica's blocks (cross-multiplied: exact for block counts
// below 2^31), then fewest outstanding.
size_t least_kv(std::span<const ReplicaLoad> r) {
  size_t best = 0;
  for (size_t i = 1; i < r.size(); ++i) {
    const int64_t lhs = r[i].used_blocks * r[best].total_blocks;
    const int64_t rhs = r[best].used_blocks * r[i].total_blocks;
    if (lhs < rhs || (lhs == rhs && r[i].outstanding < r[best].outstanding)) best = i;
  }
  return best;
}

// Fewest outstanding, then the smallest fraction of blocks in use.
size_t least_outstanding_then_kv(std::span<const ReplicaLoad> r) {
  size_t best = 0;
  for (size_t i = 1; i < r.size(); ++i) {
    if (r[i].outstanding != r[best].outstanding) {
      if (r[i].outstanding < r[best].outstanding) best = i;
      continue;
    }
    if (r[i].used_blocks * r[best].total_blocks < r[best].used_blocks * r[i].total_blocks) best = i;
  }
  return best;
}

class LeastKv final : public Router {
 public:
  size_t route(const Request& request, std::span<const ReplicaLoad> replicas) override {
    (void)request;
    return least_kv(replicas);
  }
};

// One replica's approximate prefix tree: the prefix hashes routed to it, least recently used first,
// at most `capacity` of them.
class PrefixSet {
 public:
  explicit PrefixSet(int64_t capacity) : capacity_(capacity) {}
  bool contains(uint64_t h) const { return pos_.count(h) != 0; }
  void touch(uint64_t h) {
    auto it = pos_.find(h);
    if (it != pos_.end()) {
      order_.splice(order_.end(), order_, it->second);
      return;
    }
    pos_.emplace(h, order_.insert(order_.end(), h));
    if (capacity_ > 0 && static_cast<int64_t>(order_.size()) > capacity_) {
      pos_.erase(order_.front());
      order_.pop_front();
    }
  }

 private:
  int64_t capacity_;
  std::list<uint64_t> order_;
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> pos_;
};

class PrefixAware final : public Router {
 public:
  explicit PrefixAware(const RouterConfig& c) : config_(c) {
    for (int64_t i = 0; i < c.replicas; ++i) {
      sets_.emplace_back(c.capacity_units.empty() ? 0 : c.capacity_units[static_cast<size_t>(i)]);
    }
  }

  size_t route(const Request& request, std::span<const ReplicaLoad> replicas) override {
    ORRERY_CHECK(replicas.size() == sets_.size());
    const size_t pick = choose(request, replicas);
    // Only the units the request fills completely are cached (Replica::register_prefix).
    const size_t units = std::min(request.prefix_blocks.size(),
                                  static_cast<size_t>(request.prompt_tokens / config_.prefix_unit_tokens));
    for (size_t k = 0; k < units; ++k) sets_[pick].touch(request.prefix_blocks[k]);
    return pick;
  }

 private:
  size_t choose(const Request& request, std::span<const ReplicaLoad> r) {
    int64_t lo = r[0].outstanding, hi = r[0].outstanding;
    for (const ReplicaLoad& x : r) {
      lo = std::min(lo, x.outstanding);
      hi = std::max(hi, x.outstanding);
    }
    if (hi - lo > config_.balance_abs_threshold &&
        static_cast<double>(hi) > config_.balance_rel_threshold * static_cast<double>(lo)) {
      return least_outstanding(r);
    }
    matches_.assign(r.size(), 0);
    int64_t best_match = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      int64_t m = 0;
      for (uint64_t h : request.prefix_blocks) {
        if (!sets_[i].contains(h)) break;
        ++m;
      }
      matches_[i] = m;
      best_match = std::max(best_match, m);
    }
    const double matched_tokens = static_cast<double>(best_match * config_.prefix_unit_tokens);
    if (best_match > 0 && matched_tokens > config_.cache_threshold * static_cast<double>(request.prompt_tokens)) {
      size_t best = r.size();
      for (size_t i = 0; i < r.size(); ++i) {
        if (matches_[i] != best_match) continue;
        if (best == r.size() || r[i].outstanding < r[best].outstanding) best = i;
      }
      return best;
    }
    return least_outstanding_then_kv(r);
  }

  RouterConfig config_;
  std::vector<PrefixSet> sets_;
  std::vector<int64_t> matches_;
};

}  // namespace

std::vector<RouterInfo> router_registry() {
  return {
      {"round-robin", "replicas in turn, whatever their load",
       "vLLM production stack RoundRobinRouter; vllm-router / SGLang gateway round_robin"},
      {"least-outstanding", "the replica holding the fewest requests (queued, running or arriving)",
       "SGLang router shortest-queue fallback; Envoy LEAST_REQUEST"},
      {"least-kv", "the replica with the smallest fraction of its KV blocks in use",
       "llm-d inference scheduler, KV-cache utilization scorer"},
      {"prefix-aware",
       "longest cached prefix of the request's prefix hashes above half the prompt, else least outstanding",
       "SGLang cache-aware router (sgl-router); Srivatsa et al., Preble, ICLR 2025"},
  };
}

std::vector<std::string> router_names() {
  std::vector<std::string> names;
  for (const RouterInfo& i : router_registry()) names.push_back(i.name);
  return names;
}

std::unique_ptr<Router> make_router(std::string_view name, const RouterConfig& config, const Where& where) {
  if (config.replicas < 1) throw InputError(where.with_key("replicas"), "must be >= 1");
  if (config.prefix_unit_tokens < 1) throw InputError(where.with_key("prefix-unit-tokens"), "must be >= 1");
  if (!config.capacity_units.empty() && static_cast<int64_t>(config.capacity_units.size()) != config.replicas) {
    throw InputError(where, "one prefix capacity per replica expected");
  }
  if (!(config.cache_threshold >= 0.0 && config.cache_threshold <= 1.0)) {
    throw InputError(where.with_key("cache-threshold"), "must be in [0, 1]");
  }
  if (config.balance_abs_threshold < 0 || !(config.balance_rel_threshold >= 1.0)) {
    throw InputError(where.with_key("balance-threshold"), "absolute must be >= 0 and relative >= 1");
  }
  if (name == "round-robin") return std::make_unique<RoundRobin>();
  if (name == "least-outstanding") return std::make_unique<LeastOutstanding>();
  if (name == "least-kv") return std::make_unique<LeastKv>();
  if (name == "prefix-aware") return std::make_unique<PrefixAware>(config);
  throw InputError(where, "unknown router '" + std::string(name) + "'", suggest(name, router_names()));
}

}  // namespace orrery::serve
