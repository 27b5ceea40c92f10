// The graph layer (src/graph/: record, plan, lower, call) is device-independent: the devices
// (src/devices/) implement its device interface (graph/device.hpp) and the operators (src/ops/)
// its Operator, never the other way round. This keeps it so: no file under src/graph/ may
// include a header from devices/ or ops/. What graph/ needs of either belongs in graph/ (as an
// interface they implement), in core/ (below every layer) or in include/iron/.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

namespace fs = std::filesystem;

TEST(GraphLayer, IncludesNothingFromDevicesOrOps) {
  const fs::path graph = fs::path(IRON_SOURCE_DIR) / "src" / "graph";
  ASSERT_TRUE(fs::is_directory(graph)) << graph;
  const std::regex reaches_down(R"(^\s*#\s*include\s*["<](devices|ops)/)");
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(graph)) {
    if (!entry.is_regular_file()) continue;
    const std::string ext = entry.path().extension().string();
    if (ext != ".hpp" && ext != ".cpp" && ext != ".h" && ext != ".inc") continue;
    ++files;
    std::ifstream in(entry.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n)
      EXPECT_FALSE(std::regex_search(line, reaches_down))
          << entry.path().lexically_relative(IRON_SOURCE_DIR).string() << ":" << n << ": " << line
          << "\n  the graph layer must not depend on a device or an operator: move what it needs into "
             "graph/ (an interface they implement) or core/";
  }
  EXPECT_GT(files, 10) << "no sources found under " << graph;
}
