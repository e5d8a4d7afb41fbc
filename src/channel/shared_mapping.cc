#include "channel/shared_mapping.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace freeride {

SharedMapping::~SharedMapping() { Reset(); }

SharedMapping::SharedMapping(SharedMapping&& other) noexcept { *this = std::move(other); }

SharedMapping& SharedMapping::operator=(SharedMapping&& other) noexcept {
  if (this != &other) {
    Reset();
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(fd_, other.fd_);
    std::swap(path_, other.path_);
  }
  return *this;
}

void SharedMapping::Reset() {
  if (data_) munmap(data_, size_);
  if (fd_ >= 0) close(fd_);
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
  path_.clear();
}

bool SharedMapping::Map(const std::string& path, size_t size, bool writable, bool create,
                        std::string* error) {
  Reset();
  int flags = (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW;
  if (create) flags |= O_CREAT;
  int fd = open(path.c_str(), flags, 0600);
  if (fd < 0) {
    *error = fmt::format("cannot open {}: {}", path, std::strerror(errno));
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *error = fmt::format("{} is not a regular file", path);
    close(fd);
    return false;
  }
  if (static_cast<size_t>(st.st_size) < size) {
    if (!create || ftruncate(fd, static_cast<off_t>(size)) != 0) {
      *error = fmt::format("{} is {} bytes, expected at least {}", path, st.st_size, size);
      close(fd);
      return false;
    }
  }
  int prot = PROT_READ | (writable ? PROT_WRITE : 0);
  void* data = mmap(nullptr, size, prot, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    *error = fmt::format("cannot map {}: {}", path, std::strerror(errno));
    close(fd);
    return false;
  }
  data_ = data;
  size_ = size;
  fd_ = fd;
  path_ = path;
  return true;
}

bool SharedMapping::Unlinked() const {
  struct stat st;
  return fd_ >= 0 && fstat(fd_, &st) == 0 && st.st_nlink == 0;
}

}  // namespace freeride
