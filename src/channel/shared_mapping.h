// A memory-mapped file, unmapped and closed on destruction.  Not
// synchronised: one thread at a time; the mapped memory is the user's to
// share.
#pragma once
#include <cstddef>
#include <string>

namespace freeride {

class SharedMapping {
 public:
  SharedMapping() = default;
  ~SharedMapping();
  SharedMapping(SharedMapping&& other) noexcept;
  SharedMapping& operator=(SharedMapping&& other) noexcept;
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;

  // Opens (and with create, creates with mode 0600 and sizes) the file at
  // path and maps `size` bytes of it.  A file smaller than `size` is an
  // error unless create is set.  Returns false and sets *error on failure
  // (a symbolic link or anything but a regular file is refused).  Replaces
  // any earlier mapping.
  bool Map(const std::string& path, size_t size, bool writable, bool create, std::string* error);
  // Unmaps and closes; data() is then null.  Safe when nothing is mapped.
  void Reset();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  // True when the file was unlinked after it was mapped (its owner left).
  bool Unlinked() const;

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
  std::string path_;
};

}  // namespace freeride
