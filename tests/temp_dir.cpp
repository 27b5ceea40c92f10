// Every test's temporary files in one folder of its own, removed when the test program ends.
//
// The tests write checkpoints, tokenizers and profiles to the temporary folder (through
// std::filesystem::temp_directory_path(), which reads TMPDIR, and ::testing::TempDir(), which reads
// TEST_TMPDIR). ctest runs each test as its own process, so files named by the process id were
// left behind by the hundred in /tmp. Pointing both variables at a fresh folder before the first
// test, and removing that folder after the last, leaves nothing behind (a crashed test leaves its
// folder, which says which process it was) without each test cleaning up after itself.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <optional>
#include <string>
#include <system_error>

namespace {

class TemporaryFolder : public ::testing::Environment {
 public:
  void SetUp() override {
    folder_ = std::filesystem::temp_directory_path() / ("iron_tests_" + std::to_string(::getpid()));
    std::filesystem::create_directories(folder_);
    // Before the first test, while the program runs no other thread: setenv is then safe.
    // (With --gtest_repeat each repetition sets up again, after the last one's TearDown.)
    for (size_t i = 0; i < std::size(kVariables); ++i) {
      const char* was = std::getenv(kVariables[i]);
      before_[i] = was ? std::optional<std::string>(was) : std::nullopt;
    }
    ::setenv(kVariables[0], folder_.c_str(), 1);                // TMPDIR
    ::setenv(kVariables[1], (folder_.string() + "/").c_str(), 1);  // TEST_TMPDIR: ends with '/'
  }
  // The variables as they were, so that what runs at exit (static destructors, atexit) finds a
  // temporary folder that exists; then the folder goes.
  void TearDown() override {
    for (size_t i = 0; i < std::size(kVariables); ++i) {
      if (before_[i])
        ::setenv(kVariables[i], before_[i]->c_str(), 1);
      else
        ::unsetenv(kVariables[i]);
    }
    std::error_code ignored;  // a folder that cannot be removed costs disk space, not a result
    std::filesystem::remove_all(folder_, ignored);
  }

 private:
  static constexpr const char* kVariables[] = {"TMPDIR", "TEST_TMPDIR"};
  std::filesystem::path folder_;
  std::optional<std::string> before_[std::size(kVariables)];  // each variable's value before
};

// GoogleTest takes ownership; registered before main, as its documentation allows.
[[maybe_unused]] ::testing::Environment* const registered =
    ::testing::AddGlobalTestEnvironment(new TemporaryFolder);

}  // namespace
