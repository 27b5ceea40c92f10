// What any part of IRON that starts threads or picks a thread count asks of the operating
// system. Neither is about a device: the CPU device's thread pool (devices/cpu/thread_pool.hpp)
// and the graph layer's run queue (graph/run_queue.hpp) both start threads, and a graph's
// default thread count is the CPUs this process may use. Here, below both, so that graph/ needs
// nothing from devices/.
#pragma once

namespace iron {

/// The CPUs this process may run on (sched_getaffinity), at least 1: the default thread count.
int available_cpus();
/// Blocks the asynchronous signals (Ctrl-C, a hang-up, a terminal resize, ...) on the calling
/// thread, so that handlers run on the application's threads only: every thread IRON starts
/// (the pool's workers, a graph's run queue) calls it first.
void block_asynchronous_signals();

}  // namespace iron
