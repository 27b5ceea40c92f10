#include "core/threads.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <csignal>
#include <thread>

namespace iron {

int available_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

void block_asynchronous_signals() {
  // A thread of ours never runs a signal handler: an asynchronous signal (Ctrl-C, a hangup, a
  // terminal resize, a stop or continue) goes to the application's own threads, whose handlers
  // may read state only those threads set up. libedit's reads the line editor it sets up while
  // the main thread reads a line; run on a worker, it read a null editor and crashed `iron chat`
  // (a CI run of tests/cli/chat_terminal.sh: SIGSEGV in libedit on a worker's stack).
  sigset_t asynchronous;
  sigemptyset(&asynchronous);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGTSTP, SIGCONT, SIGTTIN, SIGTTOU, SIGUSR1, SIGUSR2,
                SIGALRM, SIGCHLD, SIGPIPE})
    sigaddset(&asynchronous, s);
  pthread_sigmask(SIG_BLOCK, &asynchronous, nullptr);
}

}  // namespace iron
