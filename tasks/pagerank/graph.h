// Directed graphs for PageRank: read from a SNAP-style edge list or made by
// the R-MAT generator, stored as CSR of incoming edges (for pull updates).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace freeride::tasks {

struct Graph {
  int64_t vertices = 0;
  std::vector<int64_t> in_offsets;   // vertices + 1 entries
  std::vector<int32_t> in_sources;   // source of each incoming edge
  std::vector<int32_t> out_degree;
  int64_t edges() const { return static_cast<int64_t>(in_sources.size()); }
};

// Builds the CSR from (source, destination) pairs of dense ids < vertices.
Graph BuildGraph(int64_t vertices, const std::vector<std::pair<int32_t, int32_t>>& edges);

// Reads "src dst" lines (spaces or tabs; '#' starts a comment).  Ids may be
// sparse; they are renumbered densely in order of first appearance.  Throws
// std::runtime_error naming the file and line for a malformed line, and for
// a missing or empty file.  max_bytes (0: no limit) refuses a graph whose
// in-memory size would exceed it, before building it.
Graph LoadEdgeList(const std::string& path, uint64_t max_bytes = 0);

// R-MAT (a=0.57, b=0.19, c=0.19) with 2^scale vertices and edge_factor
// edges per vertex; deterministic for a seed.
Graph GenerateRmat(int scale, int edge_factor, uint64_t seed);

// What pulling vertices costs, in edge loads: each of their in-edges, plus
// kVertexWork a vertex (a warp's pass over one vertex, its sum and write,
// costs about as much as 32 loads).  Chunks sized by vertex count alone
// vary a hundredfold in edges on an R-MAT graph (its low ids are the hubs):
// a step sizer believing its slowest chunk then cut the light ones small,
// and a GPU gate held every chunk as long as the heaviest.
constexpr int64_t kVertexWork = 32;
inline int64_t WorkBefore(const Graph& g, int64_t vertex) {
  return g.in_offsets[vertex] + kVertexWork * vertex;
}
// The end of the chunk of vertices from `begin` whose work is `work` or just
// more: at least one vertex (a hub may be more than `work` alone), at most
// g.vertices.  begin < g.vertices.  Pure.
int64_t ChunkEnd(const Graph& g, int64_t begin, int64_t work);

// Bytes the CSR and two rank vectors take for this size.
uint64_t PageRankBytes(int64_t vertices, int64_t edges);

}  // namespace freeride::tasks
