#include "decentral/graph.h"

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>

namespace orrery::decentral {
namespace {

const Where kKey{"<test>", 0, "--topology"};

// Undirected simple graph with n nodes and m undirected edges stores 2m directed edges.
TEST(Graph, RingOfEightIsUndirectedTwoRegularAndConnected) {
  const Graph g = ring(8);
  EXPECT_EQ(g.num_nodes(), 8);
  EXPECT_EQ(g.num_edges(), 16);  // 8 undirected edges, both directions
  EXPECT_TRUE(g.is_symmetric());
  for (NodeIndex v = 0; v < 8; ++v) {
    EXPECT_EQ(g.out_degree(v), 2);
    EXPECT_EQ(g.in_degree(v), 2);
  }
  EXPECT_TRUE(g.has_edge(7, 0));
  EXPECT_TRUE(g.has_edge(0, 7));
  EXPECT_FALSE(g.has_edge(0, 2));
  EXPECT_TRUE(is_strongly_connected(g));
  EXPECT_TRUE(is_weakly_connected(g));
}

TEST(Graph, RingOfTwoIsOneEdgeNotADoubleEdge) {
  // i -> i+1 mod 2 and i -> i-1 mod 2 are the same edge: duplicates collapse.
  const Graph g = ring(2);
  EXPECT_EQ(g.num_edges(), 2);
}

TEST(Graph, SelfLoopsAndDuplicatesAreDropped) {
  const Graph g(3, {{0, 0}, {0, 1}, {0, 1}, {1, 2}, {2, 0}}, "t");
  EXPECT_EQ(g.num_edges(), 3);
  EXPECT_FALSE(g.has_edge(0, 0));
  EXPECT_EQ(g.out_neighbors(0), std::vector<NodeIndex>({1}));
}

TEST(Graph, DirectedRingIsStronglyConnectedButRemovingOneEdgeBreaksIt) {
  const Graph g = directed_ring(6);
  EXPECT_EQ(g.num_edges(), 6);
  EXPECT_FALSE(g.is_symmetric());
  EXPECT_TRUE(g.is_balanced());
  EXPECT_TRUE(is_strongly_connected(g));
  // The directed path 0 -> 1 -> ... -> 5: weakly but not strongly connected, 6 singleton components.
  const Graph path(6, {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}});
  EXPECT_FALSE(is_strongly_connected(path));
  EXPECT_TRUE(is_weakly_connected(path));
  EXPECT_EQ(strongly_connected_components(path).count, 6);
}

TEST(Graph, ComponentsOfTwoDisjointCyclesAreTheCycles) {
  // 0->1->2->0 and 3->4->3, plus a one-way bridge 2->3: two components {0,1,2}, {3,4}.
  const Graph g(5, {{0, 1}, {1, 2}, {2, 0}, {3, 4}, {4, 3}, {2, 3}});
  const Components c = strongly_connected_components(g);
  EXPECT_EQ(c.count, 2);
  EXPECT_EQ(c.id[0], c.id[1]);
  EXPECT_EQ(c.id[1], c.id[2]);
  EXPECT_EQ(c.id[3], c.id[4]);
  EXPECT_NE(c.id[0], c.id[3]);
  EXPECT_FALSE(is_strongly_connected(g));
  EXPECT_TRUE(is_weakly_connected(g));
  const Graph apart(5, {{0, 1}, {1, 0}, {3, 4}, {4, 3}});
  EXPECT_FALSE(is_weakly_connected(apart));  // node 2 is isolated
}

TEST(Graph, DirectedRingWithChordMatchesTheFiveNodeValidationGraph) {
  // decentralized.md check 6: edges i -> i+1 mod 5 plus 0 -> 2. In-degree of node 2 is 2 (from 1 and 0).
  const Graph g = directed_ring_with_chords(5, {{0, 2}});
  EXPECT_EQ(g.num_edges(), 6);
  EXPECT_EQ(g.in_degree(2), 2);
  EXPECT_EQ(g.out_degree(0), 2);
  EXPECT_EQ(g.name(), "directed-ring:5:chords=0-2");
  EXPECT_THROW(directed_ring_with_chords(5, {{0, 5}}, kKey), InputError);
  EXPECT_THROW(directed_ring_with_chords(5, {{1, 1}}, kKey), InputError);
}

TEST(Graph, TorusNodesHaveFourNeighboursAndGridCornersTwo) {
  const Graph t = torus(4, 5);
  EXPECT_EQ(t.num_nodes(), 20);
  for (NodeIndex v = 0; v < 20; ++v) EXPECT_EQ(t.out_degree(v), 4);
  EXPECT_EQ(t.num_edges(), 2 * 2 * 20);  // 2n undirected edges on a torus (both factors >= 3)
  // Grid r x c: r(c-1) horizontal + c(r-1) vertical undirected edges = 4*4 + 5*3 = 31.
  const Graph g = grid(4, 5);
  EXPECT_EQ(g.num_edges(), 2 * 31);
  EXPECT_EQ(g.out_degree(0), 2);   // corner
  EXPECT_EQ(g.out_degree(1), 3);   // border
  EXPECT_EQ(g.out_degree(6), 4);   // interior (row 1, col 1)
  EXPECT_TRUE(is_weakly_connected(g));
  EXPECT_THROW(torus(1, 4, kKey), InputError);
}

TEST(Graph, StaticExponentialHasCeilLog2OutNeighboursAtPowerOfTwoHops) {
  // i -> i + 2^k mod n for 2^k < n: n = 16 gives hops 1, 2, 4, 8; n = 12 gives 1, 2, 4, 8 too.
  for (NodeIndex n : {16, 12}) {
    const Graph g = static_exponential(n);
    for (NodeIndex i = 0; i < n; ++i) {
      EXPECT_EQ(g.out_degree(i), 4);
      EXPECT_EQ(g.in_degree(i), 4);
      for (NodeIndex hop : {1, 2, 4, 8}) EXPECT_TRUE(g.has_edge(i, (i + hop) % n));
    }
    EXPECT_TRUE(is_strongly_connected(g));
  }
  // n = 16 has hop 8 = n/2 whose reverse is itself, but hop 1 has no reverse: directed.
  EXPECT_FALSE(static_exponential(16).is_symmetric());
}

TEST(Graph, OnePeerExponentialCyclesThroughHopsAndItsUnionIsTheStaticGraph) {
  const GraphSequence s = one_peer_exponential(16);
  EXPECT_EQ(s.period(), 4);  // log2 16
  EXPECT_FALSE(s.is_static());
  for (int64_t t = 0; t < 9; ++t) {
    const Graph& g = s.graph_at(t);
    const NodeIndex hop = NodeIndex{1} << (t % 4);
    for (NodeIndex i = 0; i < 16; ++i) {
      EXPECT_EQ(g.out_degree(i), 1);
      EXPECT_TRUE(g.has_edge(i, (i + hop) % 16)) << "t=" << t << " i=" << i;
    }
  }
  EXPECT_EQ(s.union_graph().edges(), static_exponential(16).edges());
  // A single round is not strongly connected for n = 16 (hop 8 pairs nodes), the union is.
  EXPECT_FALSE(is_strongly_connected(s.graph_at(3)));
  EXPECT_TRUE(is_strongly_connected(s.union_graph()));
  EXPECT_EQ(one_peer_exponential(12).period(), 4);  // ceil(log2 12)
}

TEST(Graph, HypercubeNeighboursDifferInExactlyOneBit) {
  const Graph g = hypercube(32);
  EXPECT_TRUE(g.is_symmetric());
  for (NodeIndex i = 0; i < 32; ++i) {
    EXPECT_EQ(g.out_degree(i), 5);  // log2 32
    for (NodeIndex j : g.out_neighbors(i)) EXPECT_EQ(__builtin_popcount(static_cast<unsigned>(i ^ j)), 1);
  }
  try {
    hypercube(24, kKey);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("16 or 32"), std::string::npos) << e.what();
  }
}

TEST(Graph, StarAndCompleteHaveTheirDegrees) {
  const Graph s = star(6);
  EXPECT_EQ(s.out_degree(0), 5);
  for (NodeIndex i = 1; i < 6; ++i) EXPECT_EQ(s.out_degree(i), 1);
  const Graph k = complete(7);
  EXPECT_EQ(k.num_edges(), 7 * 6);
  EXPECT_TRUE(k.is_symmetric());
}

TEST(Graph, ErdosRenyiIsReproducibleFromItsSeedAndHasAboutPTimesThePairs) {
  const Graph a = erdos_renyi(200, 0.1, 7);
  const Graph b = erdos_renyi(200, 0.1, 7);
  const Graph c = erdos_renyi(200, 0.1, 8);
  EXPECT_EQ(a.edges(), b.edges());
  EXPECT_NE(a.edges(), c.edges());
  EXPECT_TRUE(a.is_symmetric());
  // Undirected edge count ~ Binomial(19900, 0.1): mean 1990, sd sqrt(19900*0.1*0.9) = 42.3.
  // Five standard deviations either side: [1778, 2202].
  const int64_t m = a.num_edges() / 2;
  EXPECT_GE(m, 1778);
  EXPECT_LE(m, 2202);
  EXPECT_EQ(erdos_renyi(30, 0.0, 1).num_edges(), 0);
  EXPECT_EQ(erdos_renyi(30, 1.0, 1).num_edges(), 30 * 29);
  EXPECT_THROW(erdos_renyi(30, 1.5, 1, kKey), InputError);
}

TEST(Graph, RandomStronglyConnectedDigraphIsStronglyConnectedForEverySeed) {
  // Even with p = 0 the Hamiltonian cycle keeps it strongly connected; p = 0 gives exactly n edges.
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const Graph g = random_strongly_connected(25, 0.0, seed);
    EXPECT_EQ(g.num_edges(), 25) << "seed " << seed;
    EXPECT_TRUE(is_strongly_connected(g)) << "seed " << seed;
    EXPECT_TRUE(is_strongly_connected(random_strongly_connected(25, 0.05, seed))) << "seed " << seed;
  }
  EXPECT_NE(random_strongly_connected(25, 0.1, 1).edges(), random_strongly_connected(25, 0.1, 2).edges());
}

TEST(GraphSequence, StaticSequenceReturnsTheSameGraphAtEveryStep) {
  const GraphSequence s(ring(5));
  EXPECT_EQ(s.period(), 1);
  EXPECT_EQ(&s.graph_at(0), &s.graph_at(17));
  EXPECT_EQ(s.union_graph().edges(), ring(5).edges());
}

// ---- topology specs ------------------------------------------------------------------------------

TEST(TopologySpec, ParsesEveryFamily) {
  EXPECT_EQ(parse_topology("ring:8", kKey).graph_at(0).num_edges(), 16);
  EXPECT_EQ(parse_topology("torus:4x4", kKey).num_nodes(), 16);
  EXPECT_EQ(parse_topology("grid:2x3", kKey).num_nodes(), 6);
  EXPECT_EQ(parse_topology("exponential:16", kKey).graph_at(0).out_degree(0), 4);
  EXPECT_EQ(parse_topology("one-peer-exponential:8", kKey).period(), 3);
  EXPECT_EQ(parse_topology("hypercube:8", kKey).graph_at(0).out_degree(0), 3);
  EXPECT_EQ(parse_topology("star:5", kKey).graph_at(0).out_degree(0), 4);
  EXPECT_EQ(parse_topology("complete:5", kKey).graph_at(0).num_edges(), 20);
  EXPECT_EQ(parse_topology("directed-ring:5:chords=0-2", kKey).graph_at(0).num_edges(), 6);
  EXPECT_EQ(parse_topology("directed-ring:5", kKey).graph_at(0).num_edges(), 5);
  EXPECT_EQ(parse_topology("erdos-renyi:32:0.2:seed=1", kKey).graph_at(0).edges(), erdos_renyi(32, 0.2, 1).edges());
  EXPECT_EQ(parse_topology("random-strongly-connected:10:0.1:seed=3", kKey).graph_at(0).edges(),
            random_strongly_connected(10, 0.1, 3).edges());
  // Aliases and case.
  EXPECT_EQ(parse_topology("EXP:8", kKey).graph_at(0).edges(), static_exponential(8).edges());
  EXPECT_EQ(parse_topology("dring:4", kKey).graph_at(0).edges(), directed_ring(4).edges());
}

// Every bad spec throws an InputError whose text contains the flag and the given fragment.
void expect_spec_error(const std::string& spec, const std::string& fragment) {
  try {
    parse_topology(spec, kKey);
    ADD_FAILURE() << "'" << spec << "' parsed";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--topology"), std::string::npos) << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << "'" << spec << "': " << what;
  }
}

TEST(TopologySpec, BadSpecsNameTheFlagAndSuggestTheNearestName) {
  expect_spec_error("exponentail:16", "did you mean 'exponential'");
  expect_spec_error("torrus:4x4", "did you mean 'torus'");
  expect_spec_error("ring", "expected 1 argument");
  expect_spec_error("ring:eight", "expected a node count");
  expect_spec_error("ring:1", "ring needs between 2");
  expect_spec_error("ring:99999999", "a node count 99999999 is above the limit of 1048576");
  expect_spec_error("torus:4", "expected ROWSxCOLS");
  expect_spec_error("erdos-renyi:32", "expected 2 arguments");
  expect_spec_error("erdos-renyi:32:1.2", "probability");
  expect_spec_error("erdos-renyi:32:0.2:sed=1", "did you mean 'seed'");
  expect_spec_error("erdos-renyi:32:0.2:seed=-1", "seed");
  expect_spec_error("ring:8:seed=1", "unknown option 'seed'");
  expect_spec_error("hypercube:12", "nearest: 8 or 16");
  expect_spec_error("directed-ring:5:chords=0_2", "A-B");
  expect_spec_error("directed-ring:5:chords=0-9", "chord 0-9");
  expect_spec_error("file:", "missing the path");
}

// ---- edge lists ----------------------------------------------------------------------------------

TEST(EdgeList, ParsesDirectivesCommentsAndBothDirections) {
  const Graph g = parse_edge_list("# five nodes, 0 -> 1\nnodes 5\n0 1   # first edge\n\n1 2\n3\t4\n", "x.txt");
  EXPECT_EQ(g.num_nodes(), 5);
  EXPECT_EQ(g.num_edges(), 3);
  EXPECT_TRUE(g.has_edge(3, 4));
  EXPECT_FALSE(g.has_edge(4, 3));
  const Graph u = parse_edge_list("undirected\n0 1\n1 2\n", "u.txt");
  EXPECT_EQ(u.num_nodes(), 3);  // max index + 1
  EXPECT_TRUE(u.is_symmetric());
  EXPECT_EQ(u.num_edges(), 4);
}

void expect_edge_list_error(const std::string& text, const std::string& fragment) {
  try {
    parse_edge_list(text, "g.txt");
    ADD_FAILURE() << "parsed: " << text;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(EdgeList, ErrorsNameFileLineAndToken) {
  expect_edge_list_error("0 1\n1 x\n", "g.txt:2: expected a node index, got 'x'");
  expect_edge_list_error("0 1\n1 2 3\n", "g.txt:2: expected 'SRC DST' (two node indices), got 3 tokens");
  expect_edge_list_error("node 4\n", "g.txt:1:");
  expect_edge_list_error("node 4\n", "did you mean 'nodes'");
  expect_edge_list_error("nodes 3\n0 1\n2 3\n", "g.txt:3: node 3 is out of range");
  expect_edge_list_error("nodes 0\n", "g.txt:1: expected a node count");
  expect_edge_list_error("nodes 3\nnodes 4\n", "g.txt:2: 'nodes' given twice");
  expect_edge_list_error("# nothing\n", "no edges");
  expect_edge_list_error("0 -1\n", "got '-1'");
}

TEST(EdgeList, ReadsAFileAndReportsAMissingOne) {
  const std::string path = ::testing::TempDir() + "decentral_edges.txt";
  {
    std::ofstream out(path);
    out << "nodes 4\n0 1\n1 2\n2 3\n3 0\n";
  }
  const GraphSequence s = parse_topology("file:" + path, kKey);
  EXPECT_EQ(s.graph_at(0).edges(), directed_ring(4).edges());
  std::remove(path.c_str());
  try {
    read_edge_list(path);
    FAIL() << "read a removed file";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace orrery::decentral
