// KV-cache transfers between the prefill and decode replicas of a disaggregated serving cluster.
//
// Model card
//   What      When a prefill replica has produced a request's first token, the KV cache of its prompt
//             moves to the decode replica as one flow of the flow-level network (net/flow_network.h:
//             max-min fair rates, so concurrent transfers out of or into one replica share its links).
//   Bytes     S = tokens x ModelSpec::kv_cache_bytes_per_token(dtype): layers x 2 (K and V) x kv_heads x
//             head_dim x dtype bytes per token (MLA: layers x (kv_lora_rank + rope dim) x dtype bytes).
//             The model's unique KV: each TP rank sends its shard; heads replicated over TP > kv_heads
//             are sent once.
//   Links     Each replica has an egress and an ingress link on each fabric, of capacity (GPUs of the
//             replica, TP x PP) x (per-GPU bandwidth):
//               scale-up  (both replicas in one NVLink domain: a node, or a GB200 NVL72 rack) the GPU's
//                         NVLink bandwidth per direction x NCCL's per-link share for its generation
//                         (coll::nccl_nvlink_efficiency: 20 of 25 GB/s per NVLink 3 link, 20.6 of 25
//                         on Hopper, 40.1 of 50 on Blackwell; topo.h); GPUs without NVLink: PCIe per
//                         direction x 0.75
//               scale-out the node's NIC bandwidth per GPU (NICs x NIC bandwidth / GPUs per node) x
//                         4096/4122 (InfiniBand payload per 4 KiB MTU packet)
//             A transfer crosses the sender's egress and the receiver's ingress link. Alone it takes
//               T = a + S / min(B_out(prefill), B_in(decode)),
//             the alpha-beta send/recv cost (coll/alpha_beta.h, "send/recv a + S/B").
//   Latency   a = NCCL's base latency of a Simple-protocol operation (6.8 us) + one hop: 0.47 us on
//             NVLink or 2.7 us on the network (NCCL src/graph/tuning.cc baseLat / hwLat; the figures
//             train/comm_model.h uses).
//   Placement Replicas take GPUs in order (prefill pool then decode pool, or alternating with
//             kInterleaved); a replica that does not fit in the rest of its node starts a new node, one
//             larger than a node spans whole nodes and is never co-located; pools of different GPU
//             types never share a node.
//   Assumptions  The transfer starts once the first token exists and the decode replica has reserved
//             blocks for the prompt (DistServe; Splitwise streams the KV layer by layer during the
//             prefill, which hides most of T). The fabric beyond the replicas' own links is
//             non-blocking.
//   Sources   Zhong et al., "DistServe", OSDI 2024; Patel et al., "Splitwise", ISCA 2024.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/stats.h"
#include "core/units.h"
#include "des/engine.h"
#include "hw/hw_catalog.h"
#include "model/model_spec.h"
#include "net/flow_network.h"

namespace orrery::serve {

inline constexpr double kKvPcieEfficiency = 0.75;              // as train/comm_model.h for PCIe-only GPUs
inline constexpr double kKvNetworkEfficiency = 4096.0 / 4122.0;  // InfiniBand 4 KiB MTU payload share
inline constexpr Time kKvLaunchLatency = Time::ns(6800);       // NCCL baseLat, Simple protocol
inline constexpr Time kKvScaleupHopLatency = Time::ns(470);    // NCCL hwLat, NVLink
inline constexpr Time kKvNetworkHopLatency = Time::ns(2700);   // NCCL hwLat, network

// KV bytes of `tokens` tokens of the whole model (all layers, all KV heads).
Bytes kv_transfer_bytes(const model::ModelSpec& m, hw::DType dtype, int64_t tokens);

// Where a pool's GPUs sit and how fast one GPU reaches another (effective payload bandwidths).
struct NodeLink {
  std::string gpu;                // GPU type: pools of different types never share a node
  int64_t gpus_per_node = 8;      // GPUs that share one NVLink domain (NVL72: the rack's 72)
  Bandwidth scaleup_per_gpu;      // per direction, efficiency applied
  Bandwidth network_per_gpu;      // per direction, efficiency applied
  Time scaleup_latency = kKvLaunchLatency + kKvScaleupHopLatency;
  Time network_latency = kKvLaunchLatency + kKvNetworkHopLatency;

  // From the catalog: `node` (a machine holding `gpu`) gives the GPUs per node and the NICs; without
  // a node the GPU sits alone (scale-out at its PCIe rate).
  static NodeLink from_catalog(const hw::GpuSpec& gpu, const hw::NodeSpec* node);
};

enum class Placement { kPacked, kInterleaved };
std::string_view to_string(Placement p);

// One replica's place: its first node and whether it spans more than one.
struct ReplicaPlace {
  int64_t node = 0;
  bool spans_nodes = false;
};

// Places replicas of `gpus[i]` GPUs each (in the given order) on nodes of link[i].gpus_per_node GPUs,
// one open node per GPU type.
std::vector<ReplicaPlace> place_replicas(const std::vector<int64_t>& gpus, const std::vector<const NodeLink*>& links);

// Statistics of the transfers of a run.
struct TransferStats {
  int64_t count = 0;
  int64_t intra_node = 0;  // over NVLink (co-located replicas)
  Bytes bytes;
  Summary time;  // seconds, from start to last byte
  Summary wait;  // seconds the finished prefill waited for decode-side KV blocks before the transfer
};

// The network the transfers share: per replica an egress and an ingress link on each fabric.
class KvNetwork {
 public:
  // replicas[i]: its GPU count, link parameters and place.
  struct Endpoint {
    int64_t gpus = 1;
    const NodeLink* link = nullptr;
    ReplicaPlace place;
  };
  KvNetwork(des::Engine& engine, std::vector<Endpoint> endpoints);

  bool co_located(int32_t from, int32_t to) const;
  // The time a lone transfer of `bytes` from replica `from` to `to` takes (a + S / B).
  Time lone_time(int32_t from, int32_t to, Bytes bytes) const;
  // Starts a transfer now; `listener->on_flow_done(tag, t)` when its last byte arrives.
  void start(int32_t from, int32_t to, Bytes bytes, net::FlowListener* listener, uint64_t tag);

 private:
  struct Links {
    net::LinkId up_out, up_in, net_out, net_in;
  };
  Bandwidth bandwidth(int32_t replica, bool scaleup) const;

  std::vector<Endpoint> endpoints_;
  std::vector<Links> links_;
  std::unique_ptr<net::FlowNetwork> network_;
};

}  // namespace orrery::serve
