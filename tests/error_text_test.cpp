// escaped() and cut_list(): how messages quote what came from a file (issue 17, item 7).
#include <gtest/gtest.h>

#include "iron/error.hpp"
#include "iron/log.hpp"

namespace {

TEST(ErrorText, EscapesControlBytesAndInvalidUtf8) {
  EXPECT_EQ(iron::escaped("plain name"), "plain name");
  EXPECT_EQ(iron::escaped("caf\xc3\xa9 \xe2\x9c\x93"), "caf\xc3\xa9 \xe2\x9c\x93");  // valid UTF-8 kept
  EXPECT_EQ(iron::escaped("a\x1b[31mred\n\t\\"), "a\\x1b[31mred\\n\\t\\\\");
  EXPECT_EQ(iron::escaped("\xff\xc3(\xed\xa0\x80"), "\\xff\\xc3(\\xed\\xa0\\x80");  // bad, truncated, surrogate
  EXPECT_EQ(iron::escaped("\xc2\x9b"), "\\xc2\\x9b");  // a C1 control (CSI) is escaped too
  EXPECT_EQ(iron::escaped(std::string(300, 'x')), std::string(200, 'x') + "...");
  EXPECT_EQ(iron::escaped("\xc3\xa9\xc3\xa9\xc3\xa9", 2), "\xc3\xa9\xc3\xa9...");  // cut by characters
}

TEST(ErrorText, CutListsNameTheRest) {
  std::vector<std::string> items;
  for (int i = 0; i < 4110; ++i) items.push_back(std::string(1, 't').append(std::to_string(i)));
  std::string logged;
  iron::set_log_sink([&](iron::LogLevel, std::string_view m) { logged = m; });
  const iron::LogLevel level = iron::log_level();
  iron::set_log_level(iron::LogLevel::debug);
  const std::string cut = iron::cut_list(items, "missing");
  iron::set_log_level(level);
  iron::set_log_sink(nullptr);
  EXPECT_EQ(cut.substr(0, 8), "t0, t1, ");
  EXPECT_NE(cut.find("t19, ... and 4,090 more"), std::string::npos) << cut;
  EXPECT_EQ(cut.find("t20"), std::string::npos);
  EXPECT_NE(logged.find("t4109"), std::string::npos);  // IRON_LOG=debug shows the whole list
  EXPECT_EQ(iron::cut_list({"a", "b"}, "missing"), "a, b");
}

}  // namespace
