// `freeride doctor` and where the CLI finds its files: the checks on real
// folders, sockets and a real daemon, their interpretation of made-up nodes
// (GPUs, drivers, Pythons this machine does not have), and the command's exit
// status.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "cli/cuda_driver.h"
#include "cli/doctor_checks.h"
#include "cli/install_layout.h"
#include "daemon/daemon.h"
#include "freeride/freeride.h"
#include "test_util.h"

namespace freeride::cli {
namespace {

namespace fs = std::filesystem;

bool Has(const std::vector<Finding>& found, const std::string& area, Severity severity,
         const std::string& text = "") {
  for (const Finding& f : found)
    if (f.area == area && f.severity == severity &&
        (text.empty() || (f.what + " " + f.fix).find(text) != std::string::npos))
      return true;
  return false;
}

std::string Dump(const std::vector<Finding>& found) { return FormatFindings(found); }

void Touch(const fs::path& path) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << "x\n";
}

TEST(InstallLayout, AnInstallPrefixHasItsFilesInShareFreeride) {
  TempDir dir;
  fs::path prefix = dir.path();
  Touch(prefix / "share/freeride/python/freeride/demo.py");
  std::string error;
  auto layout = FindInstallLayout(prefix / "bin", &error);
  ASSERT_TRUE(layout) << error;
  EXPECT_EQ(layout->kind, LayoutKind::kInstall);
  EXPECT_EQ(layout->share, prefix / "share/freeride");
  EXPECT_EQ(layout->python_path, prefix / "share/freeride/python");
  EXPECT_EQ(layout->bin_dirs, std::vector<fs::path>{prefix / "bin"});
}

// pip puts the package in site-packages; the executables are in its _bin.
TEST(InstallLayout, AWheelHasItsFilesInsideThePackage) {
  TempDir dir;
  fs::path site = fs::path(dir.path()) / "lib/python3.12/site-packages";
  Touch(site / "freeride/demo.py");
  Touch(site / "freeride/_bin/freeride");
  std::string error;
  auto layout = FindInstallLayout(site / "freeride" / kWheelBinDir, &error);
  ASSERT_TRUE(layout) << error;
  EXPECT_EQ(layout->kind, LayoutKind::kWheel);
  EXPECT_EQ(layout->share, site / "freeride" / kWheelShareDir);
  EXPECT_EQ(layout->python_path, site);
  EXPECT_EQ(layout->bin_dirs, std::vector<fs::path>{site / "freeride" / kWheelBinDir});
  // Another folder beside a package is not taken for a wheel's.
  EXPECT_FALSE(FindInstallLayout(site / "freeride/bin", &error));
  EXPECT_NE(error.find("a wheel"), std::string::npos) << error;
}

TEST(InstallLayout, ABuildTreeAnywhereNamesItsSourceTree) {
  TempDir source, build;
  Touch(fs::path(source.path()) / "python/freeride/demo.py");
  std::ofstream(fs::path(build.path()) / kBuildTreeMarker) << source.path() << "\n";
  std::string error;
  auto layout = FindInstallLayout(build.path(), &error);
  ASSERT_TRUE(layout) << error;
  EXPECT_EQ(layout->kind, LayoutKind::kBuildTree);
  EXPECT_EQ(layout->share, fs::path(source.path()));
  EXPECT_EQ(layout->python_path, fs::path(source.path()) / "python");
  EXPECT_EQ(layout->bin_dirs, (std::vector<fs::path>{build.path(), fs::path(build.path()) / "tasks"}));
}

TEST(InstallLayout, NeitherLayoutSaysWhereItLooked) {
  TempDir dir;
  std::string error;
  EXPECT_FALSE(FindInstallLayout(fs::path(dir.path()) / "bin", &error));
  EXPECT_NE(error.find("share/freeride/python/freeride/demo.py"), std::string::npos) << error;
  EXPECT_NE(error.find(kBuildTreeMarker), std::string::npos) << error;
  std::ofstream(fs::path(dir.path()) / kBuildTreeMarker) << "/nonexistent/source\n";
  EXPECT_FALSE(FindInstallLayout(dir.path(), &error));
  EXPECT_NE(error.find("/nonexistent/source"), std::string::npos) << error;
}

TEST(InstallLayout, ThisBuildFindsItsSourceTree) {
  std::string error;
  auto layout = FindInstallLayout(fs::path(FREERIDE_BIN).parent_path(), &error);
  ASSERT_TRUE(layout) << error;
  EXPECT_EQ(layout->kind, LayoutKind::kBuildTree);
  EXPECT_TRUE(fs::exists(layout->share / "examples/train_gpt_pipeline.py"));
}

TEST(CudaDriver, AMissingLibraryIsReportedNotFatal) {
  CudaDriverInfo info = ProbeCudaDriver("/nonexistent/libcuda.so.1");
  EXPECT_FALSE(info.library_loaded);
  EXPECT_FALSE(info.library_error.empty());
  std::vector<Finding> found = CheckGpus(info, false);
  EXPECT_TRUE(Has(found, "driver", Severity::kNote, "CPU lanes only")) << Dump(found);
  EXPECT_FALSE(AnyBlocker(found));
  Finding mps = CheckMps(info, "/tmp");
  EXPECT_EQ(mps.severity, Severity::kNote) << mps.what;
  EXPECT_NE(ExpectedIsolation(info, mps).what.find("SCHED_IDLE"), std::string::npos);
}

CudaDriverInfo TwoH200s() {
  CudaDriverInfo info;
  info.library_loaded = true;
  info.init_result = 0;
  info.driver_version = 13000;
  info.has_launch_host_func = true;
  for (int i = 0; i < 2; ++i)
    info.gpus.push_back({i, "NVIDIA H200", 150109880320ULL, 9, 0, 0, 1, 1, 1});
  return info;
}

TEST(DoctorGpus, HealthyGpusAreOkWithTheirStreamMemoryOperations) {
  std::vector<Finding> found = CheckGpus(TwoH200s(), true);
  EXPECT_TRUE(Has(found, "driver", Severity::kOk, "CUDA 13.0, 2 GPU(s)")) << Dump(found);
  EXPECT_TRUE(Has(found, "gpu 1", Severity::kOk, "NVIDIA H200")) << Dump(found);
  EXPECT_TRUE(Has(found, "gpu 0", Severity::kOk, "32-bit yes, 64-bit yes, wait NOR yes")) << Dump(found);
  EXPECT_FALSE(AnyBlocker(found));
  Finding no_mps{"mps", Severity::kWarning, "nvidia-cuda-mps-control is not installed", ""};
  EXPECT_NE(ExpectedIsolation(TwoH200s(), no_mps).what.find("time-slicing"), std::string::npos);
  Finding mps{"mps", Severity::kOk, "an MPS control daemon starts", ""};
  EXPECT_NE(ExpectedIsolation(TwoH200s(), mps).what.find("MPS"), std::string::npos);
}

TEST(DoctorGpus, ADriverThatDoesNotStartBlocks) {
  CudaDriverInfo info;
  info.library_loaded = true;
  info.init_result = 100;
  info.init_error = "cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)";
  std::vector<Finding> found = CheckGpus(info, true);
  EXPECT_TRUE(Has(found, "driver", Severity::kBlocker, "CUDA_ERROR_NO_DEVICE")) << Dump(found);
  EXPECT_TRUE(AnyBlocker(found));
}

TEST(DoctorGpus, ProhibitedComputeModeBlocksAndOldDriversSayHowToEnableMemOps) {
  CudaDriverInfo info = TwoH200s();
  info.gpus[0].compute_mode = 2;
  info.driver_version = 11080;
  info.gpus[1].stream_mem_ops = 0;
  std::vector<Finding> found = CheckGpus(info, false);
  EXPECT_TRUE(Has(found, "gpu 0", Severity::kBlocker, "nvidia-smi -i 0 -c DEFAULT")) << Dump(found);
  EXPECT_TRUE(Has(found, "gpu 1", Severity::kWarning, "NVreg_EnableStreamMemOPs=1")) << Dump(found);
  EXPECT_TRUE(Has(found, "gpu 1", Severity::kWarning, "--gate off")) << Dump(found);
  EXPECT_TRUE(Has(found, "nvidia-smi", Severity::kWarning)) << Dump(found);
  info.has_launch_host_func = false;
  EXPECT_TRUE(Has(CheckGpus(info, true), "stream marks", Severity::kBlocker));
}

TEST(DoctorSharedMemory, AWritableFolderMapsASegmentAndAMissingOneBlocks) {
  TempDir dir;
  std::vector<Finding> found = CheckSharedMemory(dir.path());
  EXPECT_TRUE(Has(found, "shm", Severity::kOk, "created and mapped")) << Dump(found);
  EXPECT_TRUE(fs::is_empty(dir.path())) << "the probe segment is removed";
  found = CheckSharedMemory(dir.path() + "/missing");
  EXPECT_TRUE(Has(found, "shm", Severity::kBlocker, "does not exist")) << Dump(found);
  EXPECT_TRUE(Has(CheckSharedMemory("/dev/shm"), "shm", Severity::kOk, "tmpfs"));
}

TEST(DoctorStateDir, AFileAnotherUsersFolderAndAnUnwritableParentBlock) {
  TempDir dir;
  EXPECT_EQ(CheckStateDir(dir.path() + "/new").severity, Severity::kOk);
  EXPECT_EQ(CheckStateDir(dir.path()).severity, Severity::kOk);
  Touch(fs::path(dir.path()) / "file");
  Finding file = CheckStateDir(dir.path() + "/file");
  EXPECT_EQ(file.severity, Severity::kBlocker) << file.what;
  EXPECT_NE(file.what.find("not a directory"), std::string::npos) << file.what;
  Finding under_file = CheckStateDir(dir.path() + "/file/state");
  EXPECT_EQ(under_file.severity, Severity::kBlocker) << under_file.what;
  // Another user's folder: root can make one; anyone else has "/" for that.
  std::string others = "/";
  if (geteuid() == 0) {
    others = dir.path() + "/others";
    fs::create_directory(others);
    ASSERT_EQ(chown(others.c_str(), 65534, 65534), 0);
  }
  Finding foreign = CheckStateDir(others);
  EXPECT_EQ(foreign.severity, Severity::kBlocker) << foreign.what;
  EXPECT_NE(foreign.what.find("belongs to uid"), std::string::npos) << foreign.what;
  chmod(dir.path().c_str(), 0777);
  Finding open_to_all = CheckStateDir(dir.path());
  EXPECT_EQ(open_to_all.severity, Severity::kWarning) << open_to_all.what;
}

TEST(DoctorSocket, TooLongOrNotASocketBlocks) {
  TempDir dir;
  EXPECT_EQ(CheckSocketPath(dir.path() + "/d.sock").severity, Severity::kOk);
  Finding long_path = CheckSocketPath(dir.path() + "/" + std::string(120, 'x'));
  EXPECT_EQ(long_path.severity, Severity::kBlocker);
  EXPECT_NE(long_path.what.find("at most 107"), std::string::npos) << long_path.what;
  Touch(fs::path(dir.path()) / "file.sock");
  EXPECT_EQ(CheckSocketPath(dir.path() + "/file.sock").severity, Severity::kBlocker);
}

DaemonOptions CpuDaemon(const TempDir& dir, int lanes) {
  DaemonOptions options;
  options.socket_path = dir.path() + "/d.sock";
  options.state_dir = dir.path() + "/state";
  for (int i = 0; i < lanes; ++i) options.lanes.push_back({i, "cpu:" + std::to_string(i), 0, -1});
  return options;
}

TEST(DoctorDaemon, NoneStaleAndRunningWithAStageOnOneLane) {
  TempDir dir;
  DaemonOptions options = CpuDaemon(dir, 2);
  std::vector<Finding> found = CheckDaemon(options.socket_path);
  EXPECT_TRUE(Has(found, "daemon", Severity::kNote, "none running")) << Dump(found);

  // A socket file nothing listens on, as a killed daemon leaves.
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, options.socket_path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);
  found = CheckDaemon(options.socket_path);
  EXPECT_TRUE(Has(found, "daemon", Severity::kWarning, "no daemon answers")) << Dump(found);

  Daemon daemon(options);
  std::string error;
  ASSERT_TRUE(daemon.Start(&error)) << error;
  freeride_stage* stage = freeride_stage_open(1, options.socket_path.c_str());
  ASSERT_NE(stage, nullptr);
  freeride_bubble_begin(stage, 0, 0, 0);
  freeride_bubble_end(stage);
  found = CheckDaemon(options.socket_path);
  EXPECT_TRUE(Has(found, "daemon", Severity::kOk, "2 lane(s)")) << Dump(found);
  EXPECT_TRUE(Has(found, "lane 0", Severity::kOk, "cpu:0: no stage attached")) << Dump(found);
  EXPECT_TRUE(Has(found, "lane 1", Severity::kOk, "stage attached (pid " + std::to_string(getpid())))
      << Dump(found);
  EXPECT_TRUE(Has(found, "isolation", Severity::kOk, "SCHED_IDLE")) << Dump(found);
  freeride_stage_close(stage);
  daemon.Shutdown();
}

TEST(DoctorDaemon, GpuLanesSayWhetherMpsIsolatesTheirTasks) {
  v1::StatsReply stats;
  stats.set_daemon_pid(42);
  v1::LaneStats* lane = stats.add_lanes();
  lane->set_lane(0);
  lane->set_device("gpu:0");
  lane->set_cpu_core(-1);
  lane->set_isolation(v1::ISOLATION_GPU_TIME_SLICED);
  std::vector<Finding> found = DescribeDaemon(stats);
  EXPECT_TRUE(Has(found, "isolation", Severity::kWarning, "time-slicing")) << Dump(found);
  EXPECT_TRUE(Has(found, "stages", Severity::kNote, "no training stage")) << Dump(found);
  lane->set_isolation(v1::ISOLATION_GPU_MPS);
  lane->set_stage_pid(getpid());
  lane->set_stage_alive(true);
  found = DescribeDaemon(stats);
  EXPECT_TRUE(Has(found, "isolation", Severity::kOk, "MPS")) << Dump(found);
  EXPECT_FALSE(Has(found, "stages", Severity::kNote)) << Dump(found);
}

TEST(DoctorDaemon, CpuLanesSayWhetherTheirTasksRunInSchedIdle) {
  v1::StatsReply stats;
  stats.set_daemon_pid(42);
  v1::LaneStats* lane = stats.add_lanes();
  lane->set_lane(0);
  lane->set_device("cpu:0");
  lane->set_cpu_core(1);
  lane->set_isolation(v1::ISOLATION_CPU_NORMAL);
  std::vector<Finding> found = DescribeDaemon(stats);
  EXPECT_TRUE(Has(found, "isolation", Severity::kWarning, "--cpu-task-priority normal")) << Dump(found);
  lane->set_isolation(v1::ISOLATION_CPU_SCHED_IDLE);
  found = DescribeDaemon(stats);
  EXPECT_TRUE(Has(found, "isolation", Severity::kOk, "SCHED_IDLE")) << Dump(found);
}

TEST(DoctorPython, TorchPipeliningAndThePackageAreReported) {
  std::vector<Finding> found = InterpretPythonProbe(
      "py", 0, R"({"python": "3.11.7", "torch_error": "ModuleNotFoundError: No module named 'torch'",)"
               R"( "freeride": "/x/freeride/__init__.py", "libfreeride": "/x/lib/libfreeride.so"})");
  EXPECT_TRUE(Has(found, "pytorch", Severity::kWarning, "py -m pip install torch")) << Dump(found);
  EXPECT_TRUE(Has(found, "python package", Severity::kOk, "/x/lib/libfreeride.so")) << Dump(found);
  found = InterpretPythonProbe(
      "py", 0, "a warning first\n"
               R"({"python": "3.11.7", "torch": "2.13.0+cpu", "torch_cuda": null, "cuda_devices": 0,)"
               R"( "pipelining": true, "freeride_error": "FreeRideUnavailable: not found"})");
  EXPECT_TRUE(Has(found, "pytorch", Severity::kOk, "torch 2.13.0+cpu (CUDA none")) << Dump(found);
  EXPECT_TRUE(Has(found, "python package", Severity::kWarning, "not found")) << Dump(found);
  found = InterpretPythonProbe("py", 0, R"({"torch": "2.1.0", "torch_cuda": "12.1", "pipelining": false})");
  EXPECT_TRUE(Has(found, "pytorch", Severity::kWarning, "2.4 or later")) << Dump(found);
  found = InterpretPythonProbe("py", 1, "Traceback: boom");
  EXPECT_TRUE(Has(found, "python", Severity::kWarning, "exit 1")) << Dump(found);
  EXPECT_FALSE(AnyBlocker(found));
  found = CheckPython("/nonexistent/python3", "", "");
  EXPECT_TRUE(Has(found, "python", Severity::kWarning, "/nonexistent/python3")) << Dump(found);
}

TEST(DoctorFormat, BlockersAreCountedWithTheirFixes) {
  std::vector<Finding> found = {{"shm", Severity::kOk, "fine", ""},
                                {"state dir", Severity::kBlocker, "/x is not a directory", "use /y"},
                                {"mps", Severity::kWarning, "no MPS", "install it"}};
  std::string text = FormatFindings(found);
  EXPECT_NE(text.find("FAIL  state dir       /x is not a directory\n"), std::string::npos) << text;
  EXPECT_NE(text.find("fix: use /y"), std::string::npos) << text;
  EXPECT_NE(text.find("1 problem(s) block FreeRide"), std::string::npos) << text;
  EXPECT_TRUE(AnyBlocker(found));
  found.erase(found.begin() + 1);
  EXPECT_NE(FormatFindings(found).find("nothing blocks FreeRide; 1 warning(s)"), std::string::npos);
}

// The command itself: exit 1 with a bad state dir, 0 on a sound CPU node with
// a daemon running (this machine has no GPU: the driver is a note).
TEST(DoctorCommand, ExitsNonZeroOnlyWhenSomethingBlocks) {
  TempDir dir;
  Touch(fs::path(dir.path()) / "file");
  std::string doctor = std::string(FREERIDE_BIN) + " doctor --socket " + dir.path() + "/d.sock";
  ShellResult bad = RunShell(doctor + " --state-dir " + dir.path() + "/file", dir.path());
  EXPECT_EQ(bad.status, 1) << bad.out << bad.err;
  EXPECT_NE(bad.out.find("FAIL  state dir"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("1 problem(s) block FreeRide"), std::string::npos) << bad.out;

  DaemonOptions options = CpuDaemon(dir, 1);
  Daemon daemon(options);
  std::string error;
  ASSERT_TRUE(daemon.Start(&error)) << error;
  ShellResult good = RunShell(doctor + " --state-dir " + options.state_dir, dir.path());
  EXPECT_EQ(good.status, 0) << good.out << good.err;
  EXPECT_NE(good.out.find("nothing blocks FreeRide"), std::string::npos) << good.out;
  EXPECT_NE(good.out.find("ok    daemon          running"), std::string::npos) << good.out;
  EXPECT_NE(good.out.find("pytorch"), std::string::npos) << good.out;
  EXPECT_NE(good.out.find("ok    isolation       CPU lanes: side tasks in SCHED_IDLE"), std::string::npos)
      << good.out;
  daemon.Shutdown();
}

// `doctor --ready`, the readiness probe of deploy/kubernetes: a missing
// daemon blocks; a running one passes, without the slow checks.
TEST(DoctorCommand, ReadyNeedsARunningDaemon) {
  TempDir dir;
  DaemonOptions options = CpuDaemon(dir, 1);
  std::string ready = std::string(FREERIDE_BIN) + " doctor --ready --socket " + options.socket_path +
                      " --state-dir " + options.state_dir;
  ShellResult none = RunShell(ready, dir.path());
  EXPECT_EQ(none.status, 1) << none.out << none.err;
  EXPECT_NE(none.out.find("FAIL  daemon          none running at " + options.socket_path),
            std::string::npos) << none.out;
  Daemon daemon(options);
  std::string error;
  ASSERT_TRUE(daemon.Start(&error)) << error;
  ShellResult up = RunShell(ready, dir.path());
  EXPECT_EQ(up.status, 0) << up.out << up.err;
  EXPECT_NE(up.out.find("ok    daemon          running"), std::string::npos) << up.out;
  EXPECT_EQ(up.out.find("pytorch"), std::string::npos) << "no Python probe in a readiness check";
  EXPECT_EQ(up.out.find("mps"), std::string::npos) << "no MPS start in a readiness check";
  daemon.Shutdown();
}

}  // namespace
}  // namespace freeride::cli
