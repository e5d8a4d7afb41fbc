// The cluster view's arithmetic and its input: snapshots made up here (two
// real daemons on TCP are asked in tests/python/cluster_view_test.py).
#include "client/cluster_view.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "test_util.h"

namespace freeride {
namespace {

v1::LaneStats Lane(int lane, uint64_t bubbles, int64_t bubble_ns, int64_t harvested_ns,
                   bool stage = true) {
  v1::LaneStats l;
  l.set_lane(lane);
  l.set_device("cpu:" + std::to_string(lane));
  l.set_stage_alive(stage);
  l.set_bubbles(bubbles);
  l.set_bubble_ns(bubble_ns);
  l.set_harvested_ns(harvested_ns);
  l.set_overrun_ns(1000);
  return l;
}

void Estimate(v1::LaneStats* l, double slowdown) {
  v1::OverheadEstimate* o = l->mutable_overhead();
  o->set_probing(true);
  o->set_known(true);
  o->set_slowdown(slowdown);
  o->set_slowdown_low(slowdown - 0.001);
  o->set_slowdown_high(slowdown + 0.001);
  o->set_cycles(8);
}

v1::TaskInfo Task(int64_t id, const std::string& state, const std::string& message = "") {
  v1::TaskInfo t;
  t.set_id(id);
  t.mutable_spec()->set_name("task-" + std::to_string(id));
  t.set_state(state);
  t.set_message(message);
  t.set_exit_code(state == "FAILED" ? 3 : 0);
  return t;
}

NodeSnapshot Answered(const std::string& name, std::vector<v1::LaneStats> lanes,
                      std::vector<v1::TaskInfo> tasks) {
  NodeSnapshot s;
  s.node = {name, name + ":7070"};
  for (auto& l : lanes) *s.stats.add_lanes() = l;
  s.stats.set_version("0.1.0");
  s.tasks = std::move(tasks);
  return s;
}

NodeSnapshot Unanswered(const std::string& name, grpc::StatusCode code, const std::string& why) {
  NodeSnapshot s;
  s.node = {name, name + ":7070"};
  s.code = code;
  s.problem = why;
  return s;
}

TEST(ClusterView, TheTotalAddsTheNodesThatAnsweredAndNamesTheOthers) {
  v1::LaneStats a0 = Lane(0, 100, 4'000'000'000, 3'000'000'000);
  v1::LaneStats a1 = Lane(1, 50, 1'000'000'000, 500'000'000, /*stage=*/false);
  v1::LaneStats b0 = Lane(0, 10, 2'000'000'000, 1'000'000'000);
  Estimate(&a0, 0.002);
  Estimate(&b0, 0.005);
  ClusterSummary s = SummarizeCluster(
      {Answered("a", {a0, a1}, {Task(1, "RUNNING"), Task(2, "FAILED", "exit 3"), Task(3, "SUBMITTED")}),
       Unanswered("gone", grpc::StatusCode::UNAVAILABLE, "not answering"),
       Answered("b", {b0}, {Task(1, "FINISHED"), Task(2, "PAUSED")}),
       Unanswered("locked", grpc::StatusCode::PERMISSION_DENIED, "may only read"),
       Unanswered("broken", grpc::StatusCode::INTERNAL, "boom")});
  ASSERT_EQ(s.nodes.size(), 5u);
  EXPECT_EQ(s.answered, 2);
  EXPECT_FALSE(s.AllAnswered());
  EXPECT_EQ(s.nodes[1].health, NodeHealth::kMissing);
  EXPECT_EQ(s.nodes[1].problem, "not answering");
  EXPECT_EQ(s.nodes[3].health, NodeHealth::kRefused);
  EXPECT_EQ(s.nodes[4].health, NodeHealth::kFailing);
  EXPECT_EQ(s.nodes[1].figures.lanes, 0) << "nothing is made up for a node that did not answer";

  const NodeFigures& a = s.nodes[0].figures;
  EXPECT_EQ(a.lanes, 2);
  EXPECT_EQ(a.lanes_with_stage, 1);
  EXPECT_EQ(a.bubbles, 150u);
  EXPECT_EQ(a.bubble_ns, 5'000'000'000);
  EXPECT_EQ(a.harvested_ns, 3'500'000'000);
  EXPECT_EQ(a.overrun_ns, 2000);
  EXPECT_EQ(a.tasks_launched, 1);
  EXPECT_EQ(a.tasks_queued, 1);
  EXPECT_EQ(a.tasks_failed, 1);

  const NodeFigures& t = s.total;
  EXPECT_EQ(t.lanes, 3);
  EXPECT_EQ(t.bubbles, 160u);
  EXPECT_EQ(t.bubble_ns, 7'000'000'000);
  EXPECT_EQ(t.harvested_ns, 4'500'000'000);
  EXPECT_EQ(t.tasks_launched, 2);
  EXPECT_EQ(t.tasks_finished, 1);
  EXPECT_EQ(t.tasks_failed, 1);
  EXPECT_EQ(t.lanes_with_estimate, 2);
  // The job runs at its slowest stage's pace: the worst lane, not a sum.
  ASSERT_TRUE(t.worst_overhead);
  EXPECT_EQ(t.worst_overhead->node, "b");
  EXPECT_DOUBLE_EQ(t.worst_overhead->slowdown, 0.005);

  ASSERT_EQ(s.failed.size(), 1u);
  EXPECT_EQ(s.failed[0].node, "a");
  EXPECT_EQ(s.failed[0].name, "task-2");
  EXPECT_EQ(s.failed[0].message, "exit 3");

  nlohmann::json j = nlohmann::json::parse(ClusterSummaryToJson(s));
  EXPECT_EQ(j["answered"], 2);
  EXPECT_EQ(j["not_answered"], (nlohmann::json{"gone", "locked", "broken"}));
  EXPECT_EQ(j["nodes"][1]["health"], "missing");
  EXPECT_EQ(j["nodes"][1]["problem"], "not answering");
  EXPECT_FALSE(j["nodes"][1].contains("figures"));
  EXPECT_EQ(j["total"]["bubble_ns"], 7'000'000'000);
  EXPECT_DOUBLE_EQ(j["total"]["harvested_share"].get<double>(), 4.5 / 7.0);
  EXPECT_EQ(j["total"]["worst_overhead"]["node"], "b");
  EXPECT_EQ(j["failed_tasks"][0]["node"], "a");
}

TEST(ClusterView, NoEstimateIsNullNotZero) {
  ClusterSummary s = SummarizeCluster({Answered("a", {Lane(0, 1, 10, 5)}, {})});
  EXPECT_TRUE(s.AllAnswered());
  EXPECT_FALSE(s.total.worst_overhead);
  nlohmann::json j = nlohmann::json::parse(ClusterSummaryToJson(s));
  EXPECT_TRUE(j["total"]["worst_overhead"].is_null());
}

TEST(ClusterView, NodesAreParsedWithOrWithoutNames) {
  std::string error;
  auto nodes = ParseClusterNodes("node1=10.0.0.1:7070, 10.0.0.2:7071,,[::1]:7072", &error);
  ASSERT_TRUE(nodes) << error;
  ASSERT_EQ(nodes->size(), 3u);
  EXPECT_EQ((*nodes)[0].name, "node1");
  EXPECT_EQ((*nodes)[0].server, "10.0.0.1:7070");
  EXPECT_EQ((*nodes)[1].name, "10.0.0.2:7071");
  EXPECT_EQ((*nodes)[2].server, "[::1]:7072");
}

TEST(ClusterView, BadNodeListsAreRefusedClearly) {
  std::string error;
  EXPECT_FALSE(ParseClusterNodes("", &error));
  EXPECT_NE(error.find("no nodes"), std::string::npos) << error;
  EXPECT_FALSE(ParseClusterNodes("node1", &error));
  EXPECT_NE(error.find("'node1' is not HOST:PORT"), std::string::npos) << error;
  EXPECT_FALSE(ParseClusterNodes("a:0", &error));
  EXPECT_FALSE(ParseClusterNodes("a:70000", &error));
  EXPECT_FALSE(ParseClusterNodes("a:7x", &error));
  EXPECT_FALSE(ParseClusterNodes(":7070", &error));
  EXPECT_FALSE(ParseClusterNodes("=a:7070", &error));
  EXPECT_NE(error.find("empty name"), std::string::npos) << error;
  EXPECT_FALSE(ParseClusterNodes("n=a:1,n=b:2", &error));
  EXPECT_NE(error.find("'n' is named twice"), std::string::npos) << error;
}

TEST(ClusterView, AClusterFileNamesTheLineOfAnError) {
  TempDir dir;
  std::string path = dir.path() + "/nodes";
  std::ofstream(path) << "# the job's nodes\nnode1=h1:7070\n\n  node2=h2:7070  \n";
  std::string error;
  auto nodes = ReadClusterFile(path, &error);
  ASSERT_TRUE(nodes) << error;
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[1].name, "node2");
  std::ofstream(path) << "node1=h1:7070\nnode2=h2\n";
  EXPECT_FALSE(ReadClusterFile(path, &error));
  EXPECT_NE(error.find("line 2"), std::string::npos) << error;
  EXPECT_FALSE(ReadClusterFile(dir.path() + "/missing", &error));
  EXPECT_NE(error.find("cannot read"), std::string::npos) << error;
}

}  // namespace
}  // namespace freeride
