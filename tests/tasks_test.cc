// Built-in side tasks on the CPU: the work-plan sizer, PageRank and SGD
// against independent references, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/step_sizer.h"
#include "freeride/task.h"
#include "image/image.h"
#include "image/image_codec.h"
#include "pagerank/graph.h"
#include "pagerank/pagerank.h"
#include "sgd/sgd.h"
#include "test_util.h"

namespace freeride::tasks {
namespace {

TEST(StepSizer, SizesChunksToTheBudgetFromMeasuredCost) {
  StepSizer sizer(2'000'000, 100, 10, 1'000'000);  // 2 ms budget
  EXPECT_EQ(sizer.next_items(), 100);
  // Items cost 1 µs: growth is capped at 2x a step, then settles at 2000.
  int64_t prev = 100;
  for (int i = 0; i < 20; ++i) {
    int64_t n = sizer.next_items();
    EXPECT_LE(n, 2 * prev);
    sizer.Record(n, n * 1000);
    prev = n;
  }
  EXPECT_EQ(sizer.next_items(), 2000);
  // A slower chunk (contention) is believed at once: no repeated overrun.
  sizer.Record(2000, 2000 * 4000);
  EXPECT_EQ(sizer.next_items(), 500);
  // A faster one only moves the estimate part of the way.
  sizer.Record(500, 500 * 1000);
  EXPECT_GT(sizer.next_items(), 500);
  EXPECT_LT(sizer.next_items(), 2000);
  StepSizer bounded(1'000'000'000, 5, 10, 50);
  EXPECT_EQ(bounded.next_items(), 10);
  bounded.Record(10, 1);
  bounded.Record(20, 1);
  bounded.Record(40, 1);
  EXPECT_EQ(bounded.next_items(), 50);
}

// Behind the GPU gate, run alone, a chunk's time holds the gate's waits for
// a bubble: one held chunk (25 times its cost) does not shrink the next, nor
// do four of the last eight, and a cost that rises for good is taken once it
// holds for five of them.
TEST(StepSizer, BehindTheGateAHeldChunkIsOutvotedAndALastingSlowdownTaken) {
  StepSizer sizer(2'000'000, 100, 10, 1'000'000, SlowChunks::kOutvoted);  // 2 ms budget
  for (int i = 0; i < 20; ++i) sizer.Record(sizer.next_items(), sizer.next_items() * 1000);
  EXPECT_EQ(sizer.next_items(), 2000);
  sizer.Record(2000, 2000 * 25'000);  // held for a bubble
  EXPECT_EQ(sizer.next_items(), 2000);
  // Four times dearer from now on: with the held chunk, four of eight are not yet enough...
  for (int i = 0; i < 3; ++i) sizer.Record(sizer.next_items(), sizer.next_items() * 4000);
  EXPECT_EQ(sizer.next_items(), 2000);
  // ...five are.
  sizer.Record(2000, 2000 * 4000);
  EXPECT_EQ(sizer.next_items(), 500);
  for (int i = 0; i < 3 * StepSizer::kRecent; ++i) sizer.Record(sizer.next_items(), sizer.next_items() * 4000);
  EXPECT_EQ(sizer.next_items(), 500) << "the window goes round";
  // The first chunk is nearly always held behind the gate: of two, the cheaper counts.
  StepSizer fresh(2'000'000, 1000, 10, 1'000'000, SlowChunks::kOutvoted);
  fresh.Record(1000, 1000 * 25'000);
  EXPECT_EQ(fresh.next_items(), 80);
  fresh.Record(80, 80 * 1000);
  EXPECT_EQ(fresh.next_items(), 160) << "learned at 1 us an item, growing at most twice";
  // The same held chunk under host-side dispatch is believed at once.
  StepSizer believing(2'000'000, 2000, 10, 1'000'000);
  believing.Record(2000, 2000 * 1000);
  believing.Record(2000, 2000 * 25'000);
  EXPECT_EQ(believing.next_items(), 80);
  // A rule taken later keeps what was learned.
  believing.set_slow_chunks(SlowChunks::kOutvoted);
  believing.Record(80, 80 * 1000);
  EXPECT_EQ(believing.next_items(), 160);
}

// Which rule a built-in task's sizer takes: outvoted only for GPU work that
// steps alone behind a gate (the daemon's gate page in its environment).
// Asked inside a step, alone is what the SDK's step budget says: a task run
// by freeride::RunIterativeTask without a daemon is alone.
TEST(StepSizer, OnlyGpuWorkSteppingAloneBehindAGateOutvotesItsSlowChunks) {
  const char* before = std::getenv("FREERIDE_GATE_PAGE");
  const std::string kept = before ? before : "";
  unsetenv("FREERIDE_GATE_PAGE");
  EXPECT_EQ(SlowChunksFromEnvironment(true, true), SlowChunks::kBelieved);
  setenv("FREERIDE_GATE_PAGE", "/dev/shm/freeride-test-lane0-gate", 1);
  EXPECT_EQ(SlowChunksFromEnvironment(true, true), SlowChunks::kOutvoted);
  EXPECT_EQ(SlowChunksFromEnvironment(false, true), SlowChunks::kBelieved) << "CPU work is not gated";
  EXPECT_EQ(SlowChunksFromEnvironment(true, false), SlowChunks::kBelieved) << "granted steps";
  EXPECT_EQ(SlowChunksForThisStep(true), SlowChunks::kBelieved) << "outside a step the budget is 0";
  struct Probe : IterativeTask {
    std::vector<SlowChunks> seen;
    StepResult Step() override {
      seen.push_back(SlowChunksForThisStep(true));
      return {1, seen.size() == 2};
    }
  } probe;
  RunOptions alone;
  alone.standalone = true;
  testing::internal::CaptureStdout();  // the alone run's summary line
  EXPECT_EQ(RunIterativeTask(probe, alone), 0);
  testing::internal::GetCapturedStdout();
  EXPECT_EQ(probe.seen, std::vector<SlowChunks>(2, SlowChunks::kOutvoted));
  setenv("FREERIDE_GATE_PAGE", "", 1);
  EXPECT_EQ(SlowChunksFromEnvironment(true, true), SlowChunks::kBelieved);
  if (before) setenv("FREERIDE_GATE_PAGE", kept.c_str(), 1); else unsetenv("FREERIDE_GATE_PAGE");
}

// Dense power iteration straight from the definition, as the reference.
std::vector<double> ReferencePageRank(int n, const std::vector<std::pair<int32_t, int32_t>>& edges,
                                      int iterations) {
  std::vector<int> out(n, 0);
  for (auto [s, d] : edges) ++out[s];
  std::vector<double> r(n, 1.0 / n);
  for (int it = 0; it < iterations; ++it) {
    std::vector<double> next(n, 0);
    double dangling = 0;
    for (int v = 0; v < n; ++v)
      if (out[v] == 0) dangling += r[v];
    for (auto [s, d] : edges) next[d] += r[s] / out[s];
    for (int v = 0; v < n; ++v) next[v] = (1 - 0.85) / n + 0.85 * (next[v] + dangling / n);
    r = next;
  }
  return r;
}

TEST(PageRank, SlicedIterationsMatchTheDefinition) {
  std::mt19937 rng(5);
  const int n = 500;
  std::vector<std::pair<int32_t, int32_t>> edges;
  for (int e = 0; e < 3000; ++e) edges.emplace_back(rng() % n, rng() % (n - 50));  // some dangling
  Graph g = BuildGraph(n, edges);
  auto engine = MakeCpuPageRank(g);
  for (int it = 0; it < 30; ++it) {
    engine->BeginIteration();
    for (int64_t v = 0; v < n;) {  // uneven slices, as bubbles give them
      int64_t end = std::min<int64_t>(n, v + 1 + rng() % 97);
      engine->ProcessVertices(v, end);
      v = end;
    }
    engine->EndIteration();
  }
  std::vector<double> ours = engine->Ranks(), ref = ReferencePageRank(n, edges, 30);
  double l1 = 0, sum = 0;
  for (int v = 0; v < n; ++v) l1 += std::fabs(ours[v] - ref[v]), sum += ours[v];
  EXPECT_LE(l1, 1e-10);
  EXPECT_NEAR(sum, 1.0, 1e-9);
}

TEST(PageRank, RmatGraphIsDeterministicAndSkewed) {
  Graph a = GenerateRmat(10, 8, 1), b = GenerateRmat(10, 8, 1), c = GenerateRmat(10, 8, 2);
  EXPECT_EQ(a.vertices, 1024);
  EXPECT_EQ(a.edges(), 8192);
  EXPECT_EQ(a.in_sources, b.in_sources);
  EXPECT_NE(a.in_sources, c.in_sources);
  int max_in = 0;
  for (int64_t v = 0; v < a.vertices; ++v)
    max_in = std::max<int>(max_in, a.in_offsets[v + 1] - a.in_offsets[v]);
  EXPECT_GT(max_in, 8 * 8);  // power-law: a hub far above the mean of 8
  EXPECT_THROW(GenerateRmat(0, 8, 1), std::runtime_error);
}

// A step's chunk is sized by its work, edges and vertices, not its vertex
// count: R-MAT's low ids are hubs, a hundredfold the edges of its high ones.
TEST(PageRank, ChunksHoldAlikeWorkWhereverTheHubsAre) {
  // Vertex 0 is a hub of 1,000 in-edges; vertices 1..1000 have one each.
  std::vector<std::pair<int32_t, int32_t>> edges;
  for (int32_t v = 1; v <= 1000; ++v) edges.emplace_back(v, 0);
  for (int32_t v = 1; v <= 1000; ++v) edges.emplace_back(0, v);
  Graph g = BuildGraph(1001, edges);
  EXPECT_EQ(WorkBefore(g, 1), 1000 + kVertexWork);
  EXPECT_EQ(ChunkEnd(g, 0, 10), 1) << "a hub over the budget is a chunk of its own";
  EXPECT_EQ(ChunkEnd(g, 1, 10 * (1 + kVertexWork)), 11) << "ten leaves of one edge each";
  EXPECT_EQ(ChunkEnd(g, 1, 10 * (1 + kVertexWork) + 1), 12) << "the work reached, or just passed";
  EXPECT_EQ(ChunkEnd(g, 995, 1 << 30), 1001) << "at most the last vertex";
  EXPECT_EQ(ChunkEnd(g, 1000, 0), 1001) << "at least one vertex";
  // Over an R-MAT graph, chunks of one budget tile the vertices, each within
  // one vertex's work of the budget.
  Graph rmat = GenerateRmat(14, 16, 3);
  const int64_t budget = 20000;
  int64_t most_vertices = 0, fewest_vertices = rmat.vertices;
  for (int64_t begin = 0; begin < rmat.vertices;) {
    const int64_t end = ChunkEnd(rmat, begin, budget);
    ASSERT_GT(end, begin);
    const int64_t work = WorkBefore(rmat, end) - WorkBefore(rmat, begin);
    if (end < rmat.vertices) {
      EXPECT_GE(work, budget);
      EXPECT_LT(WorkBefore(rmat, end - 1) - WorkBefore(rmat, begin), budget);
      most_vertices = std::max(most_vertices, end - begin);
      fewest_vertices = std::min(fewest_vertices, end - begin);
    }
    begin = end;
  }
  EXPECT_GT(most_vertices, 4 * fewest_vertices) << "leaves' chunks hold more vertices than hubs'";
}

TEST(PageRank, EdgeListsAreReadWithClearErrors) {
  TempDir dir;
  auto write = [&](const std::string& text) {
    std::string p = dir.path() + "/g.txt";
    std::ofstream(p) << text;
    return p;
  };
  Graph g = LoadEdgeList(write("# SNAP header\n100\t7\n7 100\n\n7 3000000000\n"));
  EXPECT_EQ(g.vertices, 3);  // sparse ids renumbered
  EXPECT_EQ(g.edges(), 3);
  auto message = [&](const std::string& text, uint64_t limit = 0) {
    try {
      LoadEdgeList(write(text), limit);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("1 2\n3 four\n").find("g.txt:2: expected two non-negative"), std::string::npos);
  EXPECT_NE(message("1 2 3\n").find("got more"), std::string::npos);
  EXPECT_NE(message("-1 2\n").find(":1:"), std::string::npos);
  EXPECT_NE(message("# nothing\n").find("no edges"), std::string::npos);
  EXPECT_NE(message("1 2\n2 3\n", 10).find("memory limit"), std::string::npos);
  EXPECT_THROW(LoadEdgeList(dir.path() + "/missing.txt"), std::runtime_error);
}

TEST(Sgd, LearnsAGeneratedLowRankModelAndSlicingDoesNotMatter) {
  RatingSet set = GenerateRatings(400, 200, 40000, 8, 11, 0.05f);
  SgdParams p;
  p.rank = 8;
  auto whole = MakeSgdEngine(Device::kCpu, set, p);
  auto sliced = MakeSgdEngine(Device::kCpu, set, p);
  double start = whole->Rmse();
  const int64_t n = static_cast<int64_t>(set.ratings.size());
  for (int epoch = 0; epoch < 15; ++epoch) {
    whole->Update(0, n);
    for (int64_t i = 0; i < n; i += 777) sliced->Update(i, std::min(n, i + 777));
  }
  double end = whole->Rmse();
  EXPECT_LT(end, 0.5 * start);
  EXPECT_LT(end, 0.25);
  EXPECT_DOUBLE_EQ(sliced->Rmse(), end);  // sequential SGD: same updates, same order
}

TEST(Sgd, RatingFilesAreReadWithClearErrors) {
  TempDir dir;
  std::string p = dir.path() + "/r.csv";
  std::ofstream(p) << "# user,item,rating\n10,20,4.5\n11::20::3\n10\t21\t1\n";
  RatingSet set = LoadRatings(p, 8);
  EXPECT_EQ(set.users, 2);
  EXPECT_EQ(set.items, 2);
  EXPECT_EQ(set.ratings.size(), 3u);
  std::ofstream(p) << "1 2 3\n1 2 nan\n";
  try {
    LoadRatings(p, 8);
    ADD_FAILURE() << "accepted nan";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("r.csv:2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(MakeSgdEngine(Device::kCpu, set, SgdParams{.rank = 65}), std::runtime_error);
}


Image Solid(int w, int h, int channels, std::vector<uint8_t> colour) {
  Image image{w, h, channels, {}};
  for (int i = 0; i < w * h; ++i) image.pixels.insert(image.pixels.end(), colour.begin(), colour.end());
  return image;
}

std::vector<uint8_t> Transform(const Image& source, int dst_w, int dst_h, const Image& watermark,
                               float opacity) {
  auto engine = MakeCpuImageTransformer(watermark);
  TransformGeometry g = PlaceWatermark(source.width, source.height, dst_w, dst_h, watermark, opacity);
  engine->Begin(g, source.pixels.data());
  engine->SourceRowsReady(0, source.height);
  std::vector<uint8_t> out(static_cast<size_t>(dst_w) * dst_h * 3);
  engine->TransformRows(0, dst_h, out.data());
  return out;
}

TEST(Image, BilinearResizeMatchesHandComputedValues) {
  // One row [0, 100] stretched to four pixels: centres at source x = -0.25
  // (clamped), 0.25, 0.75 and 1.25 (clamped).
  Image row{2, 1, 3, {0, 0, 0, 100, 100, 100}};
  std::vector<uint8_t> out = Transform(row, 4, 1, Image{}, 0);
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[3], 25);
  EXPECT_EQ(out[6], 75);
  EXPECT_EQ(out[9], 100);
  // Halving averages 2x2 blocks.
  Image block{2, 2, 3, {10, 10, 10, 20, 20, 20, 30, 30, 30, 40, 40, 40}};
  EXPECT_EQ(Transform(block, 1, 1, Image{}, 0)[0], 25);
  // Same size and no watermark: the identity.
  Image photo = SyntheticImage(37, 23, 5);
  EXPECT_EQ(Transform(photo, 37, 23, Image{}, 0), photo.pixels);
}

TEST(Image, WatermarkIsAlphaBlendedAtTheBottomRight) {
  Image grey = Solid(200, 100, 3, {100, 100, 100});
  Image mark = Solid(10, 10, 4, {200, 0, 255, 255});
  mark.pixels[3] = 0;  // its top-left pixel is fully transparent
  std::vector<uint8_t> out = Transform(grey, 200, 100, mark, 0.5f);
  TransformGeometry g = PlaceWatermark(200, 100, 200, 100, mark, 0.5f);
  ASSERT_EQ(g.wm_x + g.wm_w, 200 - 2);
  auto pixel = [&](int x, int y) { return &out[(static_cast<size_t>(y) * 200 + x) * 3]; };
  EXPECT_EQ(pixel(g.wm_x + 5, g.wm_y + 5)[0], 150);  // 100 + 0.5 * (200 - 100)
  EXPECT_EQ(pixel(g.wm_x + 5, g.wm_y + 5)[1], 50);
  EXPECT_EQ(pixel(g.wm_x + 5, g.wm_y + 5)[2], 178);  // 100 + 0.5 * 155, rounded
  EXPECT_EQ(pixel(g.wm_x, g.wm_y)[0], 100) << "transparent watermark pixel";
  EXPECT_EQ(pixel(g.wm_x - 1, g.wm_y + 5)[0], 100) << "outside the watermark";
  // Opacity 1 copies opaque watermark pixels.
  out = Transform(grey, 200, 100, mark, 1.0f);
  EXPECT_EQ(pixel(g.wm_x + 5, g.wm_y + 5)[2], 255);
}

TEST(Image, CodecsRoundTripAndDecodeRowByRow) {
  Image photo = SyntheticImage(123, 77, 9);
  std::vector<uint8_t> png = EncodeImage(photo, ImageFormat::kPng);
  EXPECT_EQ(DecodeImage(png, "a.png").pixels, photo.pixels) << "PNG is lossless";
  std::vector<uint8_t> jpeg = EncodeImage(photo, ImageFormat::kJpeg, 95);
  Image back = DecodeImage(jpeg, "a.jpg");
  ASSERT_EQ(back.width, 123);
  ASSERT_EQ(back.height, 77);
  double error = 0;
  for (size_t i = 0; i < back.pixels.size(); ++i) error += std::abs(back.pixels[i] - photo.pixels[i]);
  // Close, though JPEG drops much of the synthetic image's pixel noise (sd 4).
  EXPECT_LT(error / back.pixels.size(), 6.0);
  // Decoding in uneven bands gives the same pixels as decoding at once.
  for (const auto* bytes : {&png, &jpeg}) {
    auto decoder = OpenImageDecoder(std::make_shared<const std::vector<uint8_t>>(*bytes), "x");
    std::vector<uint8_t> banded(back.pixels.size());
    for (int band : {1, 7, 30, 39}) decoder->ReadRows(band, banded.data() + decoder->rows_done() * 123 * 3);
    EXPECT_EQ(decoder->rows_done(), 77);
    EXPECT_EQ(banded, DecodeImage(*bytes, "x").pixels);
  }
  // RGBA PNGs keep their alpha; RGB ones get an opaque one.
  Image rgba = Solid(3, 2, 4, {1, 2, 3, 4});
  EXPECT_EQ(DecodeImage(EncodeImage(rgba, ImageFormat::kPng), "w.png", 4).pixels, rgba.pixels);
  EXPECT_EQ(DecodeImage(png, "a.png", 4).pixels[3], 255);
}

TEST(Image, DamagedImagesAreErrorsThatNameTheFile) {
  Image photo = SyntheticImage(64, 64, 2);
  auto expect_error = [](const std::vector<uint8_t>& bytes, const std::string& words) {
    try {
      DecodeImage(bytes, "holiday.jpg");
      ADD_FAILURE() << "decoded a damaged image; expected: " << words;
    } catch (const std::runtime_error& e) {
      std::string what = e.what();
      EXPECT_NE(what.find("holiday.jpg"), std::string::npos) << what;
      EXPECT_NE(what.find(words), std::string::npos) << what;
    }
  };
  expect_error({}, "empty");
  expect_error({'G', 'I', 'F', '8', '9', 'a'}, "not a JPEG or PNG");
  std::vector<uint8_t> jpeg = EncodeImage(photo, ImageFormat::kJpeg);
  jpeg.resize(jpeg.size() / 2);  // libjpeg would pad this with grey
  expect_error(jpeg, "cannot decode");
  std::vector<uint8_t> png = EncodeImage(photo, ImageFormat::kPng);
  png.resize(png.size() - 40);
  expect_error(png, "truncated");
  png = EncodeImage(photo, ImageFormat::kPng);
  png[png.size() / 2] ^= 0xff;  // a bit flip inside IDAT: a CRC error
  expect_error(png, "cannot decode");
}

// Runs a task's command line; returns its exit status and stderr, and leaves
// its stdout in dir/out for ReadJsonLines.
std::pair<int, std::string> RunTask(const std::string& command, const std::string& dir) {
  ShellResult r = RunShell(command, dir);
  std::ofstream(dir + "/out") << r.out;
  return {r.status, r.err};
}

TEST(TaskBinaries, BadArgumentsAndInputsExitNonZeroWithAMessage) {
  TempDir dir;
  auto run = [&](const std::string& args) { return RunTask(args, dir.path()); };
  auto [rc1, err1] = run(std::string(PAGERANK_BIN));
  EXPECT_EQ(rc1, 2);
  EXPECT_NE(err1.find("--edges FILE or --rmat-scale"), std::string::npos);
  auto [rc2, err2] = run(std::string(PAGERANK_BIN) + " --edges " + dir.path() + "/none.txt");
  EXPECT_EQ(rc2, 1);
  EXPECT_NE(err2.find("cannot open"), std::string::npos);
  auto [rc3, err3] = run(std::string(SGD_BIN) + " --generate-ratings 1000 --device warp-drive");
  EXPECT_EQ(rc3, 1);
  EXPECT_NE(err3.find("--device must be cpu, cuda or auto"), std::string::npos);
  // Standalone: the alone rate and step-time quantiles as one JSON line.
  auto [rc4, err4] = run(std::string(SGD_BIN) +
                         " --generate-ratings 20000 --epochs 2 --device cpu --standalone");
  EXPECT_EQ(rc4, 0) << err4;
  std::vector<nlohmann::json> lines = ReadJsonLines(dir.path() + "/out");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["task"], "sgd");
  EXPECT_EQ(lines[1]["unit"], "ratings");
  EXPECT_DOUBLE_EQ(lines[1]["units"].get<double>(), 40000);
  EXPECT_TRUE(lines[1]["finished"].get<bool>());
  EXPECT_GT(lines[1]["step_ms_p50"].get<double>(), 0);
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                               static_cast<std::streamsize>(bytes.size()));
}

TEST(TaskBinaries, ImageTaskWritesResizedImagesAndRefusesDamagedOnes) {
  TempDir dir;
  std::string in = dir.path() + "/in", out = dir.path() + "/out-images";
  std::filesystem::create_directories(in);
  WriteBytes(in + "/a.png", EncodeImage(SyntheticImage(300, 200, 1), ImageFormat::kPng));
  WriteBytes(in + "/b.jpg", EncodeImage(SyntheticImage(200, 300, 2), ImageFormat::kJpeg));
  std::vector<uint8_t> damaged = EncodeImage(SyntheticImage(64, 64, 3), ImageFormat::kJpeg);
  damaged.resize(damaged.size() / 2);
  WriteBytes(in + "/c.jpg", damaged);
  WriteBytes(in + "/notes.txt", {'h', 'i'});  // not an image: ignored
  std::string image = std::string(IMAGE_BIN) + " --device cpu --standalone --input " + in;

  auto run = [&](const std::string& args) { return RunTask(args, dir.path()); };
  auto [rc, err] = run(image + " --output " + out + " --width 100");
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("c.jpg: cannot decode image"), std::string::npos) << err;

  std::tie(rc, err) = run(image + " --output " + out + " --width 100 --skip-bad --step-ms 0.2");
  ASSERT_EQ(rc, 0) << err;
  std::vector<nlohmann::json> lines = ReadJsonLines(dir.path() + "/out");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["images"], 2);
  EXPECT_EQ(lines[0]["failed"], 1);
  EXPECT_EQ(lines[1]["unit"], "megapixels");
  EXPECT_NEAR(lines[1]["units"].get<double>(), 0.12, 1e-9) << "two 300x200 sources";
  Image a = DecodeImage(ReadFileBytes(out + "/a.png"), "a.png");
  EXPECT_EQ(a.width, 100);
  EXPECT_EQ(a.height, 67) << "aspect ratio kept";
  Image b = DecodeImage(ReadFileBytes(out + "/b.jpg"), "b.jpg");
  EXPECT_EQ(b.height, 150);
  EXPECT_FALSE(std::filesystem::exists(out + "/c.jpg"));

  // The same folder for input and output would overwrite the inputs.
  std::tie(rc, err) = run(image + " --output " + in);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("no input is overwritten"), std::string::npos) << err;
  // A decompression bomb is refused before allocating.
  std::tie(rc, err) = run(image + " --skip-bad --max-megapixels 0.01");
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("larger than --max-megapixels"), std::string::npos) << err;
  EXPECT_NE(err.find("no image could be decoded"), std::string::npos) << err;
  // An image beyond the memory the daemon granted.
  std::tie(rc, err) = run("FREERIDE_MEMORY_BYTES=1000 " + image + " --output " + out);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("more than the task's memory limit"), std::string::npos) << err;
  std::tie(rc, err) = run(image + " --generate 1");
  EXPECT_EQ(rc, 2) << "--input and --generate exclude each other";
}

}  // namespace
}  // namespace freeride::tasks
