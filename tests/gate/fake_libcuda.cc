// A stand-in for libcuda.so.1 that records every call, so the interposer's
// path from lookup to launch is tested on machines with no GPU.  Built as
// tests/gate/fake/libcuda.so.1; the client below finds it by
// LD_LIBRARY_PATH.  Records go to a log the client prints.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

namespace {
std::string g_log;
unsigned g_capturing_stream = 0;  // the stream (by value) that reads as capturing
int g_register_result = 0;
int g_write_result = 0;
std::set<uintptr_t> g_done_streams;  // the streams cuStreamQuery finds with no work left
std::mutex g_log_mutex;  // launch ahead's submitter logs beside the client's threads
void Log(const std::string& line) {
  std::lock_guard lock(g_log_mutex);
  g_log += line + "\n";
}
std::string Hex(const void* p) {
  char b[32];
  std::snprintf(b, sizeof b, "%p", p);
  return b;
}
}  // namespace

extern "C" {
using CuResult = int;
using CuStream = void*;
using CuDevicePtr = unsigned long long;

const char* fake_cuda_log() { return g_log.c_str(); }
void fake_cuda_set_capturing(unsigned stream) { g_capturing_stream = stream; }
void fake_cuda_set_register_result(int r) { g_register_result = r; }
// A stream write that fails (a broken context) stores nothing.
void fake_cuda_set_write_result(int r) { g_write_result = r; }

// The thread's capture mode, swapped as the driver does (0: global).
thread_local int g_capture_mode = 0;
CuResult cuThreadExchangeStreamCaptureMode(int* mode) {
  int old = g_capture_mode;
  g_capture_mode = *mode;
  *mode = old;
  return 0;
}
int fake_cuda_capture_mode() { return g_capture_mode; }

// Every stream reads as busy (CUDA_ERROR_NOT_READY) unless set done here.
// A query outside the relaxed capture mode (2) is refused
// (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED), so a caller that forgot to relax
// it is seen; a query of the capturing stream is logged.
void fake_cuda_set_stream_done(uintptr_t stream, int done) {
  if (done) g_done_streams.insert(stream);
  else g_done_streams.erase(stream);
}
CuResult cuStreamQuery(CuStream s) {
  if (g_capture_mode != 2) return 900;
  if (g_capturing_stream && reinterpret_cast<uintptr_t>(s) == g_capturing_stream) Log("query of a capturing stream");
  return g_done_streams.count(reinterpret_cast<uintptr_t>(s)) ? 0 : 600;
}

CuResult cuStreamWaitValue32_v2(CuStream s, CuDevicePtr addr, uint32_t value, unsigned flags) {
  Log("wait " + Hex(s) + " value " + std::to_string(value) + " flags " + std::to_string(flags) +
      (addr ? " addr-set" : " addr-null"));
  return 0;
}
// The page's "device pointer" is its host address (below), so the write lands
// where the daemon and the tasks read the word.
CuResult cuStreamWriteValue32_v2(CuStream s, CuDevicePtr addr, uint32_t value, unsigned flags) {
  Log("write " + Hex(s) + " value " + std::to_string(value) + " flags " + std::to_string(flags));
  if (g_write_result != 0) return g_write_result;
  *reinterpret_cast<volatile uint32_t*>(addr) = value;
  return 0;
}
// A memset of 32-bit words at a "device pointer" (a host address here).
CuResult cuMemsetD32Async(CuDevicePtr addr, unsigned value, size_t count, CuStream s) {
  Log("memset " + Hex(s) + " value " + std::to_string(value) + " count " + std::to_string(count));
  if (g_write_result != 0) return g_write_result;
  for (size_t i = 0; i < count; ++i) reinterpret_cast<volatile uint32_t*>(addr)[i] = value;
  return 0;
}
CuResult cuStreamIsCapturing(CuStream s, int* status) {
  *status = (g_capturing_stream && reinterpret_cast<uintptr_t>(s) == g_capturing_stream) ? 1 : 0;
  return 0;
}
CuResult cuMemHostRegister_v2(void* p, size_t n, unsigned flags) {
  Log("register " + std::to_string(n) + " flags " + std::to_string(flags));
  return g_register_result;
}
CuResult cuMemHostGetDevicePointer_v2(CuDevicePtr* d, void* p, unsigned) {
  *d = reinterpret_cast<CuDevicePtr>(p);
  return 0;
}
// Events made here go unlogged: the interposer fences and times pieces with
// them; every one reads as reached at once.  A record of any other event (a
// client's own, from kClientEvents up) is logged.
constexpr uintptr_t kClientEvents = 0xe0000;
CuResult cuEventCreate(void** event, unsigned) {
  static uintptr_t next = 1;
  *event = reinterpret_cast<void*>(next++);
  return 0;
}
CuResult cuEventRecord(void* e, CuStream s) {
  if (reinterpret_cast<uintptr_t>(e) >= kClientEvents) Log("event record " + Hex(e) + " on " + Hex(s));
  return 0;
}
CuResult cuEventQuery(void*) { return 0; }
CuResult cuEventElapsedTime_v2(float* ms, void*, void*) {
  *ms = 0.01f;
  return 0;
}
CuResult cuEventDestroy_v2(void*) { return 0; }
// Kernel 0xf1 takes an int and a long long (its launches log their values);
// 0xf2 is a library's kernel that takes a long long, which only the kernel
// form of the query names (the function form answers "no parameter 0");
// 0xf0 is a handle neither form of the parameter query knows; any other, none.
CuResult cuFuncGetParamInfo(void* f, size_t index, size_t* offset, size_t* size) {
  if (f == reinterpret_cast<void*>(0xf0)) return 400;  // CUDA_ERROR_INVALID_HANDLE
  const size_t sizes[] = {4, 8};
  if (f != reinterpret_cast<void*>(0xf1) || index >= 2) return 1;  // CUDA_ERROR_INVALID_VALUE: past the last
  *offset = index == 0 ? 0 : 8;
  *size = sizes[index];
  return 0;
}
CuResult cuKernelGetParamInfo(void* f, size_t index, size_t* offset, size_t* size) {
  if (f != reinterpret_cast<void*>(0xf2)) return 400;  // CUDA_ERROR_INVALID_HANDLE
  if (index >= 1) return 1;
  *offset = 0;
  *size = 8;
  return 0;
}
CuResult cuCtxGetCurrent(void** ctx) {
  *ctx = reinterpret_cast<void*>(0xc7);
  return 0;
}
CuResult cuCtxSetCurrent(void*) { return 0; }
// Stream 0xbad reads as an invalid handle (CUDA_ERROR_INVALID_HANDLE).
constexpr uintptr_t kBadStream = 0xbad;
CuResult cuStreamSynchronize(CuStream s) {
  Log("stream sync " + Hex(s));
  return reinterpret_cast<uintptr_t>(s) == kBadStream ? 400 : 0;
}
CuResult cuStreamSynchronize_ptsz(CuStream s) {
  Log("stream sync_ptsz " + Hex(s));
  return reinterpret_cast<uintptr_t>(s) == kBadStream ? 400 : 0;
}
// A line the client writes into the log, in its place among the driver's.
void fake_cuda_note(const char* line) { Log(std::string("note ") + line); }
CuResult cuLaunchKernel(void* f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        CuStream s, void** params, void**) {
  std::string args;
  if (f == reinterpret_cast<void*>(0xf1) && params)
    args = " args " + std::to_string(*static_cast<int*>(params[0])) + " " +
           std::to_string(*static_cast<long long*>(params[1]));
  if (f == reinterpret_cast<void*>(0xf2))
    args = params ? " kernel arg " + std::to_string(*static_cast<long long*>(params[0])) : " kernel no args";
  Log("launch " + Hex(s) + args);
  return 0;
}
CuResult cuLaunchKernel_ptsz(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CuStream s, void**, void**) {
  Log("launch_ptsz " + Hex(s));
  return 0;
}
CuResult cuGraphLaunch(void*, CuStream s) {
  Log("graph " + Hex(s));
  return 0;
}
CuResult cuMemcpyHtoD_v2(CuDevicePtr, const void*, size_t n) {
  Log("htod " + std::to_string(n));
  return 0;
}
CuResult cuMemcpyHtoD(CuDevicePtr, const void*, unsigned n) {
  Log("htod_v1 " + std::to_string(n));
  return 0;
}
CuResult cuMemcpyHtoDAsync_v2(CuDevicePtr d, const void* src, size_t n, CuStream s) {
  Log("htod_async " + Hex(s) + " dst " + Hex(reinterpret_cast<void*>(d)) + " src " + Hex(src) + " n " +
      std::to_string(n));
  return 0;
}
CuResult cuMemcpyBatchAsync_v2(CuDevicePtr*, CuDevicePtr*, size_t*, size_t count, void*, size_t*, size_t,
                               CuStream s) {
  Log("batch_v2 " + Hex(s) + " count " + std::to_string(count));
  return 0;
}
CuResult cuMemcpyBatchAsync(CuDevicePtr*, CuDevicePtr*, size_t*, size_t count, void*, size_t*, size_t,
                            size_t* fail_idx, CuStream s) {
  Log("batch_v1 " + Hex(s) + " count " + std::to_string(count) + (fail_idx ? " fail-index-set" : ""));
  return 0;
}
struct MemLocation {
  int type, id;
};
CuResult cuMemPrefetchAsync_v2(CuDevicePtr d, size_t n, MemLocation to, unsigned flags, CuStream s) {
  Log("prefetch " + Hex(s) + " n " + std::to_string(n) + " to " + std::to_string(to.type) + ":" +
      std::to_string(to.id) + " flags " + std::to_string(flags));
  return 0;
}
CuResult cuMemPrefetchBatchAsync(CuDevicePtr*, size_t* sizes, size_t count, MemLocation*, size_t*, size_t,
                                 unsigned long long, CuStream s) {
  Log("prefetch_batch " + Hex(s) + " count " + std::to_string(count) + " last " + std::to_string(sizes[count - 1]));
  return 0;
}
CuResult cuGraphUpload(void*, CuStream s) {
  Log("upload " + Hex(s));
  return 0;
}
CuResult cuMemsetD2D8_v2(CuDevicePtr, size_t pitch, unsigned char v, size_t w, size_t h) {
  Log("memset2d pitch " + std::to_string(pitch) + " value " + std::to_string(v) + " " + std::to_string(w) + "x" +
      std::to_string(h));
  return 0;
}
CuResult cuMemBatchDecompressAsync(void*, size_t count, unsigned, size_t* error_idx, CuStream s) {
  Log("decompress " + Hex(s) + " count " + std::to_string(count) + (error_idx ? " error-index-set" : ""));
  return 0;
}
struct InstantiateParams {
  uint64_t flags;
  CuStream upload_stream;
  void* error_node;
  int result;
};
CuResult cuGraphInstantiateWithParams(void** exec, void*, InstantiateParams* p) {
  Log("instantiate flags " + std::to_string(p ? p->flags : 0) + (p && p->upload_stream ? " upload-stream-set" : ""));
  *exec = reinterpret_cast<void*>(0xe1);
  if (p) p->result = 0;
  return 0;
}
CuResult cuGraphInstantiateWithParams_ptsz(void** exec, void* graph, InstantiateParams* p) {
  Log("instantiate_ptsz");
  return cuGraphInstantiateWithParams(exec, graph, p);
}
CuResult cuGraphUpload_ptsz(void*, CuStream s) {
  Log("upload_ptsz " + Hex(s));
  return 0;
}
CuResult cuGraphExecDestroy(void* exec) {
  Log("exec destroy " + Hex(exec));
  return 0;
}
// An update of an instantiated graph's kernel node: what a later launch of
// the exec runs (and one already submitted does not).
CuResult cuGraphExecKernelNodeSetParams_v2(void* exec, void* node, const void*) {
  Log("exec kernel node set " + Hex(exec) + " node " + Hex(node));
  return 0;
}
CuResult cuStreamBatchMemOp_v2(...) {
  Log("batchmemop");
  return 0;
}
CuResult cuMemcpyHtoA_v2(void* array, size_t offset, const void*, size_t n) {
  Log("htoa " + Hex(array) + " offset " + std::to_string(offset) + " n " + std::to_string(n));
  return 0;
}
CuResult cuCtxSynchronize() {
  Log("sync");
  return 0;
}

CuResult cuGetProcAddress_v2(const char* name, void** pfn, int version, uint64_t flags, int* status) {
  Log(std::string("lookup ") + name + " " + std::to_string(version) + " " + std::to_string(flags));
  bool pt = (flags & 2) != 0;
  void* fn = nullptr;
  if (!std::strcmp(name, "cuLaunchKernel"))
    fn = pt ? reinterpret_cast<void*>(&cuLaunchKernel_ptsz) : reinterpret_cast<void*>(&cuLaunchKernel);
  else if (!std::strcmp(name, "cuGraphLaunch")) fn = reinterpret_cast<void*>(&cuGraphLaunch);
  else if (!std::strcmp(name, "cuMemcpyHtoD"))
    fn = version >= 3020 ? reinterpret_cast<void*>(&cuMemcpyHtoD_v2) : reinterpret_cast<void*>(&cuMemcpyHtoD);
  else if (!std::strcmp(name, "cuMemcpyHtoDAsync")) fn = reinterpret_cast<void*>(&cuMemcpyHtoDAsync_v2);
  else if (!std::strcmp(name, "cuMemcpyBatchAsync"))
    fn = version >= 13000 ? reinterpret_cast<void*>(&cuMemcpyBatchAsync_v2) : reinterpret_cast<void*>(&cuMemcpyBatchAsync);
  else if (!std::strcmp(name, "cuMemPrefetchAsync") && version >= 12020) fn = reinterpret_cast<void*>(&cuMemPrefetchAsync_v2);
  else if (!std::strcmp(name, "cuMemPrefetchBatchAsync")) fn = reinterpret_cast<void*>(&cuMemPrefetchBatchAsync);
  else if (!std::strcmp(name, "cuMemBatchDecompressAsync")) fn = reinterpret_cast<void*>(&cuMemBatchDecompressAsync);
  else if (!std::strcmp(name, "cuGraphInstantiateWithParams"))
    fn = pt ? reinterpret_cast<void*>(&cuGraphInstantiateWithParams_ptsz)
            : reinterpret_cast<void*>(&cuGraphInstantiateWithParams);
  else if (!std::strcmp(name, "cuGraphUpload")) fn = reinterpret_cast<void*>(&cuGraphUpload);
  else if (!std::strcmp(name, "cuGraphExecKernelNodeSetParams") && version >= 12000)
    fn = reinterpret_cast<void*>(&cuGraphExecKernelNodeSetParams_v2);
  else if (!std::strcmp(name, "cuMemsetD2D8")) fn = reinterpret_cast<void*>(&cuMemsetD2D8_v2);
  else if (!std::strcmp(name, "cuStreamBatchMemOp")) fn = reinterpret_cast<void*>(&cuStreamBatchMemOp_v2);
  else if (!std::strcmp(name, "cuCtxSynchronize")) fn = reinterpret_cast<void*>(&cuCtxSynchronize);
  else if (!std::strcmp(name, "cuStreamSynchronize")) fn = reinterpret_cast<void*>(&cuStreamSynchronize);
  else if (!std::strcmp(name, "cuGetProcAddress")) fn = reinterpret_cast<void*>(&cuGetProcAddress_v2);
  if (status) *status = fn ? 0 : 1;
  if (!fn) return 500;  // CUDA_ERROR_NOT_FOUND
  *pfn = fn;
  return 0;
}
}
