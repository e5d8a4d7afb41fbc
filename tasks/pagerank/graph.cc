#include "pagerank/graph.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "common/data_lines.h"
#include "common/gpu.h"

namespace freeride::tasks {

uint64_t PageRankBytes(int64_t vertices, int64_t edges) {
  // CSR (offsets, sources, out-degrees) plus rank, next and contribution.
  return static_cast<uint64_t>(vertices) * (8 + 4 + 3 * 8) + static_cast<uint64_t>(edges) * 4;
}

int64_t ChunkEnd(const Graph& g, int64_t begin, int64_t work) {
  const int64_t want = WorkBefore(g, begin) + std::max<int64_t>(work, 1);
  // WorkBefore rises with the vertex: the first end whose work reaches `want`.
  int64_t lo = begin + 1, hi = g.vertices;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (WorkBefore(g, mid) >= want) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

Graph BuildGraph(int64_t vertices, const std::vector<std::pair<int32_t, int32_t>>& edges) {
  Graph g;
  g.vertices = vertices;
  g.in_offsets.assign(vertices + 1, 0);
  g.out_degree.assign(vertices, 0);
  for (const auto& [s, d] : edges) {
    ++g.in_offsets[d + 1];
    ++g.out_degree[s];
  }
  for (int64_t v = 0; v < vertices; ++v) g.in_offsets[v + 1] += g.in_offsets[v];
  g.in_sources.resize(edges.size());
  std::vector<int64_t> fill(g.in_offsets.begin(), g.in_offsets.end() - 1);
  for (const auto& [s, d] : edges) g.in_sources[fill[d]++] = s;
  return g;
}

Graph LoadEdgeList(const std::string& path, uint64_t max_bytes) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open the edge list");
  std::unordered_map<int64_t, int32_t> ids;
  std::vector<std::pair<int32_t, int32_t>> edges;
  auto dense = [&](int64_t id) {
    auto [it, inserted] = ids.emplace(id, static_cast<int32_t>(ids.size()));
    return it->second;
  };
  std::string line;
  int64_t line_no = 0;
  while (NextDataLine(in, &line, &line_no)) {
    std::istringstream fields(line);
    int64_t s = -1, d = -1;
    std::string extra;
    if (!(fields >> s >> d) || s < 0 || d < 0)
      throw std::runtime_error(path + ":" + std::to_string(line_no) +
                               ": expected two non-negative vertex ids, got '" + line + "'");
    if (fields >> extra && extra[0] != '#')
      throw std::runtime_error(path + ":" + std::to_string(line_no) +
                               ": expected two vertex ids, got more: '" + line + "'");
    if (ids.size() >= INT32_MAX - 1)
      throw std::runtime_error(path + ": more than 2^31 vertices are not supported");
    int32_t a = dense(s), b = dense(d);
    edges.emplace_back(a, b);
    // Checked as it grows, so a huge file fails early, not after reading.
    if ((edges.size() & 0xFFFF) == 0)
      CheckMemoryFits(PageRankBytes(ids.size(), edges.size()), max_bytes,
                      path + ": the part of the graph read so far");
  }
  if (edges.empty()) throw std::runtime_error(path + ": no edges found");
  CheckMemoryFits(PageRankBytes(ids.size(), edges.size()), max_bytes, path + ": the graph");
  return BuildGraph(static_cast<int64_t>(ids.size()), edges);
}

Graph GenerateRmat(int scale, int edge_factor, uint64_t seed) {
  if (scale < 1 || scale > 30) throw std::runtime_error("--rmat-scale must be in 1..30");
  if (edge_factor < 1) throw std::runtime_error("--edge-factor must be at least 1");
  int64_t n = int64_t{1} << scale;
  int64_t m = n * edge_factor;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::pair<int32_t, int32_t>> edges;
  edges.reserve(m);
  for (int64_t e = 0; e < m; ++e) {
    int64_t s = 0, d = 0;
    for (int bit = 0; bit < scale; ++bit) {
      double r = u(rng);
      int sb = r >= 0.57 + 0.19;  // quadrants c, d
      int db = (r >= 0.57 && r < 0.76) || r >= 0.95;  // quadrants b, d
      s = (s << 1) | sb;
      d = (d << 1) | db;
    }
    edges.emplace_back(static_cast<int32_t>(s), static_cast<int32_t>(d));
  }
  return BuildGraph(n, edges);
}

}  // namespace freeride::tasks
