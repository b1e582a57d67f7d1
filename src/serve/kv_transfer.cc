#include "serve/kv_transfer.h"

#include <algorithm>
#include <map>

#include "coll/nccl_model.h"
#include "core/assert.h"

namespace orrery::serve {

Bytes kv_transfer_bytes(const model::ModelSpec& m, hw::DType dtype, int64_t tokens) {
  return m.kv_cache_bytes_per_token(hw::dtype_bytes(dtype)) * tokens;
}

NodeLink NodeLink::from_catalog(const hw::GpuSpec& gpu, const hw::NodeSpec* node) {
  NodeLink l;
  l.gpu = gpu.name;
  const Bandwidth pcie = gpu.pcie.bandwidth_per_direction;
  l.scaleup_per_gpu = gpu.scaleup ? gpu.scaleup->bandwidth_per_direction * coll::nccl_nvlink_efficiency(gpu.architecture)
                                   : pcie * kKvPcieEfficiency;
  if (node != nullptr && node->gpus_per_node > 0) {
    // Replicas in one NVLink domain (a machine, or a GB200 NVL72 rack of trays) move KV over NVLink.
    l.gpus_per_node = node->scaleup_domain_gpus > 0 ? node->scaleup_domain_gpus : node->gpus_per_node;
    if (node->nics.count > 0) {
      l.network_per_gpu = node->nics.bandwidth *
                          (static_cast<double>(node->nics.count) / static_cast<double>(node->gpus_per_node)) *
                          kKvNetworkEfficiency;
    } else {
      l.network_per_gpu = pcie * kKvPcieEfficiency;
    }
  } else {
    l.gpus_per_node = 1;
    l.network_per_gpu = pcie * kKvPcieEfficiency;
  }
  return l;
}

std::string_view to_string(Placement p) { return p == Placement::kPacked ? "packed" : "interleaved"; }

std::vector<ReplicaPlace> place_replicas(const std::vector<int64_t>& gpus, const std::vector<const NodeLink*>& links) {
  ORRERY_CHECK(gpus.size() == links.size());
  std::vector<ReplicaPlace> out(gpus.size());
  std::map<std::string, std::pair<int64_t, int64_t>> open;  // GPU type -> (node, GPUs used)
  int64_t next_node = 0;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const int64_t per_node = std::max<int64_t>(1, links[i]->gpus_per_node);
    const int64_t g = gpus[i];
    if (g > per_node) {
      out[i] = {next_node, true};
      next_node += (g + per_node - 1) / per_node;
      open.erase(links[i]->gpu);
      continue;
    }
    auto it = open.find(links[i]->gpu);
    if (it == open.end() || it->second.second + g > per_node) {
      it = open.insert_or_assign(links[i]->gpu, std::pair<int64_t, int64_t>{next_node++, 0}).first;
    }
    out[i] = {it->second.first, false};
    it->second.second += g;
  }
  return out;
}

KvNetwork::KvNetwork(des::Engine& engine, std::vector<Endpoint> endpoints) : endpoints_(std::move(endpoints)) {
  std::vector<Bandwidth> caps;
  for (const Endpoint& e : endpoints_) {
    ORRERY_CHECK(e.link != nullptr && e.gpus >= 1);
    const net::LinkId base = static_cast<net::LinkId>(caps.size());
    const double g = static_cast<double>(e.gpus);
    caps.push_back(e.link->scaleup_per_gpu * g);
    caps.push_back(e.link->scaleup_per_gpu * g);
    caps.push_back(e.link->network_per_gpu * g);
    caps.push_back(e.link->network_per_gpu * g);
    links_.push_back(Links{base, base + 1, base + 2, base + 3});
  }
  network_ = std::make_unique<net::FlowNetwork>(engine, caps);
}

bool KvNetwork::co_located(int32_t from, int32_t to) const {
  const ReplicaPlace& a = endpoints_[static_cast<size_t>(from)].place;
  const ReplicaPlace& b = endpoints_[static_cast<size_t>(to)].place;
  return !a.spans_nodes && !b.spans_nodes && a.node == b.node;
}

Bandwidth KvNetwork::bandwidth(int32_t replica, bool scaleup) const {
  const Endpoint& e = endpoints_[static_cast<size_t>(replica)];
  return (scaleup ? e.link->scaleup_per_gpu : e.link->network_per_gpu) * static_cast<double>(e.gpus);
}

Time KvNetwork::lone_time(int32_t from, int32_t to, Bytes bytes) const {
  const bool up = co_located(from, to);
  const Bandwidth b = std::min(bandwidth(from, up), bandwidth(to, up));
  const NodeLink& l = *endpoints_[static_cast<size_t>(from)].link;
  return (up ? l.scaleup_latency : l.network_latency) + bytes / b;
}

void KvNetwork::start(int32_t from, int32_t to, Bytes bytes, net::FlowListener* listener, uint64_t tag) {
  const bool up = co_located(from, to);
  const Links& a = links_[static_cast<size_t>(from)];
  const Links& b = links_[static_cast<size_t>(to)];
  const net::LinkUse path[2] = {{up ? a.up_out : a.net_out, 1}, {up ? b.up_in : b.net_in, 1}};
  const NodeLink& l = *endpoints_[static_cast<size_t>(from)].link;
  network_->start_flow(path, up ? l.scaleup_latency : l.network_latency, bytes, listener, tag);
}

}  // namespace orrery::serve
