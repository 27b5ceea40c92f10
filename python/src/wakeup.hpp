// A wake-up for an event loop (iron.Stream's and iron.Api's streams under asyncio).
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>

#include "iron/error.hpp"

namespace iron::python {

// A stream's wake-up for an event loop: an eventfd, opened the first time a reader asks for it
// (a stream read only from threads never opens one). The engine's thread signals it after each
// piece of news; it is shared by the request's on_news and the Python stream, so whichever lets
// go last closes it, never while the engine may still write.
class Wakeup {
 public:
  ~Wakeup() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fileno() {
    std::lock_guard lock(mutex_);
    if (fd_ < 0) {
      const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
      if (fd < 0) io_error(std::string("cannot make an eventfd for the stream: ") + std::strerror(errno));
      fd_ = fd;
    }
    return fd_;
  }
  void signal() {
    const int fd = fd_.load(std::memory_order_acquire);
    const uint64_t one = 1;
    if (fd >= 0) (void)!::write(fd, &one, sizeof one);
  }
  void clear() {
    const int fd = fd_.load(std::memory_order_acquire);
    uint64_t count = 0;
    if (fd >= 0) (void)!::read(fd, &count, sizeof count);
  }

 private:
  std::mutex mutex_;
  std::atomic<int> fd_{-1};
};

}  // namespace iron::python
