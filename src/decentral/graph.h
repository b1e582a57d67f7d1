// Communication graphs for decentralized optimization: generators, time-varying sequences,
// connectivity checks and a topology-spec parser.
//
// Model card
//   What      Who may send to whom in one gossip round. A Graph is directed on nodes 0..n-1; an edge
//             j -> i means node j sends its value to node i. An undirected graph stores both directions.
//             Self-loops are not stored: every mixing rule (decentral/mixing.h) puts weight on the
//             diagonal itself, so "self-loops everywhere" is implied. Multi-edges collapse to one.
//   Families  ring, directed ring (optionally with chords), 2-D torus, 2-D grid, static exponential
//             (i -> i + 2^k mod n for every 2^k < n; Ying et al., NeurIPS 2021), one-peer exponential
//             (time-varying: at step t, i -> i + 2^(t mod tau), tau = ceil(log2 n); exact averaging
//             over one period when n is a power of two), hypercube (n = 2^d, i ~ i XOR 2^k),
//             Erdős–Rényi G(n, p) (undirected, seeded), random strongly connected digraph (a random
//             directed Hamiltonian cycle plus each other ordered pair with probability p, seeded), star
//             (hub 0), complete, and edge lists read from text (format in docs/decentral_graphs.md).
//   Time      A GraphSequence is periodic: graph_at(t) = graphs[t mod period]. Static graphs have
//             period 1. A sequence is "strongly connected" when the union of one period is (the
//             B-connectivity assumption of the time-varying literature with B = period).
//   Checks    Strong connectivity by forward and backward BFS from node 0 (O(n + m)); strongly
//             connected components by iterative Kosaraju; weak connectivity by BFS on the symmetrized
//             graph (this is "connected" for undirected graphs).
//   Random    Seeded generators draw from orrery::RandomStream::derive(seed, "decentral.graph.<family>"),
//             so a (spec, seed) pair always gives the same graph on every platform.
//   Range     Up to kMaxNodes nodes; generators allocate O(n + m).
//   Errors    Bad specs and edge lists throw orrery::InputError naming the key (or file:line), the
//             expected form and, for unknown names, the nearest valid one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace orrery::decentral {

using NodeIndex = int32_t;

struct Edge {
  NodeIndex from = 0;
  NodeIndex to = 0;
  friend bool operator==(const Edge&, const Edge&) = default;
};

constexpr NodeIndex kMaxNodes = NodeIndex{1} << 20;

// An immutable directed graph with sorted adjacency lists, no self-loops and no duplicate edges.
class Graph {
 public:
  Graph() = default;
  // REQUIRES: 0 <= n <= kMaxNodes and every endpoint in [0, n) (checked; callers validate user input
  // first). Self-loops are dropped and duplicates collapsed.
  Graph(NodeIndex n, std::vector<Edge> edges, std::string name = {});

  NodeIndex num_nodes() const { return n_; }
  int64_t num_edges() const { return static_cast<int64_t>(edges_.size()); }  // directed edges
  const std::string& name() const { return name_; }
  // All edges sorted by (from, to).
  const std::vector<Edge>& edges() const { return edges_; }
  const std::vector<NodeIndex>& out_neighbors(NodeIndex v) const { return out_[static_cast<size_t>(v)]; }
  const std::vector<NodeIndex>& in_neighbors(NodeIndex v) const { return in_[static_cast<size_t>(v)]; }
  NodeIndex out_degree(NodeIndex v) const { return static_cast<NodeIndex>(out_neighbors(v).size()); }
  NodeIndex in_degree(NodeIndex v) const { return static_cast<NodeIndex>(in_neighbors(v).size()); }
  bool has_edge(NodeIndex from, NodeIndex to) const;
  // Every edge has its reverse (the graph is undirected).
  bool is_symmetric() const;
  // Every node has in-degree == out-degree.
  bool is_balanced() const;

 private:
  NodeIndex n_ = 0;
  std::string name_;
  std::vector<Edge> edges_;
  std::vector<std::vector<NodeIndex>> out_;
  std::vector<std::vector<NodeIndex>> in_;
};

// Connectivity. A graph with 0 or 1 node counts as connected.
bool is_strongly_connected(const Graph& g);
bool is_weakly_connected(const Graph& g);  // "connected" for undirected graphs
// Component id in [0, count) per node; ids follow Kosaraju's discovery order.
struct Components {
  std::vector<int32_t> id;
  int32_t count = 0;
};
Components strongly_connected_components(const Graph& g);

// A periodic sequence of graphs on the same node set; graph_at(t) = graphs[t mod period].
class GraphSequence {
 public:
  // A static graph (period 1).
  explicit GraphSequence(Graph g);
  // REQUIRES: graphs non-empty, all with the same number of nodes (checked).
  GraphSequence(std::vector<Graph> graphs, std::string name);

  int64_t period() const { return static_cast<int64_t>(graphs_.size()); }
  bool is_static() const { return graphs_.size() == 1; }
  NodeIndex num_nodes() const { return graphs_.front().num_nodes(); }
  const std::string& name() const { return name_; }
  // REQUIRES: t >= 0.
  const Graph& graph_at(int64_t t) const;
  const std::vector<Graph>& graphs() const { return graphs_; }
  // The union of the edges of one period.
  Graph union_graph() const;

 private:
  std::vector<Graph> graphs_;
  std::string name_;
};

// Generators. `where` names the caller's key for errors (n too small, p out of range...).
Graph ring(NodeIndex n, const Where& where = {});                 // undirected, n >= 2
Graph directed_ring(NodeIndex n, const Where& where = {});        // i -> i+1 mod n, n >= 2
// Directed ring plus the given extra edges ("chords"), e.g. {{0, 2}} for decentralized.md check 6.
Graph directed_ring_with_chords(NodeIndex n, const std::vector<Edge>& chords, const Where& where = {});
Graph torus(NodeIndex rows, NodeIndex cols, const Where& where = {});  // undirected, rows, cols >= 2
Graph grid(NodeIndex rows, NodeIndex cols, const Where& where = {});   // undirected, rows*cols >= 2
Graph static_exponential(NodeIndex n, const Where& where = {});   // directed, n >= 2
GraphSequence one_peer_exponential(NodeIndex n, const Where& where = {});  // n >= 2
Graph hypercube(NodeIndex n, const Where& where = {});            // n = 2^d >= 2
Graph erdos_renyi(NodeIndex n, double p, uint64_t seed, const Where& where = {});  // undirected
Graph random_strongly_connected(NodeIndex n, double p, uint64_t seed, const Where& where = {});
Graph star(NodeIndex n, const Where& where = {});                 // undirected, hub 0, n >= 2
Graph complete(NodeIndex n, const Where& where = {});             // undirected, n >= 2

// Edge lists (docs/decentral_graphs.md): "SRC DST" per line, '#' comments, optional "nodes N" and
// "undirected" directives. Errors name file:line and the offending token.
Graph parse_edge_list(std::string_view text, const std::string& file);
Graph read_edge_list(const std::string& path);

// Topology specs: "ring:8", "torus:4x4", "exponential:16", "one-peer-exponential:16",
// "erdos-renyi:32:0.2:seed=1", "directed-ring:5:chords=0-2", "file:PATH" (full list in
// docs/decentral_graphs.md). Errors carry `where` (e.g. the flag "--topology").
GraphSequence parse_topology(std::string_view spec, const Where& where);
// The family names parse_topology accepts (for help text and suggestions).
std::vector<std::string> topology_names();

}  // namespace orrery::decentral
